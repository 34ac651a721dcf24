// kiln's direct float32 2-D convolution (NCHW) for the instruction sets that have
// micro-kernels for it (AVX-512, AVX2 + FMA). No im2col matrix is built: the input is
// zero-padded once, every output pixel points at its window in the padded planes, and the
// micro-kernel steps through (input channel, kernel row, kernel column) by one offset
// shared by all pixels while broadcasting one input value per pixel against a packed row
// of output-channel weights (conv_microkernel.h). Any stride, padding, dilation and group
// count is served; the weights are packed once per PackedConvWeights, so a frozen graph or
// an unchanged parameter pays for packing once.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "kiln/shape.h"

namespace kiln::cpu::gemm {

struct ConvMicroKernel;  // conv_microkernel.h

struct Conv2dShape {
  int64_t batch = 0, channels = 0, height = 0, width = 0;  // x [batch, channels, height, width]
  int64_t out_channels = 0, groups = 1;                    // w [out_channels, channels / groups,
  int64_t kernel_h = 1, kernel_w = 1;                      //    kernel_h, kernel_w]
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;  // out [batch, out_channels, out_h, out_w]

  int64_t depth() const { return channels / groups * kernel_h * kernel_w; }
  bool operator==(const Conv2dShape&) const = default;
};

// The shape of conv2d(x [N, C, H, W], w [OC, C / groups, kh, kw]) -> out [N, OC, OH, OW]
// with (height, width) pairs of stride, padding and dilation.
Conv2dShape conv2d_shape(IntList x, IntList w, IntList out, IntList stride, IntList padding,
                         IntList dilation, int64_t groups);

// Whether the micro-kernel family `isa` ("avx512", "avx2"; empty: default_kernel()'s, which
// KILN_GEMM_KERNEL can set) has direct-convolution kernels. "generic" has none: the caller
// keeps its im2col path.
bool has_direct_conv(std::string_view isa = {});

// w [out_channels, channels_per_group, kernel_h, kernel_w] (contiguous) as the micro-kernel
// reads it: per group, panels of the kernel's width of output channels (zero-padded), each
// depth-major. It serves every input size and batch.
class PackedConvWeights {
 public:
  PackedConvWeights(const float* w, int64_t out_channels, int64_t groups,
                    int64_t channels_per_group, int64_t kernel_h, int64_t kernel_w,
                    std::string_view isa = {});

  // Whether these are the weights of a convolution of shape `s`.
  bool fits(const Conv2dShape& s) const;
  const ConvMicroKernel& kernel() const { return *kernel_; }
  int64_t depth() const { return channels_per_group_ * kernel_h_ * kernel_w_; }
  int64_t panels() const { return panels_; }  // per group
  const float* panel(int64_t group, int64_t panel) const;
  // w itself ([out_channels, depth]), kept for shallow depths, which the kernel family may
  // compute in the other orientation (conv_microkernel.h); null otherwise.
  const float* rows() const { return rows_.empty() ? nullptr : rows_.data(); }

 private:
  int64_t out_channels_, groups_, channels_per_group_, kernel_h_, kernel_w_;
  const ConvMicroKernel* kernel_ = nullptr;
  int64_t panels_ = 0;
  std::vector<float> data_;
  std::vector<float> rows_;
};

// What happens to each output channel c's values v before they are stored: v + bias[c],
// then * scale[c], then + shift[c], then max(v, 0) (NaN -> 0, as kiln's relu), each step
// only when given. A bias alone converts implicitly; scale, shift and ReLU are an eval
// batch_norm and its activation run in the convolution's store instead of a pass over it.
struct ConvOutput {
  ConvOutput(const float* b = nullptr) : bias(b) {}  // NOLINT: a bias is the common case
  const float* bias = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  bool relu = false;
  // The same from output channel `c` on (for a group's channels).
  ConvOutput from(int64_t c) const {
    ConvOutput o(bias ? bias + c : nullptr);
    o.scale = scale ? scale + c : nullptr;
    o.shift = shift ? shift + c : nullptr;
    o.relu = relu;
    return o;
  }
};

// Called with [image_begin, image_end) once those images of the output are final; calls
// for disjoint ranges may run concurrently on different threads.
using ImageEpilogue = std::function<void(int64_t image_begin, int64_t image_end)>;

// out = conv2d(x, w) through `output` (a bias, a per-channel affine, a ReLU), all
// contiguous, split across kiln's threads by (image, group, block of output pixels).
// `epilogue`, when given, is called on every image exactly once after it is final: on blocks
// of a few images while they are still in cache, when the batch has more than one.
void conv2d(const Conv2dShape& s, const float* x, const PackedConvWeights& w,
            const ConvOutput& output, float* out, const ImageEpilogue& epilogue = nullptr);

}  // namespace kiln::cpu::gemm
