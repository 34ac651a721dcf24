// Reading and writing the safetensors format (huggingface/safetensors), the file format of
// kiln checkpoints: named tensors plus string metadata, readable by PyTorch and numpy.
//
// Layout: an 8-byte little-endian header length N; N bytes of UTF-8 JSON
//   {"__metadata__": {"key": "value", ...},
//    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
// padded with spaces to a multiple of 8; then the data buffer, in which each tensor is
// stored contiguous, row-major, little-endian at [begin, end). The tensors' ranges must
// cover the buffer exactly: no gaps, no overlaps, nothing after the last one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;                         // in the header's order
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry (may be empty)

  // The tensor called `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
};

// "F32", "BF16", ... for the dtypes kiln stores (all of them).
std::string_view safetensors_dtype_name(DType t);

// The whole file as bytes. Tensors are converted to contiguous CPU data. The header lists
// them in the given order; the data buffer orders them by decreasing element size (stable)
// so every tensor is aligned to its element size in the file, as the Python writer does.
// No "__metadata__" entry is written when `metadata` is empty. Throws kiln::Error for a
// duplicate or reserved ("__metadata__") name, an undefined or symbolic tensor, or
// a name or metadata string that is not valid UTF-8.
std::vector<uint8_t> safetensors_bytes(const NamedTensors& tensors,
                                       const std::map<std::string, std::string>& metadata = {});

// Writes safetensors_bytes() to `path` atomically: the bytes go to a temporary file in the
// same directory, which is fsync'ed and then renamed over `path`. On any failure the
// temporary file is removed and `path` is left as it was (absent or the old file).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file. Every field is validated before any tensor data is read:
// a corrupt, truncated or hostile file gives a kiln::Error that names the path and the
// problem (never a crash, an out-of-bounds read or a huge allocation). Tensors are new
// contiguous CPU tensors. The dtypes kiln cannot hold (U8, I8, I16, U16, U32, U64, F8_*)
// are refused with their name.
SafetensorsFile load_safetensors(const std::string& path);

// The same checks on bytes already in memory; `origin` names them in errors.
SafetensorsFile load_safetensors_bytes(const void* data, size_t size,
                                       const std::string& origin = "<memory>");

// The same checks, but the tensors view `data` in place instead of copying it (a mapped
// file, a library's data), and each keeps `owner` alive: the memory must stay valid and
// unchanged while `owner` lives. A tensor whose bytes are not aligned to its element size
// (only a foreign writer produces one) is copied instead.
SafetensorsFile view_safetensors_bytes(std::shared_ptr<const void> owner, const void* data,
                                       size_t size, const std::string& origin = "<memory>");

// The largest header accepted (the Python reader's limit): 100,000,000 bytes.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

}  // namespace kiln
