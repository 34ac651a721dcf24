// 2-D pooling over [N, C, H, W]: max (with argmax indices), average and adaptive average,
// each with a backward op. The backward ops are linear in the gradient; their vjps are
// the forward pooling (or a gather of the argmax), so backward is differentiable again.
#pragma once

#include <optional>

#include "kiln/op.h"

namespace kiln::ops {

struct MaxPool2dAttrs : AttrsOf<MaxPool2dAttrs> {
  Shape kernel_size{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
  template <class V>
  void fields(V& v) {
    v("kernel_size", kernel_size), v("stride", stride), v("padding", padding),
        v("dilation", dilation), v("ceil_mode", ceil_mode);
  }
};
// max_pool2d(x) -> (out, indices): indices (int64) are flat positions h * W + w of each
// maximum in its input plane, as in PyTorch. NaN counts as the maximum.
extern OpDef max_pool2d;

struct PoolBackwardSizeAttrs : AttrsOf<PoolBackwardSizeAttrs> {
  Shape input_size;  // (H, W) of the pooled input
  template <class V>
  void fields(V& v) {
    v("input_size", input_size);
  }
};
// max_pool2d_backward(grad [N, C, OH, OW], indices) -> [N, C, H, W]: each gradient added at its
// argmax.
extern OpDef max_pool2d_backward;

struct AvgPool2dAttrs : AttrsOf<AvgPool2dAttrs> {
  Shape kernel_size{1, 1}, stride{1, 1}, padding{0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;
  template <class V>
  void fields(V& v) {
    v("kernel_size", kernel_size), v("stride", stride), v("padding", padding),
        v("ceil_mode", ceil_mode), v("count_include_pad", count_include_pad),
        v("divisor_override", divisor_override);
  }
};
extern OpDef avg_pool2d;

struct AvgPool2dBackwardAttrs : AttrsOf<AvgPool2dBackwardAttrs> {
  AvgPool2dAttrs pool;
  Shape input_size;  // (H, W)
  template <class V>
  void fields(V& v) {
    pool.fields(v);
    v("input_size", input_size);
  }
};
// avg_pool2d_backward(grad [N, C, OH, OW]) -> [N, C, H, W] (the adjoint of avg_pool2d).
extern OpDef avg_pool2d_backward;

struct AdaptivePool2dAttrs : AttrsOf<AdaptivePool2dAttrs> {
  Shape output_size;  // (OH, OW)
  template <class V>
  void fields(V& v) {
    v("output_size", output_size);
  }
};
// adaptive_avg_pool2d(x): output cell i averages input rows [floor(i H / OH), ceil((i + 1) H /
// OH)).
extern OpDef adaptive_avg_pool2d;
// adaptive_avg_pool2d_backward(grad [N, C, OH, OW]) -> [N, C, H, W] (PoolBackwardSizeAttrs).
extern OpDef adaptive_avg_pool2d_backward;

// PyTorch's pooling output size along one dim (ceil_mode drops a last window that would
// start in the right padding).
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                         bool ceil_mode);

}  // namespace kiln::ops
