// softmax and log_softmax on CUDA tensors (kiln/cuda/softmax_kernels.h): the source, and the
// kernel that makes the input contiguous (so one plan locates input and output), finds the
// generated kernel and launches a block per row.
#include "kiln/cuda/softmax_kernels.h"

#include <limits>
#include <sstream>

#include "cuda_c_builder.h"
#include "kernel_cache.h"
#include "kernel_source.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/error.h"
#include "kiln/ops/softmax.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

template <bool Log>
void softmax_kernel(KernelCall& c) {
  const Tensor& out = c.outputs[0];
  const Tensor x = c.inputs[0].is_contiguous() ? c.inputs[0] : contiguous_on_gpu(c.inputs[0]);
  const int64_t dim = wrap_dim(static_cast<const ops::SoftmaxAttrs&>(c.attrs).dim, x.dim(),
                               c.op.name.c_str());
  const ReductionPlan plan = plan_reduction(x, uint64_t{1} << dim);
  if (plan.outputs == 0 || plan.reduced == 0) return;
  const int device = out.device().index;
  const std::string key = std::string(Log ? "log_softmax" : "softmax") + "(" +
                          std::string(dtype_name(x.dtype())) + ")/kept" +
                          std::to_string(plan.kept_rank) + "/reduced" +
                          std::to_string(plan.reduced_rank);
  const GeneratedKernel& kernel = generated_kernel(device, key, c.op.name, [&](const std::string& name) {
    return softmax_kernel_source(Log, x.dtype(), plan, name);
  });
  const void* in_pointer = x.raw_data();
  void* out_pointer = out.raw_data();
  long long rows = plan.outputs, cols = plan.reduced;
  ReduceKernelDims dims = reduce_kernel_dims(plan);
  void* params[] = {&in_pointer, &out_pointer, &rows, &cols, &dims};
  launch_over_rows(kernel, plan.outputs, plan.reduced, params);
}

}  // namespace

std::string softmax_kernel_source(bool log, DType dtype, const ReductionPlan& plan,
                                  const std::string& name) {
  KILN_CHECK(dtype == DType::Float32 || dtype == DType::Float64, "[cuda] softmax kernels take "
             "float32 or float64, got ", dtype, ".");
  const std::string t = CudaCBuilder::compute_type(dtype);
  std::ostringstream s;
  s << "// kiln eager kernel: " << (log ? "log_softmax" : "softmax") << "(" << dtype_name(dtype)
    << ")\n"
    << kKernelPrelude
    << device_function(name + "_max", dtype, 2,
                [](CudaCBuilder& b, const std::vector<ScalarValue>& a) {
                  return b.binary(ScalarOp::Max, a[0], a[1]);
                })
    << device_function(name + "_add", dtype, 2,
                [](CudaCBuilder& b, const std::vector<ScalarValue>& a) { return b.add(a[0], a[1]); })
    << device_function(name + "_lowest", dtype, 0,
                [&](CudaCBuilder& b, const std::vector<ScalarValue>&) {
                  return b.constant(-std::numeric_limits<double>::infinity(), dtype);
                })
    << device_function(name + "_zero", dtype, 0,
                [&](CudaCBuilder& b, const std::vector<ScalarValue>&) { return b.constant(0, dtype); })
    // exp(x - max), and the output from it: divided by the sum, or its log minus log(sum).
    << device_function(name + "_shifted_exp", dtype, 2,
                [](CudaCBuilder& b, const std::vector<ScalarValue>& a) {
                  return b.unary(ScalarOp::Exp, b.sub(a[0], a[1]));
                })
    << device_function(name + "_output", dtype, 3,
                [log](CudaCBuilder& b, const std::vector<ScalarValue>& a) {
                  // a0: x, a1: the row maximum, a2: the sum of exp(x - max)
                  return log ? b.sub(b.sub(a[0], a[1]), b.unary(ScalarOp::Log, a[2]))
                             : b.div(b.unary(ScalarOp::Exp, b.sub(a[0], a[1])), a[2]);
                })
    << block_reduce_source(name + "_row_max", t, name + "_max", name + "_lowest()", true)
    << block_reduce_source(name + "_row_sum", t, name + "_add", name + "_zero()", true)
    << "KILN_KERNEL void " << name << "(const " << t << "* __restrict__ in, " << t
    << "* __restrict__ out, long long rows, long long cols, KilnReduceDims dims) {\n"
    << "  for (long long o = KILN_BLOCK_INDEX; o < rows; o += KILN_BLOCK_COUNT) {\n"
    << "    long long base = 0;\n"
    << offset_code("o", "base", "kept_sizes", "kept_strides", plan.kept_rank, "    ")
    << "    " << t << " m = " << name << "_lowest();\n"
    << "    for (long long r = KILN_THREAD_INDEX; r < cols; r += KILN_THREAD_COUNT) {\n"
    << "      long long offset = base;\n"
    << offset_code("r", "offset", "reduced_sizes", "reduced_strides", plan.reduced_rank, "      ")
    << "      m = " << name << "_max(m, in[offset]);\n"
    << "    }\n"
    << "    m = " << name << "_row_max(m);\n"
    << "    " << t << " sum = " << name << "_zero();\n"
    << "    for (long long r = KILN_THREAD_INDEX; r < cols; r += KILN_THREAD_COUNT) {\n"
    << "      long long offset = base;\n"
    << offset_code("r", "offset", "reduced_sizes", "reduced_strides", plan.reduced_rank, "      ")
    << "      sum = " << name << "_add(sum, " << name << "_shifted_exp(in[offset], m));\n"
    << "    }\n"
    << "    sum = " << name << "_row_sum(sum);\n"
    << "    for (long long r = KILN_THREAD_INDEX; r < cols; r += KILN_THREAD_COUNT) {\n"
    << "      long long offset = base;\n"
    << offset_code("r", "offset", "reduced_sizes", "reduced_strides", plan.reduced_rank, "      ")
    << "      out[offset] = " << name << "_output(in[offset], m, sum);\n"
    << "    }\n"
    << "  }\n}\n";
  return s.str();
}

void register_softmax_kernels() {
  ops::softmax.kernels[static_cast<size_t>(DeviceType::CUDA)] = softmax_kernel<false>;
  ops::log_softmax.kernels[static_cast<size_t>(DeviceType::CUDA)] = softmax_kernel<true>;
}

}  // namespace kiln::cuda
