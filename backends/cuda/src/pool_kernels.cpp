// max_pool2d, avg_pool2d, adaptive_avg_pool2d and their backward kernels on CUDA tensors
// (kiln/cuda/pool_kernels.h).
#include "kiln/cuda/pool_kernels.h"

#include <sstream>

#include "failure_flag.h"
#include "kernel_cache.h"
#include "kernel_source.h"
#include "tensor_views.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/error.h"
#include "kiln/ops/pool.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

// The geometry struct and the windows, once per source (tests put many kernels in one).
constexpr const char* kPoolHelpers = R"(#ifndef KILN_POOL_HELPERS
#define KILN_POOL_HELPERS
struct KilnPool {
  long long planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, count_include_pad, divisor;
};
// avg_pool2d's window of output (oh, ow), clipped to the input, and its divisor: the window
// may cover padding (counted with count_include_pad) but is cut at the padded edge.
struct KilnAvgWindow {
  long long h0, h1, w0, w1;
  double divisor;
};
KILN_DEVICE KilnAvgWindow kiln_avg_window(const KilnPool& p, long long oh, long long ow) {
  long long h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
  long long h1 = h0 + p.kh < p.H + p.ph ? h0 + p.kh : p.H + p.ph;
  long long w1 = w0 + p.kw < p.W + p.pw ? w0 + p.kw : p.W + p.pw;
  const long long padded = (h1 - h0) * (w1 - w0);
  h0 = h0 > 0 ? h0 : 0;
  w0 = w0 > 0 ? w0 : 0;
  h1 = h1 < p.H ? h1 : p.H;
  w1 = w1 < p.W ? w1 : p.W;
  KilnAvgWindow w = {h0, h1, w0, w1, 0};
  w.divisor = p.divisor ? (double)p.divisor : p.count_include_pad ? (double)padded : (double)((h1 - h0) * (w1 - w0));
  return w;
}
// adaptive_avg_pool2d's window along one dim: [floor(o * in / out), ceil((o + 1) * in / out)).
KILN_DEVICE long long kiln_adaptive_start(long long o, long long in, long long out) { return (o * in) / out; }
KILN_DEVICE long long kiln_adaptive_end(long long o, long long in, long long out) {
  return ((o + 1) * in + out - 1) / out;
}
#endif
)";

