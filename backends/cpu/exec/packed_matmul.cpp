// PackedMatmul (packed_matmul.h): when to use the packed GEMM, and when to pack again.
#include "packed_matmul.h"

#include <algorithm>

namespace kiln::cpu::exec {

namespace {
bool same_list(IntList a, IntList b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
}  // namespace

bool PackedMatmul::applies(const Tensor& x, const Tensor& w, const Tensor& out) {
  if (!x.defined() || !w.defined() || !out.defined()) return false;
  if (x.dtype() != DType::Float32 || w.dtype() != DType::Float32 || out.dtype() != DType::Float32)
    return false;
  if (w.dim() != 2 || x.dim() < 1 || x.size(-1) != w.size(0)) return false;
  if (!x.is_contiguous() || !out.is_contiguous() || out.numel() == 0) return false;
  const int64_t k = w.size(0);
  const int64_t rows = k ? x.numel() / k : 0;
  return rows > 0 && out.numel() == rows * w.size(1) &&
         (rows < kMaxRows || w.numel() <= kSmallWeight);
}

void PackedMatmul::repack_if_changed(const Tensor& w) {
  const bool same = source_.defined() && source_.impl()->storage == w.impl()->storage &&
                    source_.storage_offset() == w.storage_offset() &&
                    same_list(source_.sizes(), w.sizes()) && same_list(source_.strides(), w.strides()) &&
                    source_version_ == w.version();
  if (same) return;
  packed_ = gemm::PackedB(w.data_ptr<float>(), w.size(0), w.size(1), w.stride(0), w.stride(1));
  source_ = w;
  source_version_ = w.version();
  ++packs_;
}

void PackedMatmul::run(const Tensor& x, const Tensor& w, const Tensor& out,
                       const gemm::RowEpilogue& epilogue) {
  repack_if_changed(w);
  const int64_t k = w.size(0);
  const int64_t rows = x.numel() / k;
  gemm::sgemm(rows, x.data_ptr<float>(), k, packed_, out.data_ptr<float>(), w.size(1), epilogue);
}

}  // namespace kiln::cpu::exec
