// layer_norm, batch_norm and their backward kernels on CUDA tensors (kiln/cuda/norm_kernels.h).
#include "kiln/cuda/norm_kernels.h"

#include <sstream>

#include "kernel_cache.h"
#include "kernel_source.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/error.h"
#include "kiln/ops/norm.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

// The block-wide sums a kernel named `name` uses, in its type `t` and in double.
std::string block_sums(const std::string& name, const std::string& t) {
  return "KILN_DEVICE " + t + " " + name + "_add(" + t + " a, " + t + " b) { return a + b; }\n" +
         "KILN_DEVICE double " + name + "_add_d(double a, double b) { return a + b; }\n" +
         block_reduce_source(name + "_sum", t, name + "_add", "(" + t + ")0", true) +
         block_reduce_source(name + "_sum_d", "double", name + "_add_d", "0.0", true);
}

// Each kernel's body; `t` is the element type, `s` the block sums' prefix.
std::string body(NormKernel kind, const std::string& t, const std::string& s) {
  switch (kind) {
    case NormKernel::LayerNorm:
      // As the CPU kernel: the mean, then the centered sum of squares, in the input's type.
      return "  for (long long r = KILN_BLOCK_INDEX; r < rows; r += KILN_BLOCK_COUNT) {\n"
             "    const " + t + "* xr = x + r * n;\n"
             "    " + t + " total = 0;\n"
             "    for (long long j = KILN_THREAD_INDEX; j < n; j += KILN_THREAD_COUNT) total += xr[j];\n"
             "    const " + t + " mu = " + s + "_sum(total) / (" + t + ")n;\n"
             "    " + t + " squares = 0;\n"
             "    for (long long j = KILN_THREAD_INDEX; j < n; j += KILN_THREAD_COUNT) {\n"
             "      const " + t + " d = xr[j] - mu;\n"
             "      squares += d * d;\n"
             "    }\n"
             "    const " + t + " rs = (" + t + ")1 / sqrt(" + s + "_sum(squares) / (" + t + ")n + (" + t + ")eps);\n"
             "    for (long long j = KILN_THREAD_INDEX; j < n; j += KILN_THREAD_COUNT) {\n"
             "      " + t + " v = (xr[j] - mu) * rs;\n"
             "      if (w) v = v * w[j];\n"
             "      if (b) v = v + b[j];\n"
             "      y[r * n + j] = v;\n"
             "    }\n"
             "    if (KILN_THREAD_INDEX == 0) {\n"
             "      mean[r] = mu;\n"
             "      rstd[r] = rs;\n"
             "    }\n"
             "  }\n";
    case NormKernel::LayerNormGrad:
      // gx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)), gy = g * w.
      return "  for (long long r = KILN_BLOCK_INDEX; r < rows; r += KILN_BLOCK_COUNT) {\n"
             "    const " + t + " mu = mean[r], rs = rstd[r];\n"
             "    " + t + " s1 = 0, s2 = 0;\n"
             "    for (long long j = KILN_THREAD_INDEX; j < n; j += KILN_THREAD_COUNT) {\n"
             "      const " + t + " gy = w ? g[r * n + j] * w[j] : g[r * n + j];\n"
             "      s1 += gy;\n"
             "      s2 += gy * ((x[r * n + j] - mu) * rs);\n"
             "    }\n"
             "    s1 = " + s + "_sum(s1) / (" + t + ")n;\n"
             "    s2 = " + s + "_sum(s2) / (" + t + ")n;\n"
             "    for (long long j = KILN_THREAD_INDEX; j < n; j += KILN_THREAD_COUNT) {\n"
             "      const " + t + " gy = w ? g[r * n + j] * w[j] : g[r * n + j];\n"
             "      const " + t + " xhat = (x[r * n + j] - mu) * rs;\n"
             "      gx[r * n + j] = (gy - s1 - xhat * s2) * rs;\n"
             "    }\n"
             "  }\n";
    case NormKernel::LayerNormParams:
      return "  KILN_FOR_EACH_ELEMENT(j, n) {\n"
             "    " + t + " sw = 0, sb = 0;\n"
             "    for (long long r = 0; r < rows; ++r) {\n"
             "      const " + t + " gr = g[r * n + j];\n"
             "      sw += gr * ((x[r * n + j] - mean[r]) * rstd[r]);\n"
             "      sb += gr;\n"
             "    }\n"
             "    gw[j] = sw;\n"
             "    gb[j] = sb;\n"
             "  }\n";
    case NormKernel::BatchStats:
      // Training: the batch's mean and biased variance in float64 (the running variance takes
      // the unbiased one, as in PyTorch); eval: the running statistics.
      return "  const long long per_channel = N * S;\n"
             "  for (long long c = KILN_BLOCK_INDEX; c < C; c += KILN_BLOCK_COUNT) {\n"
             "    double mu, var = 0;\n"
             "    if (training) {\n"
             "      double total = 0;\n"
             "      for (long long e = KILN_THREAD_INDEX; e < per_channel; e += KILN_THREAD_COUNT)\n"
             "        total += x[((e / S) * C + c) * S + e % S];\n"
             "      mu = " + s + "_sum_d(total) / (double)per_channel;\n"
             "      double squares = 0;\n"
             "      for (long long e = KILN_THREAD_INDEX; e < per_channel; e += KILN_THREAD_COUNT) {\n"
             "        const double d = x[((e / S) * C + c) * S + e % S] - mu;\n"
             "        squares += d * d;\n"
             "      }\n"
             "      var = " + s + "_sum_d(squares) / (double)per_channel;\n"
             "    } else {\n"
             "      mu = running_mean[c];\n"
             "      var = running_var[c];\n"
             "    }\n"
             "    if (KILN_THREAD_INDEX != 0) continue;\n"
             "    const double invstd = 1 / sqrt(var + eps);\n"
             "    const double wc = w ? (double)w[c] : 1.0, bc = b ? (double)b[c] : 0.0;\n"
             "    save_mean[c] = (" + t + ")mu;\n"
             "    save_invstd[c] = (" + t + ")invstd;\n"
             "    coef[C + c] = (" + t + ")(wc * invstd);\n"
             "    coef[2 * C + c] = (" + t + ")(bc - mu * wc * invstd);\n"
             "    if (training && new_mean) {\n"
             "      const double count = (double)per_channel;\n"
             "      new_mean[c] = (" + t + ")((1 - momentum) * running_mean[c] + momentum * mu);\n"
             "      new_var[c] = (" + t + ")((1 - momentum) * running_var[c] + momentum * var * count / (count - 1));\n"
             "    }\n"
             "  }\n";
    case NormKernel::BatchGradStats:
      return "  const long long per_channel = N * S;\n"
             "  const double count = (double)per_channel;\n"
             "  for (long long c = KILN_BLOCK_INDEX; c < C; c += KILN_BLOCK_COUNT) {\n"
             "    const double mu = mean[c], r = invstd[c];\n"
             "    double sg = 0, sgx = 0;\n"
             "    for (long long e = KILN_THREAD_INDEX; e < per_channel; e += KILN_THREAD_COUNT) {\n"
             "      const long long at = ((e / S) * C + c) * S + e % S;\n"
             "      sg += g[at];\n"
             "      sgx += (double)g[at] * ((double)x[at] - mu);\n"
             "    }\n"
             "    sg = " + s + "_sum_d(sg);\n"
             "    sgx = " + s + "_sum_d(sgx) * r;\n"
             "    if (KILN_THREAD_INDEX != 0) continue;\n"
             "    const double rw = r * (w ? (double)w[c] : 1.0);\n"
             "    gw[c] = (" + t + ")sgx;\n"
             "    gb[c] = (" + t + ")sg;\n"
             "    coef[c] = (" + t + ")rw;\n"
             "    coef[C + c] = (" + t + ")(-rw * r * sgx / count);\n"
             "    coef[2 * C + c] = (" + t + ")(-rw * sg / count + mu * rw * r * sgx / count);\n"
             "  }\n";
    case NormKernel::ChannelAffine:
      return "  KILN_FOR_EACH_ELEMENT(i, count) {\n"
             "    const long long c = (i / S) % C;\n"
             "    out[i] = g ? coef[c] * g[i] + coef[C + c] * x[i] + coef[2 * C + c]\n"
             "               : coef[C + c] * x[i] + coef[2 * C + c];\n"
             "  }\n";
  }
  return "";
}