std::string body(PoolKernel kind, const std::string& t) {
  // -inf without a header (NVRTC has no math.h).
  const std::string minus_infinity =
      t == "float" ? "-__int_as_float(0x7f800000)" : "-__longlong_as_double(0x7ff0000000000000LL)";
  switch (kind) {
    case PoolKernel::Max:
      // Taps in window order: a larger value or a NaN takes the place, so the first maximum
      // wins ties and the last NaN wins, as in the CPU kernel.
      return "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
             "    const long long ow = e % p.OW, oh = (e / p.OW) % p.OH, plane = e / (p.OW * p.OH);\n"
             "    const " + t + "* in = x + plane * p.H * p.W;\n"
             "    long long h = oh * p.sh - p.ph, w = ow * p.sw - p.pw;\n"
             "    while (h < 0) h += p.dh;\n"
             "    while (w < 0) w += p.dw;\n"
             "    " + t + " best = " + minus_infinity + ";\n"
             "    long long at = h * p.W + w;  // PyTorch's index for a window of -inf\n"
             "    for (long long i = 0; i < p.kh; ++i) {\n"
             "      const long long ih = oh * p.sh - p.ph + i * p.dh;\n"
             "      if (ih < 0 || ih >= p.H) continue;\n"
             "      for (long long j = 0; j < p.kw; ++j) {\n"
             "        const long long iw = ow * p.sw - p.pw + j * p.dw;\n"
             "        if (iw < 0 || iw >= p.W) continue;\n"
             "        const " + t + " v = in[ih * p.W + iw];\n"
             "        if (v > best || v != v) {\n"
             "          best = v;\n"
             "          at = ih * p.W + iw;\n"
             "        }\n"
             "      }\n"
             "    }\n"
             "    out[e] = best;\n"
             "    if (indices) indices[e] = at;\n"
             "  }\n";
    case PoolKernel::MaxBackward:
      return "  const long long plane_size = p.H * p.W;\n"
             "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
             "    const long long at = indices[e], plane = e / (p.OH * p.OW);\n"
             "    if (at < 0 || at >= plane_size) {\n"
             "      kiln_atomic_min(first_bad, e);\n"
             "      continue;\n"
             "    }\n"
             "    kiln_atomic_add(&gx[plane * plane_size + at], g[e]);\n"
             "  }\n";
    case PoolKernel::Avg:
      return "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
             "    const long long ow = e % p.OW, oh = (e / p.OW) % p.OH, plane = e / (p.OW * p.OH);\n"
             "    const " + t + "* in = x + plane * p.H * p.W;\n"
             "    const KilnAvgWindow w = kiln_avg_window(p, oh, ow);\n"
             "    " + t + " sum = 0;\n"
             "    for (long long ih = w.h0; ih < w.h1; ++ih)\n"
             "      for (long long iw = w.w0; iw < w.w1; ++iw) sum += in[ih * p.W + iw];\n"
             "    out[e] = w.h0 < w.h1 && w.w0 < w.w1 ? (" + t + ")(sum / w.divisor) : (" + t + ")0;\n"
             "  }\n";
    case PoolKernel::AvgBackward:
      // The outputs whose windows start at most kh - 1 rows (kw - 1 columns) before this one.
      return "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
             "    const long long iw = e % p.W, ih = (e / p.W) % p.H, plane = e / (p.W * p.H);\n"
             "    const " + t + "* gp = g + plane * p.OH * p.OW;\n"
             "    long long oh0 = (ih + p.ph - p.kh + 1 + p.sh - 1) / p.sh, ow0 = (iw + p.pw - p.kw + 1 + p.sw - 1) / p.sw;\n"
             "    oh0 = ih + p.ph - p.kh + 1 < 0 ? 0 : oh0;\n"
             "    ow0 = iw + p.pw - p.kw + 1 < 0 ? 0 : ow0;\n"
             "    " + t + " total = 0;\n"
             "    for (long long oh = oh0; oh < p.OH && oh * p.sh - p.ph <= ih; ++oh) {\n"
             "      for (long long ow = ow0; ow < p.OW && ow * p.sw - p.pw <= iw; ++ow) {\n"
             "        const KilnAvgWindow w = kiln_avg_window(p, oh, ow);\n"
             "        if (ih < w.h0 || ih >= w.h1 || iw < w.w0 || iw >= w.w1) continue;\n"
             "        total += (" + t + ")(gp[oh * p.OW + ow] / w.divisor);\n"
             "      }\n"
             "    }\n"
             "    gx[e] = total;\n"
             "  }\n";
    case PoolKernel::Adaptive:
      return "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
             "    const long long ow = e % p.OW, oh = (e / p.OW) % p.OH, plane = e / (p.OW * p.OH);\n"
             "    const " + t + "* in = x + plane * p.H * p.W;\n"
             "    const long long h0 = kiln_adaptive_start(oh, p.H, p.OH), h1 = kiln_adaptive_end(oh, p.H, p.OH);\n"
             "    const long long w0 = kiln_adaptive_start(ow, p.W, p.OW), w1 = kiln_adaptive_end(ow, p.W, p.OW);\n"
             "    " + t + " sum = 0;\n"
             "    for (long long ih = h0; ih < h1; ++ih)\n"
             "      for (long long iw = w0; iw < w1; ++iw) sum += in[ih * p.W + iw];\n"
             "    out[e] = sum / (" + t + ")((h1 - h0) * (w1 - w0));\n"
             "  }\n";
    case PoolKernel::AdaptiveBackward:
      // The output rows whose windows can cover input row ih, then exactly those that do.
      return "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
             "    const long long iw = e % p.W, ih = (e / p.W) % p.H, plane = e / (p.W * p.H);\n"
             "    const " + t + "* gp = g + plane * p.OH * p.OW;\n"
             "    const long long oh0 = (ih * p.OH) / p.H, ow0 = (iw * p.OW) / p.W;\n"
             "    " + t + " total = 0;\n"
             "    for (long long oh = oh0 > 0 ? oh0 - 1 : 0; oh < p.OH && kiln_adaptive_start(oh, p.H, p.OH) <= ih; ++oh) {\n"
             "      if (ih >= kiln_adaptive_end(oh, p.H, p.OH)) continue;\n"
             "      const long long rows = kiln_adaptive_end(oh, p.H, p.OH) - kiln_adaptive_start(oh, p.H, p.OH);\n"
             "      for (long long ow = ow0 > 0 ? ow0 - 1 : 0; ow < p.OW && kiln_adaptive_start(ow, p.W, p.OW) <= iw; ++ow) {\n"
             "        if (iw >= kiln_adaptive_end(ow, p.W, p.OW)) continue;\n"
             "        const long long cols = kiln_adaptive_end(ow, p.W, p.OW) - kiln_adaptive_start(ow, p.W, p.OW);\n"
             "        total += gp[oh * p.OW + ow] / (" + t + ")(rows * cols);\n"
             "      }\n"
             "    }\n"
             "    gx[e] = total;\n"
             "  }\n";
  }
  return "";
}

