// var and norm on CUDA tensors (kiln/cuda/statistic_kernels.h): their sources, and the
// kernels that plan the reads, find the generated kernel and launch a block per output.
#include "kiln/cuda/statistic_kernels.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "cuda_c_builder.h"
#include "kernel_cache.h"
#include "kernel_source.h"
#include "kiln/error.h"
#include "kiln/ops/reduction.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

// The loop header and offset of each of the block's elements of output `o`.
std::string for_each_reduced(const ReductionPlan& plan) {
  return "    for (long long r = KILN_THREAD_INDEX; r < reduced; r += KILN_THREAD_COUNT) {\n"
         "      long long offset = base;\n" +
         offset_code("r", "offset", "reduced_sizes", "reduced_strides", plan.reduced_rank, "      ");
}

std::string kernel_head(const std::string& name, DType dtype, const ReductionPlan& plan,
                        const std::string& extra_params) {
  const std::string t = CudaCBuilder::compute_type(dtype);
  return "KILN_KERNEL void " + name + "(const " + t + "* __restrict__ in, " + t +
         "* __restrict__ out, long long outputs, long long reduced, KilnReduceDims dims" +
         extra_params + ") {\n" +
         "  for (long long o = KILN_BLOCK_INDEX; o < outputs; o += KILN_BLOCK_COUNT) {\n"
         "    long long base = 0;\n" +
         offset_code("o", "base", "kept_sizes", "kept_strides", plan.kept_rank, "    ");
}

void launch(KernelCall& c, uint64_t mask, const std::string& key,
            const std::function<std::string(const std::string&)>& source, double* correction) {
  const Tensor& x = c.inputs[0];
  const ReductionPlan plan = plan_reduction(x, mask);
  if (plan.outputs == 0) return;
  const GeneratedKernel& kernel = generated_kernel(
      x.device().index,
      key + "(" + std::string(dtype_name(x.dtype())) + ")/kept" + std::to_string(plan.kept_rank) +
          "/reduced" + std::to_string(plan.reduced_rank),
      c.op.name, [&](const std::string& name) { return source(name); });
  const void* in_pointer = x.raw_data();
  void* out_pointer = c.outputs[0].raw_data();
  long long outputs = plan.outputs, reduced = plan.reduced;
  ReduceKernelDims dims = reduce_kernel_dims(plan);
  std::vector<void*> params = {&in_pointer, &out_pointer, &outputs, &reduced, &dims};
  if (correction) params.push_back(correction);
  launch_over_rows(kernel, plan.outputs, plan.reduced, params.data());
}

void var_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::VarAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  const uint64_t mask = reduction_mask(a.dims, x.dim(), "var");
  double correction = a.correction;
  launch(c, mask, "var",
         [&](const std::string& name) {
           return var_kernel_source(x.dtype(), plan_reduction(x, mask), name);
         },
         &correction);
}

void norm_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::NormAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  const uint64_t mask = reduction_mask(a.dims, x.dim(), "norm");
  std::ostringstream key;
  key.precision(17);
  key << "norm" << a.p;
  launch(c, mask, key.str(),
         [&](const std::string& name) {
           return norm_kernel_source(a.p, x.dtype(), plan_reduction(x, mask), name);
         },
         nullptr);
}

}  // namespace

std::string var_kernel_source(DType dtype, const ReductionPlan& plan, const std::string& name) {
  KILN_CHECK(dtype == DType::Float32 || dtype == DType::Float64,
             "[cuda] var kernels take float32 or float64, got ", dtype, ".");
  const std::string t = CudaCBuilder::compute_type(dtype);
  std::ostringstream s;
  s << "// kiln eager kernel: var(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << "KILN_DEVICE double " << name << "_add(double a, double b) { return a + b; }\n"
    << block_reduce_source(name + "_sum", "double", name + "_add", "0.0", true)
    << kernel_head(name, dtype, plan, ", double correction")
    << "    double sum = 0;\n"
    << for_each_reduced(plan) << "      sum += (double)in[offset];\n    }\n"
    << "    const double mean = " << name << "_sum(sum) / (double)reduced;\n"
    << "    double m2 = 0;\n"
    << for_each_reduced(plan)
    << "      const double d = (double)in[offset] - mean;\n      m2 += d * d;\n    }\n"
    << "    m2 = " << name << "_sum(m2);\n"
    << "    // n - correction <= 0 divides by zero (nan or inf), as on the cpu.\n"
    << "    if (KILN_THREAD_INDEX == 0) out[o] = (" << t
    << ")(m2 / fmax(0.0, (double)reduced - correction));\n"
    << "  }\n}\n";
  return s.str();
}

std::string norm_kernel_source(double p, DType dtype, const ReductionPlan& plan,
                               const std::string& name) {
  KILN_CHECK(dtype == DType::Float32 || dtype == DType::Float64,
             "[cuda] norm kernels take float32 or float64, got ", dtype, ".");
  const std::string t = CudaCBuilder::compute_type(dtype);
  const bool extreme = std::isinf(p);
  const double inf = std::numeric_limits<double>::infinity();
  using Values = std::vector<ScalarValue>;
  std::ostringstream s;
  s << "// kiln eager kernel: norm(p=" << p << ", " << dtype_name(dtype) << ")\n"
    << kKernelPrelude
    // What each element adds: x != 0, |x|, x², or |x|^p; |x| for the extremes.
    << device_function(name + "_term", dtype, 1,
                [&](CudaCBuilder& b, const Values& a) {
                  if (p == 0) return b.cast(b.binary(ScalarOp::Ne, a[0], b.like(a[0], 0)), dtype);
                  if (p == 2) return b.mul(a[0], a[0]);
                  const ScalarValue magnitude = b.unary(ScalarOp::Abs, a[0]);
                  if (p == 1 || extreme) return magnitude;
                  return b.binary(ScalarOp::Pow, magnitude, b.like(magnitude, p));
                })
    << device_function(name + "_combine", dtype, 2,
                [&](CudaCBuilder& b, const Values& a) {
                  if (!extreme) return b.add(a[0], a[1]);
                  return b.binary(p > 0 ? ScalarOp::Max : ScalarOp::Min, a[0], a[1]);
                })
    << device_function(name + "_identity", dtype, 0,
                [&](CudaCBuilder& b, const Values&) {
                  return b.constant(!extreme ? 0 : p > 0 ? -inf : inf, dtype);
                })
    << device_function(name + "_finish", dtype, 1,
                [&](CudaCBuilder& b, const Values& a) {
                  if (p == 2) return b.unary(ScalarOp::Sqrt, a[0]);
                  if (p == 0 || p == 1 || extreme) return a[0];
                  return b.binary(ScalarOp::Pow, a[0], b.like(a[0], 1 / p));
                })
    << block_reduce_source(name + "_block", t, name + "_combine", name + "_identity()", false)
    << kernel_head(name, dtype, plan, "")
    << "    " << t << " value = " << name << "_identity();\n"
    << for_each_reduced(plan) << "      value = " << name << "_combine(value, " << name
    << "_term(in[offset]));\n    }\n"
    << "    value = " << name << "_block(value);\n"
    << "    if (KILN_THREAD_INDEX == 0) out[o] = " << name << "_finish(value);\n"
    << "  }\n}\n";
  return s.str();
}

void register_statistic_kernels() {
  ops::var.kernels[static_cast<size_t>(DeviceType::CUDA)] = var_kernel;
  ops::norm.kernels[static_cast<size_t>(DeviceType::CUDA)] = norm_kernel;
}

}  // namespace kiln::cuda
