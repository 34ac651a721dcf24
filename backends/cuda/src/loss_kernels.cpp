// nll_loss and nll_loss_backward on CUDA tensors (kiln/cuda/loss_kernels.h).
#include "kiln/cuda/loss_kernels.h"

#include <sstream>
#include <vector>

#include "cuda_c_builder.h"
#include "failure_flag.h"
#include "index_check.h"
#include "kernel_cache.h"
#include "kernel_source.h"
#include "tensor_views.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/loss.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

// input [N, C, S...] seen as [N, C, inner] ([C] is N = inner = 1), targets as [N * inner].
struct NllLayout {
  int64_t classes = 1, inner = 1;
  explicit NllLayout(IntList input) {
    if (input.size() == 1) {
      classes = input[0];
      return;
    }
    classes = input[1];
    for (size_t d = 2; d < input.size(); ++d) inner *= input[d];
  }
};

// The target's classes checked on the GPU (only the first bad one is read back), with the
// CPU kernel's message.
void check_targets(const Tensor& target, int64_t classes, int64_t ignore_index, const char* op) {
  check_indices(target, classes, ignore_index, [classes, op](const BadIndex& bad) {
    KILN_FAIL("[", op, "] index ", bad.value, " (element ", bad.element, " of the target) is out of range for ",
              classes, " entries: expected 0 <= index < ", classes,
              ". Fix: class indices must lie in [0, num_classes) (or equal ignore_index).");
  });
}

const void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// Input `i` of the call, contiguous (the kernels index it densely); undefined when absent.
Tensor dense_input(const KernelCall& c, size_t i) {
  if (i >= c.inputs.size() || !c.inputs[i].defined()) return Tensor();
  return c.inputs[i].is_contiguous() ? c.inputs[i] : contiguous_on_gpu(c.inputs[i]);
}

// Each target's loss -w[t] * input[n, t, s] and weight w[t] (0 and 0 when ignored) into
// `losses` and `weights`; without an input (the backward's total weight) only the weights.
void per_target(const Tensor& x, const Tensor& target, const Tensor& weight, const NllLayout& layout,
                int64_t ignore_index, const Tensor& losses, const Tensor& weights) {
  long long n = target.numel();
  if (n == 0) return;
  const DType dtype = weights.dtype();
  const GeneratedKernel& kernel = generated_kernel(
      weights.device().index, std::string("nll_loss(") + std::string(dtype_name(dtype)) + ")", "nll_loss",
      [&](const std::string& name) { return nll_loss_kernel_source(dtype, name); });
  const void* input_pointer = data_or_null(x);
  const void* target_pointer = target.raw_data();
  const void* weight_pointer = data_or_null(weight);
  void* loss_pointer = losses.defined() ? losses.raw_data() : nullptr;
  void* weights_pointer = weights.raw_data();
  long long classes = layout.classes, inner = layout.inner, ignore = ignore_index;
  void* params[] = {&input_pointer, &target_pointer, &weight_pointer, &loss_pointer,
                    &weights_pointer, &n, &classes, &inner, &ignore};
  launch_over_elements(kernel, n, params);
}

Tensor summed(const Tensor& t) { return dispatch1(ops::sum, std::span<const Tensor>(&t, 1), ops::ReduceAttrs{}); }

void nll_loss_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::NllLossAttrs&>(c.attrs);
  const Tensor x = dense_input(c, 0), target = dense_input(c, 1), weight = dense_input(c, 2);
  const Tensor& out = c.outputs[0];
  const NllLayout layout(x.sizes());
  check_targets(target, layout.classes, a.ignore_index, "nll_loss");
  const int64_t n = target.numel();
  // Per element: "none" writes the losses straight into the output.
  const bool per_element = a.reduction == "none";
  Tensor losses = per_element ? out : Tensor::empty({n}, x.dtype(), x.device());
  Tensor weights = Tensor::empty({n}, x.dtype(), x.device());
  per_target(x, target, weight, layout, a.ignore_index, losses, weights);
  if (per_element) return;
  // The sums by the reduction kernel; mean divides by the counted targets' weights (0/0 is
  // nan when none count, as on the cpu).
  const Tensor total = summed(losses);
  if (a.reduction == "sum") {
    const Tensor copy[] = {total};
    dispatch_into(ops::clone, copy, no_attrs(), out);
    return;
  }
  const Tensor quotient[] = {total, summed(weights)};
  dispatch_into(ops::div, quotient, no_attrs(), out);
}