std::string parameters(PoolKernel kind, const std::string& t) {
  const std::string in = "const " + t + "* __restrict__ ";
  switch (kind) {
    case PoolKernel::Max:
      return in + "x, " + t + "* __restrict__ out, long long* __restrict__ indices, long long count, KilnPool p";
    case PoolKernel::MaxBackward:
      return in + "g, const long long* __restrict__ indices, " + t +
             "* gx, long long count, KilnPool p, long long* first_bad";
    case PoolKernel::Avg:
    case PoolKernel::Adaptive:
      return in + "x, " + t + "* __restrict__ out, long long count, KilnPool p";
    case PoolKernel::AvgBackward:
    case PoolKernel::AdaptiveBackward:
      return in + "g, " + t + "* __restrict__ gx, long long count, KilnPool p";
  }
  return "";
}

// ---- host side ----

// x (or the gradient of x) [N, C, H, W] and its pooled counterpart [N, C, OH, OW].
PoolGeometry geometry(const Tensor& x, const Tensor& pooled) {
  PoolGeometry p;
  p.planes = x.size(0) * x.size(1);
  p.H = x.size(2), p.W = x.size(3), p.OH = pooled.size(2), p.OW = pooled.size(3);
  return p;
}

void with_window(PoolGeometry& p, IntList kernel, IntList stride, IntList padding) {
  p.kh = kernel[0], p.kw = kernel[1], p.sh = stride[0], p.sw = stride[1], p.ph = padding[0], p.pw = padding[1];
}

void with_avg(PoolGeometry& p, const ops::AvgPool2dAttrs& a) {
  with_window(p, a.kernel_size, a.stride, a.padding);
  p.count_include_pad = a.count_include_pad ? 1 : 0;
  p.divisor = a.divisor_override.value_or(0);
}

Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : contiguous_on_gpu(t); }

// Launches `kind` over `count` elements with `head` (its pointers), count, the geometry and `tail`.
void launch(PoolKernel kind, const char* what, DType dtype, int device, std::vector<void*> head, long long count,
            PoolGeometry p, std::vector<void*> tail = {}) {
  if (count == 0) return;
  const GeneratedKernel& kernel = kernel_of_kind(device, what, kind, dtype, pool_kernel_source);
  head.push_back(&count);
  head.push_back(&p);
  head.insert(head.end(), tail.begin(), tail.end());
  launch_over_elements(kernel, count, head.data());
}

void max_pool2d_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::MaxPool2dAttrs&>(c.attrs);
  const Tensor x = dense(c.inputs[0]);
  const Tensor &out = c.outputs[0], &indices = c.outputs[1];
  PoolGeometry p = geometry(x, out);
  with_window(p, a.kernel_size, a.stride, a.padding);
  p.dh = a.dilation[0], p.dw = a.dilation[1];
  const void* xp = x.raw_data();
  void *op = out.raw_data(), *ip = indices.defined() ? indices.raw_data() : nullptr;
  launch(PoolKernel::Max, "max_pool2d", x.dtype(), x.device().index, {&xp, &op, &ip}, out.numel(), p);
}