std::string parameters(NormKernel kind, const std::string& t) {
  const std::string in = "const " + t + "* __restrict__ ", out = t + "* __restrict__ ";
  switch (kind) {
    case NormKernel::LayerNorm:
      return in + "x, " + in + "w, " + in + "b, " + out + "y, " + out + "mean, " + out +
             "rstd, long long rows, long long n, double eps";
    case NormKernel::LayerNormGrad:
      return in + "g, " + in + "x, " + in + "w, " + in + "mean, " + in + "rstd, " + out +
             "gx, long long rows, long long n";
    case NormKernel::LayerNormParams:
      return in + "g, " + in + "x, " + in + "mean, " + in + "rstd, " + out + "gw, " + out +
             "gb, long long rows, long long n";
    case NormKernel::BatchStats:
      return in + "x, " + in + "w, " + in + "b, " + in + "running_mean, " + in + "running_var, " + out +
             "save_mean, " + out + "save_invstd, " + out + "new_mean, " + out + "new_var, " + out +
             "coef, long long N, long long C, long long S, int training, double momentum, double eps";
    case NormKernel::BatchGradStats:
      return in + "g, " + in + "x, " + in + "w, " + in + "mean, " + in + "invstd, " + out + "gw, " + out +
             "gb, " + out + "coef, long long N, long long C, long long S";
    case NormKernel::ChannelAffine:
      return in + "g, " + in + "x, " + in + "coef, " + out + "out, long long count, long long C, long long S";
  }
  return "";
}