void nll_loss_backward_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::NllLossBackwardAttrs&>(c.attrs);
  const Tensor grad = dense_input(c, 0), target = dense_input(c, 1), weight = dense_input(c, 2);
  const Tensor& out = c.outputs[0];
  const NllLayout layout(a.input_shape);
  check_targets(target, layout.classes, a.ignore_index, "nll_loss_backward");
  fill_on_gpu(out, 0);
  long long n = target.numel();
  if (n == 0 || out.numel() == 0) return;
  // Mean: each gradient is divided by the counted targets' summed weight, which stays on the
  // GPU (the kernel reads it there).
  Tensor total_weight;
  if (a.reduction == "mean") {
    const Tensor weights = Tensor::empty({n}, out.dtype(), out.device());
    per_target(Tensor(), target, weight, layout, a.ignore_index, Tensor(), weights);
    total_weight = summed(weights);
  }
  const GeneratedKernel& kernel = generated_kernel(
      out.device().index, std::string("nll_loss_backward(") + std::string(dtype_name(out.dtype())) + ")",
      "nll_loss_backward",
      [&](const std::string& name) { return nll_loss_backward_kernel_source(out.dtype(), name); });
  const void* grad_pointer = grad.raw_data();
  int per_element = a.reduction == "none" ? 1 : 0;
  const void* target_pointer = target.raw_data();
  const void* weight_pointer = data_or_null(weight);
  const void* divisor_pointer = data_or_null(total_weight);
  void* out_pointer = out.raw_data();
  long long classes = layout.classes, inner = layout.inner, ignore = a.ignore_index;
  void* params[] = {&grad_pointer, &per_element, &target_pointer, &weight_pointer, &divisor_pointer,
                    &out_pointer, &n, &classes, &inner, &ignore};
  launch_over_elements(kernel, n, params);
}

}  // namespace

