// 2-D convolution (im2col + GEMM) and the two ops its gradient needs: the gradient w.r.t.
// the input (GEMM + col2im) and w.r.t. the weight (im2col + GEMM). Each is linear in both
// operands, so their vjps are the other two ops: backward is differentiable again.
#pragma once

#include "kiln/op.h"

namespace kiln::ops {

struct Conv2dAttrs : AttrsOf<Conv2dAttrs> {
  Shape stride{1, 1}, padding{0, 0}, dilation{1, 1};  // (height, width) each
  int64_t groups = 1;
  template <class V>
  void fields(V& v) {
    v("stride", stride), v("padding", padding), v("dilation", dilation), v("groups", groups);
  }
};
// conv2d(x [N, C, H, W], weight [OC, C / groups, kh, kw], bias? [OC]) -> [N, OC, OH, OW]
// with OH = (H + 2 pad - dilation (kh - 1) - 1) / stride + 1 (likewise OW).
extern OpDef conv2d;

struct Conv2dGradAttrs : AttrsOf<Conv2dGradAttrs> {
  Shape stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  Shape size;  // the shape of the result: the input's (input_grad) or the weight's (weight_grad)
  template <class V>
  void fields(V& v) {
    v("stride", stride), v("padding", padding), v("dilation", dilation), v("groups", groups),
        v("size", size);
  }
};
// conv2d_input_grad(grad [N, OC, OH, OW], weight) -> d<conv2d(x, weight), grad>/dx, shape `size`.
extern OpDef conv2d_input_grad;
// conv2d_weight_grad(grad [N, OC, OH, OW], x) -> d<conv2d(x, weight), grad>/dweight, shape `size`.
extern OpDef conv2d_weight_grad;

// The output spatial size of a convolution or pooling window along one dim (floor mode).
int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation);

}  // namespace kiln::ops
