// The planned executor's matmul by a 2-D float32 weight through kiln's packed GEMM
// (kiln/cpu/gemm/gemm.h). The weight is packed on the first call and again only when it
// changes: another tensor, other strides, or a new storage version (an in-place update
// such as an optimizer step or load_state_dict bumps it), so a frozen or exported model
// packs each weight once. The product's rows can be handed to an epilogue as they
// complete, while they are still in cache.
#pragma once

#include <cstdint>

#include "kiln/cpu/gemm/gemm.h"
#include "kiln/tensor.h"

namespace kiln::cpu::exec {

class PackedMatmul {
 public:
  // Whether out = x [..., K] · w [K, N] runs here: float32 throughout, w 2-D, x and out
  // dense, and a shape class where the packed GEMM measured faster than OpenBLAS
  // (bench_gemm's layer rows, docs/perf.md): fewer rows than kMaxRows, or a weight of at
  // most kSmallWeight elements (256 x 256: 1.4x at 1,024 rows), whatever the rows.
  static bool applies(const Tensor& x, const Tensor& w, const Tensor& out);
  static constexpr int64_t kMaxRows = 512;
  static constexpr int64_t kSmallWeight = 128 * 1024;

  // out = x · w; `epilogue`, when given, runs on rows of the product flattened to
  // [rows, N] (rows = x.numel() / K) as they become final.
  void run(const Tensor& x, const Tensor& w, const Tensor& out,
           const gemm::RowEpilogue& epilogue = nullptr);
  int64_t packs() const { return packs_; }  // times the weight was packed (for tests)

 private:
  void repack_if_changed(const Tensor& w);

  gemm::PackedB packed_;
  // The weight packed_ was made from, held so that its storage cannot be freed and its
  // address handed to another tensor while the packed copy is kept.
  Tensor source_;
  uint64_t source_version_ = 0;
  int64_t packs_ = 0;
};

}  // namespace kiln::cpu::exec