// ---- host side ----

const GeneratedKernel& kernel_for(NormKernel kind, const char* what, DType dtype, int device) {
  return kernel_of_kind(device, what, kind, dtype, norm_kernel_source);
}

// Input `i` of the call, contiguous; undefined when absent.
Tensor dense_input(const KernelCall& c, size_t i) {
  if (i >= c.inputs.size() || !c.inputs[i].defined()) return Tensor();
  return c.inputs[i].is_contiguous() ? c.inputs[i] : contiguous_on_gpu(c.inputs[i]);
}

const void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }
void* mutable_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

void layer_norm_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::LayerNormAttrs&>(c.attrs);
  const Tensor x = dense_input(c, 0), w = dense_input(c, 1), b = dense_input(c, 2);
  long long n = numel(a.normalized_shape), rows = c.outputs[1].numel();
  if (rows == 0) return;
  const void *xp = x.raw_data(), *wp = data_or_null(w), *bp = data_or_null(b);
  void *yp = c.outputs[0].raw_data(), *mean = c.outputs[1].raw_data(), *rstd = c.outputs[2].raw_data();
  double eps = a.eps;
  void* params[] = {&xp, &wp, &bp, &yp, &mean, &rstd, &rows, &n, &eps};
  launch_over_rows(kernel_for(NormKernel::LayerNorm, "layer_norm", x.dtype(), x.device().index), rows, n, params);
}

void layer_norm_backward_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::LayerNormAttrs&>(c.attrs);
  const Tensor g = dense_input(c, 0), x = dense_input(c, 1), w = dense_input(c, 2);
  const Tensor mean = dense_input(c, 3), rstd = dense_input(c, 4);
  long long n = numel(a.normalized_shape), rows = mean.numel();
  const int device = x.device().index;
  const void *gp = g.raw_data(), *xp = x.raw_data(), *wp = data_or_null(w), *mp = mean.raw_data(),
             *rp = rstd.raw_data();
  void *gx = c.outputs[0].raw_data(), *gw = c.outputs[1].raw_data(), *gb = c.outputs[2].raw_data();
  if (rows > 0) {
    void* params[] = {&gp, &xp, &wp, &mp, &rp, &gx, &rows, &n};
    launch_over_rows(kernel_for(NormKernel::LayerNormGrad, "layer_norm_grad", x.dtype(), device), rows, n, params);
  }
  if (n > 0) {  // with no rows the sums are zeros
    void* params[] = {&gp, &xp, &mp, &rp, &gw, &gb, &rows, &n};
    launch_over_elements(kernel_for(NormKernel::LayerNormParams, "layer_norm_params", x.dtype(), device), n,
                         params);
  }
}

// x [N, C, *] seen as [N, C, S].
struct Channels {
  long long N, C, S;
  explicit Channels(const Tensor& x)
      : N(x.size(0)), C(x.size(1)), S(x.size(0) == 0 || x.size(1) == 0 ? 0 : x.numel() / (x.size(0) * x.size(1))) {}
};

