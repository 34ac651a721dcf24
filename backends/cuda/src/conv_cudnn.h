// Inside backends/cuda: conv2d and its two gradients through cuDNN (kiln/cuda/cudnn.h), on the
// current stream, with cuDNN's heuristic choice of algorithm and a workspace from the caching
// allocator. Each returns false, having queued nothing, when cuDNN is off, not loaded, cannot
// make a handle on the GPU, or has no algorithm for the configuration; conv_kernels.cpp then
// runs im2col + cuBLASLt. Other cuDNN failures throw kiln::Error with cuDNN's status.
//
// The tensors are dense, on one GPU, float32 or float64, none of them empty; `a` is the
// forward convolution's geometry.
#pragma once

#include "kiln/ops/conv.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

// out [N, OC, OH, OW] = x [N, C, H, W] ⋆ w [OC, C/G, kh, kw] (no bias).
bool cudnn_conv2d(const Tensor& x, const Tensor& w, const Tensor& out, const ops::Conv2dAttrs& a);
// gx [N, C, H, W] from grad [N, OC, OH, OW] and w.
bool cudnn_conv2d_input_grad(const Tensor& grad, const Tensor& w, const Tensor& gx,
                             const ops::Conv2dAttrs& a);
// gw [OC, C/G, kh, kw] from grad and x.
bool cudnn_conv2d_weight_grad(const Tensor& grad, const Tensor& x, const Tensor& gw,
                              const ops::Conv2dAttrs& a);

}  // namespace kiln::cuda
