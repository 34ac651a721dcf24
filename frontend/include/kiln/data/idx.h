// Reading IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or plain, and
// loading Fashion-MNIST as ready-to-train tensors.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::data {

// The element type of an IDX file: the third byte of its magic number.
enum class IdxType : uint8_t {
  UInt8 = 0x08,
  Int8 = 0x09,
  Int16 = 0x0B,
  Int32 = 0x0C,
  Float32 = 0x0D,
  Float64 = 0x0E,
};

std::string_view idx_type_name(IdxType t);  // "ubyte", "int16", ...
size_t idx_type_size(IdxType t);

// An IDX file as stored: its element type, its dims, and its elements converted to host
// byte order (numel * idx_type_size(type) bytes). No conversion of values.
struct IdxArray {
  IdxType type = IdxType::UInt8;
  Shape dims;
  std::vector<uint8_t> bytes;

  int64_t numel() const { return kiln::numel(dims); }
};

// Reads and validates an IDX file. Gzip-compressed files (by content, not by name) are
// inflated with zlib. Throws kiln::Error naming the path for a missing file, a bad magic
// number, a truncated file, extra bytes after the data, or corrupt gzip data.
IdxArray read_idx_array(const std::string& path);

// The values of an IDX file as a tensor of shape `dims`. Without `dtype`: int32 for the
// integer types (kiln has no 8- or 16-bit integers; int32 holds all of them exactly),
// float32 and float64 for the floating ones. With `dtype` (int32, int64, float32 or
// float64) the values are converted, never scaled: read_idx(labels_path, kInt64).
Tensor read_idx(const std::string& path, std::optional<DType> dtype = std::nullopt);

// ---- Fashion-MNIST ----

enum class Split { Train, Test };

struct FashionMnist {
  Tensor images;  // float32 [N, 1, 28, 28], pixel / 255 in [0, 1] (like torchvision ToTensor)
  Tensor labels;  // int64 [N], class ids 0..9
};

// $KILN_FASHION_MNIST_DIR when set and non-empty, else /usr/share/datasets/fashion-mnist
// (where Debian's dataset-fashion-mnist package installs the files).
std::string default_fashion_mnist_dir();

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir` (60000 train or
// 10000 test samples). Checks that images are ubyte [N, 28, 28], labels ubyte [N] with
// values below 10, and that both hold the same N.
FashionMnist load_fashion_mnist(const std::string& dir, Split split);
FashionMnist load_fashion_mnist(Split split);  // from default_fashion_mnist_dir()

// Class names in label order ("T-shirt/top", "Trouser", ...).
const std::array<std::string_view, 10>& fashion_mnist_classes();

}  // namespace kiln::data