void apply_per_channel(const Tensor& g, const Tensor& x, const Tensor& coef, const Tensor& out, const Channels& ch) {
  long long count = out.numel(), C = ch.C, S = ch.S;
  if (count == 0) return;
  const void *gp = data_or_null(g), *xp = x.raw_data(), *cp = coef.raw_data();
  void* op = out.raw_data();
  void* params[] = {&gp, &xp, &cp, &op, &count, &C, &S};
  launch_over_elements(kernel_for(NormKernel::ChannelAffine, "channel_affine", x.dtype(), x.device().index), count,
                       params);
}

void batch_norm_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::BatchNormAttrs&>(c.attrs);
  const Tensor x = dense_input(c, 0), w = dense_input(c, 1), b = dense_input(c, 2);
  const Tensor running_mean = dense_input(c, 3), running_var = dense_input(c, 4);
  Channels ch(x);
  if (ch.C == 0) return;
  const Tensor coef = Tensor::empty({3 * ch.C}, x.dtype(), x.device());
  const bool updates = c.outputs.size() == 5;
  const void *xp = x.raw_data(), *wp = data_or_null(w), *bp = data_or_null(b), *rm = data_or_null(running_mean),
             *rv = data_or_null(running_var);
  void *save_mean = c.outputs[1].raw_data(), *save_invstd = c.outputs[2].raw_data();
  void *new_mean = updates ? mutable_or_null(c.outputs[3]) : nullptr;
  void *new_var = updates ? mutable_or_null(c.outputs[4]) : nullptr;
  void* cp = coef.raw_data();
  int training = a.training ? 1 : 0;
  double momentum = a.momentum, eps = a.eps;
  void* params[] = {&xp, &wp, &bp, &rm, &rv, &save_mean, &save_invstd, &new_mean, &new_var, &cp,
                    &ch.N, &ch.C, &ch.S, &training, &momentum, &eps};
  launch_over_rows(kernel_for(NormKernel::BatchStats, "batch_norm_stats", x.dtype(), x.device().index), ch.C,
                   ch.N * ch.S, params);
  apply_per_channel(Tensor(), x, coef, c.outputs[0], ch);
}

void batch_norm_backward_kernel(KernelCall& c) {
  const Tensor g = dense_input(c, 0), x = dense_input(c, 1), w = dense_input(c, 2);
  const Tensor mean = dense_input(c, 3), invstd = dense_input(c, 4);
  Channels ch(x);
  if (ch.C == 0) return;
  const Tensor coef = Tensor::empty({3 * ch.C}, x.dtype(), x.device());
  const void *gp = g.raw_data(), *xp = x.raw_data(), *wp = data_or_null(w), *mp = mean.raw_data(),
             *ip = invstd.raw_data();
  void *gw = c.outputs[1].raw_data(), *gb = c.outputs[2].raw_data(), *cp = coef.raw_data();
  void* params[] = {&gp, &xp, &wp, &mp, &ip, &gw, &gb, &cp, &ch.N, &ch.C, &ch.S};
  launch_over_rows(kernel_for(NormKernel::BatchGradStats, "batch_norm_grad_stats", x.dtype(), x.device().index),
                   ch.C, ch.N * ch.S, params);
  apply_per_channel(g, x, coef, c.outputs[0], ch);
}

}  // namespace

std::string norm_kernel_source(NormKernel kind, DType dtype, const std::string& name) {
  KILN_CHECK(dtype == kFloat32 || dtype == kFloat64, "[cuda] the norm kernels take float32 or float64, got ",
             dtype, ". Fix: normalize in float32 and convert with .to().");
  const std::string t = storage_type(dtype);
  std::ostringstream s;
  s << "// kiln eager kernel: " << name << "(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << block_sums(name, t) << "KILN_KERNEL void " << name << "(" << parameters(kind, t)
    << ") {\n"
    << body(kind, t, name) << "}\n";
  return s.str();
}

void register_norm_kernels() {
  auto set = [](OpDef& op, KernelFn kernel) { op.kernels[static_cast<size_t>(DeviceType::CUDA)] = kernel; };
  set(ops::layer_norm, layer_norm_kernel);
  set(ops::layer_norm_backward, layer_norm_backward_kernel);
  set(ops::batch_norm, batch_norm_kernel);
  set(ops::batch_norm_backward, batch_norm_backward_kernel);
}

}  // namespace kiln::cuda
