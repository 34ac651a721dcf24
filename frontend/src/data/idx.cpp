// IDX reader (zlib's gz* functions read gzip and plain files alike) and the Fashion-MNIST
// loader built on it.
#include "kiln/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

namespace kiln::data {

namespace {

constexpr const char* kReinstallFix =
    "Fix: the file is damaged; download or reinstall it (for Fashion-MNIST: "
    "apt-get install --reinstall dataset-fashion-mnist).";

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

bool known_type(uint8_t code) {
  switch (static_cast<IdxType>(code)) {
    case IdxType::UInt8:
    case IdxType::Int8:
    case IdxType::Int16:
    case IdxType::Int32:
    case IdxType::Float32:
    case IdxType::Float64:
      return true;
  }
  return false;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

// Reads up to n bytes and returns how many came (fewer only at the end of the data).
// zlib reports a gzip stream cut short as Z_BUF_ERROR: that is a truncated file, not
// corrupt data, so it gets its own message.
size_t read_some(gzFile f, void* buf, size_t n, const std::string& path, const char* what) {
  size_t got = 0;
  auto* out = static_cast<uint8_t*>(buf);
  while (got < n) {
    unsigned ask = static_cast<unsigned>(std::min<size_t>(n - got, size_t{1} << 30));
    int r = gzread(f, out + got, ask);
    int errnum = Z_OK;
    const char* msg = gzerror(f, &errnum);
    if (errnum == Z_BUF_ERROR) {
      KILN_FAIL("[read_idx] '", path, "' is truncated: its gzip stream ends early while reading ",
                what, " (zlib: ", msg, "). ", kReinstallFix);
    }
    KILN_CHECK(r >= 0 && errnum == Z_OK, "[read_idx] '", path,
               "': ", errnum == Z_ERRNO ? "read error" : "corrupt gzip data", " while reading ",
               what, " (", errnum == Z_ERRNO ? std::strerror(errno) : std::string("zlib: ") + msg,
               "). ", kReinstallFix);
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

void swap_bytes(std::vector<uint8_t>& bytes, size_t width) {
  if (width == 1 || std::endian::native == std::endian::big) return;
  for (size_t i = 0; i + width <= bytes.size(); i += width)
    std::reverse(bytes.begin() + static_cast<ptrdiff_t>(i),
                 bytes.begin() + static_cast<ptrdiff_t>(i + width));
}

// Calls fn(T{}) with the C++ type stored for an IDX element type.
template <class Fn>
void visit_idx_type(IdxType t, Fn&& fn) {
  switch (t) {
    case IdxType::UInt8:
      return fn(uint8_t{});
    case IdxType::Int8:
      return fn(int8_t{});
    case IdxType::Int16:
      return fn(int16_t{});
    case IdxType::Int32:
      return fn(int32_t{});
    case IdxType::Float32:
      return fn(float{});
    case IdxType::Float64:
      return fn(double{});
  }
}

bool is_floating_idx(IdxType t) {
  return t == IdxType::Float32 || t == IdxType::Float64;
}

std::string first_existing(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {dir + "/" + name + ".gz", dir + "/" + name}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  }
  return {};
}

std::string fashion_file(const std::string& dir, Split split, const char* kind) {
  const std::string name =
      std::string(split == Split::Train ? "train" : "t10k") + "-" + kind + "-ubyte";
  std::string path = first_existing(dir, name);
  std::error_code ec;
  KILN_CHECK(!path.empty(), "[load_fashion_mnist] Fashion-MNIST file not found: expected '", dir,
             "/", name, ".gz' (or the uncompressed '", dir, "/", name, "')",
             std::filesystem::is_directory(dir, ec) ? "" : ", and the folder does not exist",
             ". Fix: install the dataset with `apt-get install dataset-fashion-mnist` (it puts the "
             "files in /usr/share/datasets/fashion-mnist), or set KILN_FASHION_MNIST_DIR to the "
             "folder that holds {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.");
  return path;
}

}  // namespace

std::string_view idx_type_name(IdxType t) {
  switch (t) {
    case IdxType::UInt8:
      return "ubyte";
    case IdxType::Int8:
      return "byte";
    case IdxType::Int16:
      return "int16";
    case IdxType::Int32:
      return "int32";
    case IdxType::Float32:
      return "float32";
    case IdxType::Float64:
      return "float64";
  }
  return "unknown";
}

size_t idx_type_size(IdxType t) {
  size_t size = 0;
  visit_idx_type(t, [&](auto tag) { size = sizeof(tag); });
  return size;
}

IdxArray read_idx_array(const std::string& path) {
  std::error_code ec;
  KILN_CHECK(std::filesystem::exists(path, ec), "[read_idx] cannot open '", path,
             "': no such file. Fix: check the path (IDX files are usually named like "
             "train-images-idx3-ubyte.gz).");
  KILN_CHECK(!std::filesystem::is_directory(path, ec), "[read_idx] '", path,
             "' is a folder, expected an IDX file. Fix: pass the path of the file itself.");
  errno = 0;
  GzFile file(gzopen(path.c_str(), "rb"));
  KILN_CHECK(file != nullptr, "[read_idx] cannot open '", path,
             "': ", errno ? std::strerror(errno) : "zlib could not open it",
             ". Fix: check that the file is readable.");
  gzbuffer(file.get(), 1 << 18);

  // Magic number: two zero bytes, the element type code, the number of dims.
  uint8_t magic[4];
  size_t got = read_some(file.get(), magic, 4, path, "the magic number");
  KILN_CHECK(got == 4, "[read_idx] '", path,
             "' is truncated: expected a 4-byte magic number, "
             "found only ",
             got, " bytes. ", kReinstallFix);
  uint32_t magic_value = (uint32_t{magic[0]} << 24) | (uint32_t{magic[1]} << 16) |
                         (uint32_t{magic[2]} << 8) | magic[3];
  KILN_CHECK(magic[0] == 0 && magic[1] == 0 && known_type(magic[2]) && magic[3] > 0, "[read_idx] '",
             path,
             "' is not an IDX file: expected a magic number 0x0000TTNN "
             "(two zero bytes, a type code TT of 08 ubyte, 09 byte, 0B int16, 0C int32, 0D float32 "
             "or 0E float64, and a dim count NN >= 1), found ",
             hex32(magic_value), ". Fix: pass an IDX file such as train-images-idx3-ubyte.gz.");

  IdxArray array;
  array.type = static_cast<IdxType>(magic[2]);
  const size_t ndim = magic[3];
  const size_t width = idx_type_size(array.type);

  std::vector<uint8_t> header(4 * ndim);
  got = read_some(file.get(), header.data(), header.size(), path, "the dims");
  KILN_CHECK(got == header.size(), "[read_idx] '", path,
             "' is truncated: its magic number announces ", ndim, " dims (", header.size(),
             " bytes), found only ", got, " bytes of dims. ", kReinstallFix);
  // Element count, refusing counts whose byte size would not fit in memory (a damaged
  // header) before allocating anything. The zero sizes are left out of the bound: an empty
  // array's other dims still make its strides, which must fit int64 too ([0, 2^32-1, ...]).
  const int64_t kMaxBytes = int64_t{1} << 40;
  int64_t extent = 1;  // the product of the non-zero sizes, saturating at kMaxBytes + 1
  bool empty = false;
  for (size_t d = 0; d < ndim; ++d) {
    const uint8_t* p = &header[4 * d];
    int64_t size = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3];
    array.dims.push_back(size);
    empty = empty || size == 0;
    if (size > 0) extent = size > kMaxBytes / extent ? kMaxBytes + 1 : extent * size;
  }
  KILN_CHECK(extent * static_cast<int64_t>(width) <= kMaxBytes, "[read_idx] '", path,
             "' has implausible dims ", shape_str(array.dims), " (",
             empty ? "its non-zero sizes describe " : "", "more than 1 TiB of ",
             idx_type_name(array.type), " data). Fix: the header is damaged; ",
             "download or reinstall the file.");
  const int64_t count = empty ? 0 : extent;

  // Read in chunks that grow with what arrived (64 KiB doubling to 16 MiB), so a damaged
  // header announcing more data than the file holds fails as "truncated" having allocated
  // about what the file holds: not what the header claims, nor 16 MiB for a tiny file.
  const size_t expected = static_cast<size_t>(count) * width;
  const size_t kMaxChunk = size_t{16} << 20;
  size_t chunk = size_t{64} << 10;
  size_t have = 0;
  while (have < expected) {
    size_t want = std::min(expected - have, chunk);
    array.bytes.resize(have + want);
    size_t r = read_some(file.get(), array.bytes.data() + have, want, path, "the data");
    have += r;
    if (r < want) break;
    chunk = std::min(chunk * 2, kMaxChunk);
  }
  KILN_CHECK(have == expected, "[read_idx] '", path, "' is truncated: dims ", shape_str(array.dims),
             " of ", idx_type_name(array.type), " need ", expected, " bytes of data, found only ",
             have, ". ", kReinstallFix);
  // One more byte must hit the end; for gzip this read also checks the stream's CRC.
  uint8_t extra;
  size_t more = read_some(file.get(), &extra, 1, path, "past the end of the data");
  KILN_CHECK(more == 0, "[read_idx] '", path, "' holds more bytes than its dims ",
             shape_str(array.dims), " of ", idx_type_name(array.type), " describe (", expected,
             " bytes of data). Fix: the header does not match the data; download or reinstall "
             "the file.");
  swap_bytes(array.bytes, width);  // IDX stores multi-byte values big-endian
  return array;
}

Tensor read_idx(const std::string& path, std::optional<DType> dtype) {
  IdxArray array = read_idx_array(path);
  const bool floating = is_floating_idx(array.type);
  DType out_dtype = dtype.value_or(array.type == IdxType::Float32   ? kFloat32
                                   : array.type == IdxType::Float64 ? kFloat64
                                                                    : kInt32);
  KILN_CHECK(
      out_dtype == kInt32 || out_dtype == kInt64 || out_dtype == kFloat32 || out_dtype == kFloat64,
      "[read_idx] expected dtype int32, int64, float32 or float64, got ", out_dtype,
      ". Fix: read with one of those and convert with .to().");
  KILN_CHECK(!floating || is_floating(out_dtype), "[read_idx] '", path, "' holds ",
             idx_type_name(array.type), " values, which cannot be read as ", out_dtype,
             " without losing their fractions. Fix: read it as float32 or float64.");
  Tensor out = Tensor::empty(array.dims, out_dtype);
  const int64_t n = array.numel();
  visit_idx_type(array.type, [&](auto src_tag) {
    using S = decltype(src_tag);
    visit_dtype(out_dtype, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      if constexpr (std::is_arithmetic_v<D> && !std::is_same_v<D, bool>) {
        D* dst = static_cast<D*>(out.raw_data());
        for (int64_t i = 0; i < n; ++i) {
          S v;
          std::memcpy(&v, array.bytes.data() + i * sizeof(S), sizeof(S));
          dst[i] = static_cast<D>(v);
        }
      }
    });
  });
  return out;
}

std::string default_fashion_mnist_dir() {
  const char* env = std::getenv("KILN_FASHION_MNIST_DIR");
  if (env && *env) return env;
  return "/usr/share/datasets/fashion-mnist";
}

FashionMnist load_fashion_mnist(const std::string& dir, Split split) {
  const std::string images_path = fashion_file(dir, split, "images-idx3");
  const std::string labels_path = fashion_file(dir, split, "labels-idx1");
  IdxArray images = read_idx_array(images_path);
  IdxArray labels = read_idx_array(labels_path);

  KILN_CHECK(images.type == IdxType::UInt8 && images.dims.size() == 3 && images.dims[1] == 28 &&
                 images.dims[2] == 28,
             "[load_fashion_mnist] '", images_path,
             "': expected ubyte images of dims [N, 28, 28], got ", idx_type_name(images.type), " ",
             shape_str(images.dims),
             ". Fix: point KILN_FASHION_MNIST_DIR at the Fashion-MNIST files (is this another "
             "dataset, or are images and labels swapped?).");
  KILN_CHECK(
      labels.type == IdxType::UInt8 && labels.dims.size() == 1, "[load_fashion_mnist] '",
      labels_path, "': expected ubyte labels of dims [N], got ", idx_type_name(labels.type), " ",
      shape_str(labels.dims),
      ". Fix: point KILN_FASHION_MNIST_DIR at the Fashion-MNIST files (are images and labels "
      "swapped?).");
  const int64_t n = images.dims[0];
  KILN_CHECK(labels.dims[0] == n, "[load_fashion_mnist] '", images_path, "' holds ", n,
             " images but '", labels_path, "' holds ", labels.dims[0],
             " labels; expected one label per image. Fix: the two files come from different "
             "splits or versions; reinstall the dataset (apt-get install --reinstall "
             "dataset-fashion-mnist).");

  FashionMnist out;
  out.labels = Tensor::empty({n}, kInt64);
  int64_t* label = out.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    label[i] = labels.bytes[static_cast<size_t>(i)];
    KILN_CHECK(label[i] < 10, "[load_fashion_mnist] '", labels_path, "': label ", i, " is ",
               label[i], ", expected a class id in [0, 10). ", kReinstallFix);
  }
  out.images = Tensor::empty({n, 1, 28, 28}, kFloat32);
  float* pixel = out.images.data_ptr<float>();
  for (size_t i = 0; i < images.bytes.size(); ++i)
    pixel[i] = static_cast<float>(images.bytes[i]) / 255.0f;
  return out;
}

FashionMnist load_fashion_mnist(Split split) {
  return load_fashion_mnist(default_fashion_mnist_dir(), split);
}

const std::array<std::string_view, 10>& fashion_mnist_classes() {
  static const std::array<std::string_view, 10> names = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

}  // namespace kiln::data