std::string nll_loss_kernel_source(DType dtype, const std::string& name) {
  const std::string t = CudaCBuilder::compute_type(dtype);
  std::ostringstream s;
  s << "// kiln eager kernel: nll_loss(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << "KILN_KERNEL void " << name << "(const " << t
    << "* __restrict__ input, const long long* __restrict__ target, const " << t
    << "* __restrict__ weight, " << t << "* __restrict__ loss, " << t
    << "* __restrict__ weights, long long n, long long classes, long long inner, "
       "long long ignore) {\n"
    << "  KILN_FOR_EACH_ELEMENT(i, n) {\n"
    << "    const long long t = target[i];\n"
    << "    if (t == ignore) {\n"
    << "      if (loss) loss[i] = 0;\n"
    << "      weights[i] = 0;\n"
    << "      continue;\n"
    << "    }\n"
    << "    const " << t << " w = weight ? weight[t] : (" << t << ")1;\n"
    << "    if (loss) loss[i] = -w * input[(i / inner) * classes * inner + t * inner + i % inner];\n"
    << "    weights[i] = w;\n"
    << "  }\n}\n";
  return s.str();
}

std::string nll_loss_backward_kernel_source(DType dtype, const std::string& name) {
  const std::string t = CudaCBuilder::compute_type(dtype);
  std::ostringstream s;
  s << "// kiln eager kernel: nll_loss_backward(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << "KILN_KERNEL void " << name << "(const " << t
    << "* __restrict__ grad, int grad_per_element, const long long* __restrict__ target, const "
    << t << "* __restrict__ weight, const " << t << "* __restrict__ divisor, " << t
    << "* __restrict__ out, long long n, long long classes, long long inner, long long ignore) {\n"
    << "  KILN_FOR_EACH_ELEMENT(i, n) {\n"
    << "    const long long t = target[i];\n"
    << "    if (t == ignore) continue;\n"
    << "    const double g = grad_per_element ? grad[i] : grad[0];\n"
    << "    const double w = weight ? weight[t] : 1.0;\n"
    << "    const double scale = divisor ? 1.0 / (double)divisor[0] : 1.0;\n"
    << "    out[(i / inner) * classes * inner + t * inner + i % inner] = (" << t
    << ")(-w * g * scale);\n"
    << "  }\n}\n";
  return s.str();
}

std::string binary_cross_entropy_kernel_source(DType dtype, const std::string& name) {
  KILN_CHECK(dtype == kFloat32 || dtype == kFloat64, "[cuda] binary_cross_entropy takes float32 or float64, got ",
             dtype, ".");
  const std::string t = CudaCBuilder::compute_type(dtype);
  std::ostringstream s;
  // Each log is clamped at -100 as in PyTorch (x = 0 or 1 gives a finite loss); NaN stays NaN,
  // as std::max(NaN, -100) leaves it on the CPU.
  s << "// kiln eager kernel: binary_cross_entropy(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << "KILN_KERNEL void " << name << "(const " << t << "* __restrict__ x, const " << t
    << "* __restrict__ target, " << t << "* __restrict__ out, long long n, long long* first_bad) {\n"
    << "  KILN_FOR_EACH_ELEMENT(i, n) {\n"
    << "    const " << t << " v = x[i], y = target[i];\n"
    << "    if (!(v >= 0 && v <= 1)) kiln_atomic_min(first_bad, i);\n"
    << "    " << t << " lx = log(v), l1x = log((" << t << ")1 - v);\n"
    << "    lx = lx < (" << t << ")-100 ? (" << t << ")-100 : lx;\n"
    << "    l1x = l1x < (" << t << ")-100 ? (" << t << ")-100 : l1x;\n"
    << "    out[i] = -(y * lx + ((" << t << ")1 - y) * l1x);\n"
    << "  }\n}\n";
  return s.str();
}

namespace {

// The loss elementwise; an input outside [0, 1] is found on the GPU, read back (one
// synchronization per call) and named with the CPU kernel's message.
void binary_cross_entropy_kernel(KernelCall& c) {
  const Tensor x = dense_input(c, 0), target = dense_input(c, 1);
  const Tensor& out = c.outputs[0];
  long long n = out.numel();
  if (n == 0) return;
  const Tensor first_bad = failure_flag(out.device());
  const GeneratedKernel& kernel = generated_kernel(
      out.device().index, "binary_cross_entropy(" + std::string(dtype_name(x.dtype())) + ")", "binary_cross_entropy",
      [&](const std::string& name) { return binary_cross_entropy_kernel_source(x.dtype(), name); });
  const void *x_pointer = x.raw_data(), *target_pointer = target.raw_data();
  void *out_pointer = out.raw_data(), *bad_pointer = first_bad.raw_data();
  void* params[] = {&x_pointer, &target_pointer, &out_pointer, &n, &bad_pointer};
  launch_over_elements(kernel, n, params);
  check_failure(first_bad, [x](int64_t bad) {
    KILN_FAIL("[binary_cross_entropy] expected every input in [0, 1] (probabilities), got ",
              element(x, bad).item<double>(),
              ". Fix: apply sigmoid first, or use binary_cross_entropy_with_logits on the raw scores.");
  });
}

}  // namespace

void register_loss_kernels() {
  ops::nll_loss.kernels[static_cast<size_t>(DeviceType::CUDA)] = nll_loss_kernel;
  ops::nll_loss_backward.kernels[static_cast<size_t>(DeviceType::CUDA)] = nll_loss_backward_kernel;
  ops::binary_cross_entropy.kernels[static_cast<size_t>(DeviceType::CUDA)] = binary_cross_entropy_kernel;
}

}  // namespace kiln::cuda
