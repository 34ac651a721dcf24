// conv2d and its gradient ops on CUDA tensors (kiln/cuda/conv_kernels.h).
#include "kiln/cuda/conv_kernels.h"

#include <algorithm>
#include <sstream>

#include "conv_cudnn.h"
#include "kernel_cache.h"
#include "kernel_source.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/tensor.h"
#include "tensor_views.h"

namespace kiln::cuda {

namespace {

constexpr const char* kConvStruct = R"(#ifndef KILN_CONV_STRUCT
#define KILN_CONV_STRUCT
struct KilnConv {
  long long C, H, W, G, Cg, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
};
#endif
)";

std::string body(ConvKernel kind, const std::string& t) {
  if (kind == ConvKernel::Im2Col)
    return "  const long long K = p.Cg * p.kh * p.kw, L = p.OH * p.OW;\n"
           "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
           "    const long long l = e % L, k = (e / L) % K, g = (e / (L * K)) % p.G, s = e / (L * K * p.G);\n"
           "    const long long c = k / (p.kh * p.kw), i = (k / p.kw) % p.kh, j = k % p.kw;\n"
           "    const long long h = (l / p.OW) * p.sh - p.ph + i * p.dh, w = (l % p.OW) * p.sw - p.pw + j * p.dw;\n"
           "    cols[e] = h >= 0 && h < p.H && w >= 0 && w < p.W ? x[((s * p.C + g * p.Cg + c) * p.H + h) * p.W + w]\n"
           "                                                    : (" + t + ")0;\n"
           "  }\n";
  // Col2Im: the taps (i, j) whose window position (oh, ow) reads input element (h, w).
  return "  const long long K = p.Cg * p.kh * p.kw, L = p.OH * p.OW;\n"
         "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
         "    const long long w = e % p.W, h = (e / p.W) % p.H, channel = (e / (p.W * p.H)) % p.C;\n"
         "    const long long s = e / (p.W * p.H * p.C), g = channel / p.Cg, c = channel % p.Cg;\n"
         "    const " + t + "* sample = cols + (s * p.G + g) * K * L;\n"
         "    " + t + " total = 0;\n"
         "    for (long long i = 0; i < p.kh; ++i) {\n"
         "      const long long hh = h + p.ph - i * p.dh;\n"
         "      if (hh < 0 || hh % p.sh != 0 || hh / p.sh >= p.OH) continue;\n"
         "      for (long long j = 0; j < p.kw; ++j) {\n"
         "        const long long ww = w + p.pw - j * p.dw;\n"
         "        if (ww < 0 || ww % p.sw != 0 || ww / p.sw >= p.OW) continue;\n"
         "        total += sample[((c * p.kh + i) * p.kw + j) * L + (hh / p.sh) * p.OW + ww / p.sw];\n"
         "      }\n"
         "    }\n"
         "    gx[e] = total;\n"
         "  }\n";
}

// ---- host side ----

ConvGeometry geometry(const Tensor& x, IntList weight, const Tensor& out_or_grad, const ops::Conv2dAttrs& a) {
  ConvGeometry p;
  p.C = x.size(1), p.H = x.size(2), p.W = x.size(3), p.G = a.groups, p.Cg = p.C / p.G;
  p.OH = out_or_grad.size(2), p.OW = out_or_grad.size(3);
  p.kh = weight[2], p.kw = weight[3];
  p.sh = a.stride[0], p.sw = a.stride[1], p.ph = a.padding[0], p.pw = a.padding[1];
  p.dh = a.dilation[0], p.dw = a.dilation[1];
  return p;
}

ops::Conv2dAttrs forward_attrs(const ops::Conv2dGradAttrs& a) {
  ops::Conv2dAttrs f;
  f.stride = a.stride, f.padding = a.padding, f.dilation = a.dilation, f.groups = a.groups;
  return f;
}

Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : contiguous_on_gpu(t); }

// Samples per chunk: as many as keep the columns within kColumnBudgetBytes (at least one).
int64_t chunk_samples(const ConvGeometry& p, int64_t N, DType dtype) {
  const int64_t per_sample = p.G * p.Cg * p.kh * p.kw * p.OH * p.OW * static_cast<int64_t>(itemsize(dtype));
  return std::clamp<int64_t>(kColumnBudgetBytes / std::max<int64_t>(per_sample, 1), 1, std::max<int64_t>(N, 1));
}

void launch(ConvKernel kind, const char* what, DType dtype, int device, const Tensor& in, const Tensor& out,
            ConvGeometry p) {
  long long count = out.numel();
  if (count == 0) return;
  const GeneratedKernel& kernel = kernel_of_kind(device, what, kind, dtype, conv_kernel_source);
  const void* in_pointer = in.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&in_pointer, &out_pointer, &count, &p};
  launch_over_elements(kernel, count, params);
}

// The columns [n, G, K, L] of samples [start, start + n) of the contiguous x.
Tensor im2col(const Tensor& x, int64_t start, int64_t n, const ConvGeometry& p) {
  Tensor cols = Tensor::empty({n, p.G, p.Cg * p.kh * p.kw, p.OH * p.OW}, x.dtype(), x.device());
  launch(ConvKernel::Im2Col, "im2col", x.dtype(), x.device().index, leading_slice(x, start, n), cols, p);
  return cols;
}

Tensor product(const Tensor& a, const Tensor& b) {
  const Tensor operands[] = {a, b};
  return dispatch1(ops::matmul, operands);
}

