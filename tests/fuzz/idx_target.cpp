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
  // One read per input: each gzopen costs zlib's large buffers, which dominate the run time
  // under ASan. The last byte picks the conversion, so both kinds are exercised.
  const bool as_float64 = size > 0 && (data[size - 1] & 1);
  Tensor t;
  try {
    t = data::read_idx(path, as_float64 ? std::optional<DType>{kFloat64} : std::nullopt);
  } catch (const Error&) {
    return 0;
  }
  // read_idx copies numel(dims) elements out of the array's bytes (ASan checks that they
  // are there). For a plain (not gzip) file, the dims must be the header's.
  KILN_FUZZ_EXPECT(t.is_contiguous(), t.type_str());
  if (data[0] == 0) {
    const size_t ndim = data[3];
    KILN_FUZZ_EXPECT(t.dim() == static_cast<int64_t>(ndim), t.type_str(), " for ", ndim, " dims");
    for (size_t d = 0; d < ndim; ++d) {
      const uint8_t* p = data + 4 + 4 * d;
      const int64_t size = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (p[2] << 8) | p[3];
      KILN_FUZZ_EXPECT(t.size(static_cast<int64_t>(d)) == size, t.type_str(), ": dim ", d,
                       " is ", size, " in the header");
    }
  }
  return 0;
}

}  // namespace kiln::fuzz