void max_pool2d_backward_kernel(KernelCall& c) {
  const Tensor grad = dense(c.inputs[0]), indices = dense(c.inputs[1]);
  const Tensor& gx = c.outputs[0];
  fill_on_gpu(gx, 0);
  if (grad.numel() == 0) return;
  const Tensor flag = failure_flag(gx.device());
  const void *gp = grad.raw_data(), *ip = indices.raw_data();
  void *xp = gx.raw_data(), *fp = flag.raw_data();
  launch(PoolKernel::MaxBackward, "max_pool2d_backward", grad.dtype(), gx.device().index, {&gp, &ip, &xp},
         grad.numel(), geometry(gx, grad), {&fp});
  check_failure(flag, [indices, plane = gx.size(2) * gx.size(3)](int64_t bad) {
    KILN_FAIL("[max_pool2d_backward] index ", element(indices, bad).item<int64_t>(),
              " is outside the input plane of ", plane, " elements. Fix: pass the indices max_pool2d returned.");
  });
}

void avg_pool2d_kernel(KernelCall& c) {
  const Tensor x = dense(c.inputs[0]);
  const Tensor& out = c.outputs[0];
  PoolGeometry p = geometry(x, out);
  with_avg(p, static_cast<const ops::AvgPool2dAttrs&>(c.attrs));
  const void* xp = x.raw_data();
  void* op = out.raw_data();
  launch(PoolKernel::Avg, "avg_pool2d", x.dtype(), x.device().index, {&xp, &op}, out.numel(), p);
}

void avg_pool2d_backward_kernel(KernelCall& c) {
  const Tensor grad = dense(c.inputs[0]);
  const Tensor& gx = c.outputs[0];
  PoolGeometry p = geometry(gx, grad);
  with_avg(p, static_cast<const ops::AvgPool2dBackwardAttrs&>(c.attrs).pool);
  const void* gp = grad.raw_data();
  void* xp = gx.raw_data();
  launch(PoolKernel::AvgBackward, "avg_pool2d_backward", grad.dtype(), gx.device().index, {&gp, &xp}, gx.numel(), p);
}

void adaptive_avg_pool2d_kernel(KernelCall& c) {
  const Tensor x = dense(c.inputs[0]);
  const Tensor& out = c.outputs[0];
  const void* xp = x.raw_data();
  void* op = out.raw_data();
  launch(PoolKernel::Adaptive, "adaptive_avg_pool2d", x.dtype(), x.device().index, {&xp, &op}, out.numel(),
         geometry(x, out));
}

void adaptive_avg_pool2d_backward_kernel(KernelCall& c) {
  const Tensor grad = dense(c.inputs[0]);
  const Tensor& gx = c.outputs[0];
  const void* gp = grad.raw_data();
  void* xp = gx.raw_data();
  launch(PoolKernel::AdaptiveBackward, "adaptive_avg_pool2d_backward", grad.dtype(), gx.device().index, {&gp, &xp},
         gx.numel(), geometry(gx, grad));
}

}  // namespace

std::string pool_kernel_source(PoolKernel kind, DType dtype, const std::string& name) {
  KILN_CHECK(dtype == kFloat32 || dtype == kFloat64, "[cuda] the pooling kernels take float32 or float64, got ",
             dtype, ". Fix: pool in float32 and convert with .to().");
  const std::string t = storage_type(dtype);
  std::ostringstream s;
  s << "// kiln eager kernel: " << name << "(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << kPoolHelpers << "KILN_KERNEL void " << name << "(" << parameters(kind, t) << ") {\n"
    << body(kind, t) << "}\n";
  return s.str();
}

void register_pool_kernels() {
  auto set = [](OpDef& op, KernelFn kernel) { op.kernels[static_cast<size_t>(DeviceType::CUDA)] = kernel; };
  set(ops::max_pool2d, max_pool2d_kernel);
  set(ops::max_pool2d_backward, max_pool2d_backward_kernel);
  set(ops::avg_pool2d, avg_pool2d_kernel);
  set(ops::avg_pool2d_backward, avg_pool2d_backward_kernel);
  set(ops::adaptive_avg_pool2d, adaptive_avg_pool2d_kernel);
  set(ops::adaptive_avg_pool2d_backward, adaptive_avg_pool2d_backward_kernel);
}

}  // namespace kiln::cuda