void conv2d_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::Conv2dAttrs&>(c.attrs);
  const Tensor x = dense(c.inputs[0]), w = dense(c.inputs[1]);
  const Tensor& out = c.outputs[0];
  const ConvGeometry p = geometry(x, w.sizes(), out, a);
  const int64_t N = x.size(0), OCg = w.size(0) / p.G, K = p.Cg * p.kh * p.kw, L = p.OH * p.OW;
  if (out.numel() == 0) return;
  // cuDNN takes no empty tensor (an empty image padded into a non-empty output is one).
  if (K == 0 || x.numel() == 0 || !cudnn_conv2d(x, w, out, a)) {
    const Tensor weight = reshaped(w, {1, p.G, OCg, K});
    for (int64_t start = 0, n = chunk_samples(p, N, x.dtype()); start < N; start += n) {
      n = std::min(n, N - start);
      const Tensor parts[] = {weight, im2col(x, start, n, p)};
      // [1, G, OCg, K] x [n, G, K, L] straight into the output's samples, [n, G, OCg, L].
      dispatch_into(ops::matmul, parts, no_attrs(), reshaped(leading_slice(out, start, n), {n, p.G, OCg, L}));
    }
  }
  if (c.inputs.size() > 2 && c.inputs[2].defined()) {
    const Tensor sum[] = {out, reshaped(dense(c.inputs[2]), {1, w.size(0), 1, 1})};
    dispatch_into(ops::add, sum, no_attrs(), out);
  }
}

void conv2d_input_grad_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::Conv2dGradAttrs&>(c.attrs);
  const Tensor grad = dense(c.inputs[0]), w = dense(c.inputs[1]);
  const Tensor& gx = c.outputs[0];
  const ConvGeometry p = geometry(gx, w.sizes(), grad, forward_attrs(a));
  const int64_t N = gx.size(0), OCg = w.size(0) / p.G, K = p.Cg * p.kh * p.kw, L = p.OH * p.OW;
  if (gx.numel() == 0) return;
  if (grad.numel() == 0 || K == 0) {
    fill_on_gpu(gx, 0);
    return;
  }
  if (cudnn_conv2d_input_grad(grad, w, gx, forward_attrs(a))) return;
  const Tensor weight_t = last_two_swapped(reshaped(w, {1, p.G, OCg, K}));  // [1, G, K, OCg]
  for (int64_t start = 0, n = chunk_samples(p, N, gx.dtype()); start < N; start += n) {
    n = std::min(n, N - start);
    const Tensor cols = product(weight_t, reshaped(leading_slice(grad, start, n), {n, p.G, OCg, L}));
    launch(ConvKernel::Col2Im, "col2im", gx.dtype(), gx.device().index, cols, leading_slice(gx, start, n), p);
  }
}

void conv2d_weight_grad_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::Conv2dGradAttrs&>(c.attrs);
  const Tensor grad = dense(c.inputs[0]), x = dense(c.inputs[1]);
  const Tensor& gw = c.outputs[0];
  const ConvGeometry p = geometry(x, gw.sizes(), grad, forward_attrs(a));
  const int64_t N = x.size(0), OCg = gw.size(0) / p.G, K = p.Cg * p.kh * p.kw, L = p.OH * p.OW;
  if (gw.numel() > 0 && L > 0 && x.numel() > 0 && cudnn_conv2d_weight_grad(grad, x, gw, forward_attrs(a)))
    return;
  fill_on_gpu(gw, 0);
  if (gw.numel() == 0 || L == 0) return;
  const Tensor total = reshaped(gw, {p.G, OCg, K});
  ops::ReduceAttrs over_samples;
  over_samples.dims = {0};
  for (int64_t start = 0, n = chunk_samples(p, N, x.dtype()); start < N; start += n) {
    n = std::min(n, N - start);
    // [n, G, OCg, L] x [n, G, L, K], summed over the chunk's samples, added to the total.
    const Tensor per_sample =
        product(reshaped(leading_slice(grad, start, n), {n, p.G, OCg, L}), last_two_swapped(im2col(x, start, n, p)));
    const Tensor chunk_sum = dispatch1(ops::sum, std::span<const Tensor>(&per_sample, 1), over_samples);
    const Tensor sum[] = {total, chunk_sum};
    dispatch_into(ops::add, sum, no_attrs(), total);
  }
}

}  // namespace

std::string conv_kernel_source(ConvKernel kind, DType dtype, const std::string& name) {
  KILN_CHECK(dtype == kFloat32 || dtype == kFloat64, "[cuda] the convolution kernels take float32 or float64, got ",
             dtype, ". Fix: convolve in float32 and convert with .to().");
  const std::string t = storage_type(dtype);
  const std::string in = kind == ConvKernel::Im2Col ? "x" : "cols", out = kind == ConvKernel::Im2Col ? "cols" : "gx";
  std::ostringstream s;
  s << "// kiln eager kernel: " << name << "(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << kConvStruct << "KILN_KERNEL void " << name << "(const " << t << "* __restrict__ " << in
    << ", " << t << "* __restrict__ " << out << ", long long count, KilnConv p) {\n"
    << body(kind, t) << "}\n";
  return s.str();
}

void register_conv_kernels() {
  auto set = [](OpDef& op, KernelFn kernel) { op.kernels[static_cast<size_t>(DeviceType::CUDA)] = kernel; };
  set(ops::conv2d, conv2d_kernel);
  set(ops::conv2d_input_grad, conv2d_input_grad_kernel);
  set(ops::conv2d_weight_grad, conv2d_weight_grad_kernel);
}

}  // namespace kiln::cuda
