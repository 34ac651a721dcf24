// The planned executor's conv2d through kiln's direct convolution (kiln/cpu/gemm/conv2d.h).
// The weight is packed on the first call and again only when it changes, by the rules of
// PackedMatmul (another tensor, other strides, a new storage version), so a frozen or
// exported model packs each convolution's weight once. The output's images can be handed
// to an epilogue as they complete, while they are still in cache.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/cpu/gemm/conv2d.h"
#include "kiln/ops/conv.h"
#include "kiln/tensor.h"

namespace kiln::cpu::exec {

class PackedConv {
 public:
  // Whether out = conv2d(x, w, bias) runs here (an undefined `out`: into a new tensor):
  // float32 throughout, dense operands, a CPU with direct-convolution kernels, and not a 1x1
  // convolution with stride 1 and no padding (the eager kernel multiplies the input planes
  // directly: no packing to save).
  static bool applies(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                      const ops::Conv2dAttrs& attrs);

  // Packs w if it changed since the last call (run does it too): a caller that will run
  // from several threads at once calls this first.
  void prepare(const Tensor& w, const ops::Conv2dAttrs& attrs) { repack_if_changed(w, attrs); }
  void run(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
           const ops::Conv2dAttrs& attrs, const gemm::ImageEpilogue& epilogue = nullptr);
  // The same through `output` (its bias, a per-channel affine and a ReLU in the store).
  void run(const Tensor& x, const Tensor& w, const Tensor& out, const ops::Conv2dAttrs& attrs,
           const gemm::ConvOutput& output, const gemm::ImageEpilogue& epilogue = nullptr);
  int64_t packs() const { return packs_; }  // times the weight was packed (for tests)

 private:
  void repack_if_changed(const Tensor& w, const ops::Conv2dAttrs& attrs);

  std::optional<gemm::PackedConvWeights> packed_;
  Tensor source_;  // held: its storage cannot be freed and handed to another tensor
  uint64_t source_version_ = 0;
  int64_t packs_ = 0;
};

}  // namespace kiln::cpu::exec
