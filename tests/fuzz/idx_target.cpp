// Fuzz target: the IDX reader (plain and gzip). read_idx takes a path, so the bytes are
// written to an in-memory file (memfd) and read back through /proc/self/fd: no disk, and
// the reader's own file handling (gzopen, chunked reads) is what runs.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fuzz/fuzz_targets.h"
#include "kiln/data/idx.h"

namespace kiln::fuzz {

namespace {

struct Scratch {
  int fd;
  std::string path;
};

// One memfd per process, rewritten for every input.
const Scratch& scratch() {
  static const Scratch s = [] {
    int fd = memfd_create("kiln-fuzz-idx", MFD_CLOEXEC);
    if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
    return Scratch{fd, "/proc/self/fd/" + std::to_string(fd)};
  }();
  return s;
}

void write_all(int fd, const uint8_t* data, size_t size) {
  if (ftruncate(fd, 0) != 0) throw std::runtime_error("ftruncate of the memfd failed");
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) throw std::runtime_error("pwrite to the memfd failed");
    done += static_cast<size_t>(n);
  }
}

}  // namespace

int fuzz_idx(const uint8_t* data, size_t size) {
  const std::string& path = scratch().path;
  write_all(scratch().fd, data, size);
  data::IdxArray array;
  try {
    array = data::read_idx_array(path);
  } catch (const Error&) {
    return 0;
  }
  KILN_FUZZ_EXPECT(array.bytes.size() == static_cast<size_t>(array.numel()) *
                                             data::idx_type_size(array.type),
                   array.bytes.size(), " bytes for dims ", shape_str(array.dims));
  // The tensor conversions: an accepted file must convert (its dims could still be too large
  // for a tensor, a refusal).
  for (std::optional<DType> dtype : {std::optional<DType>{}, std::optional<DType>{kFloat64}}) {
    try {
      Tensor t = data::read_idx(path, dtype);
      KILN_FUZZ_EXPECT(t.numel() == array.numel(), t.type_str(), " for dims ",
                       shape_str(array.dims));
    } catch (const Error&) {
    }
  }
  return 0;
}

}  // namespace kiln::fuzz
