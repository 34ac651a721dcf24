// Planning a reduction's reads and writing its CUDA C (kiln/cuda/reduction_kernels.h). No GPU
// or NVRTC needed here: tests check the plan and compile the source on the host.
#include <algorithm>
#include <limits>
#include <sstream>
#include <vector>

#include "cuda_c_builder.h"
#include "kernel_source.h"
#include "kiln/cuda/reduction_kernels.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

struct Dim {
  int64_t size, stride;
};

// Dims of size 1 dropped, then neighbours merged where stepping over both is one stride.
std::vector<Dim> merged(const std::vector<Dim>& dims) {
  std::vector<Dim> out;
  for (const Dim& d : dims) {
    if (d.size == 1) continue;
    if (!out.empty() && out.back().stride == d.stride * d.size) {
      out.back() = {out.back().size * d.size, d.stride};
      continue;
    }
    out.push_back(d);
  }
  return out;
}

ScalarOp combining_op(ReductionKind kind) {
  switch (kind) {
    case ReductionKind::Sum:
      return ScalarOp::Add;
    case ReductionKind::Prod:
      return ScalarOp::Mul;
    case ReductionKind::Max:
      return ScalarOp::Max;
    case ReductionKind::Min:
      return ScalarOp::Min;
    case ReductionKind::All:
      return ScalarOp::And;
    case ReductionKind::Any:
      return ScalarOp::Or;
  }
  return ScalarOp::Add;
}

// The value combining leaves unchanged.
double identity(ReductionKind kind, DType t) {
  const bool floating = is_floating(t);
  switch (kind) {
    case ReductionKind::Sum:
    case ReductionKind::Any:
      return 0;
    case ReductionKind::Prod:
    case ReductionKind::All:
      return 1;
    case ReductionKind::Max:
      return floating ? -std::numeric_limits<double>::infinity()
                      : static_cast<double>(t == DType::Int32 ? std::numeric_limits<int32_t>::min()
                                                              : std::numeric_limits<int64_t>::min());
    case ReductionKind::Min:
      return floating ? std::numeric_limits<double>::infinity()
                      : static_cast<double>(t == DType::Int32 ? std::numeric_limits<int32_t>::max()
                                                              : std::numeric_limits<int64_t>::max());
  }
  return 0;
}

const char* kind_name(ReductionKind kind) {
  switch (kind) {
    case ReductionKind::Sum:
      return "sum";
    case ReductionKind::Prod:
      return "prod";
    case ReductionKind::Max:
      return "amax";
    case ReductionKind::Min:
      return "amin";
    case ReductionKind::All:
      return "all";
    case ReductionKind::Any:
      return "any";
  }
  return "?";
}

// A device function `name` of the builder's parameters returning `result`.
std::string function(const CudaCBuilder& b, DType result_dtype, const std::string& name,
                     const std::string& params, ScalarValue result) {
  return "KILN_DEVICE " + std::string(CudaCBuilder::compute_type(result_dtype)) + " " + name +
         "(" + params + ") {\n" + b.statements() + "  return " + b.name(result) + ";\n}\n";
}

}  // namespace

ReductionPlan plan_reduction(const Tensor& input, uint64_t mask) {
  std::vector<Dim> kept, reduced;
  for (int64_t d = 0; d < input.dim(); ++d) {
    const Dim dim{input.sizes()[static_cast<size_t>(d)], input.strides()[static_cast<size_t>(d)]};
    ((mask >> d) & 1 ? reduced : kept).push_back(dim);
  }
  ReductionPlan plan;
  for (const Dim& d : kept) plan.outputs *= d.size;
  for (const Dim& d : reduced) plan.reduced *= d.size;
  kept = merged(kept);
  reduced = merged(reduced);
  KILN_CHECK(kept.size() <= ReductionPlan::kMaxDims && reduced.size() <= ReductionPlan::kMaxDims,
             "[cuda] expected a reduction to need at most ", ReductionPlan::kMaxDims,
             " kept and reduced dims once contiguous dims merge, found ", kept.size(), " and ",
             reduced.size(), " (input ", input.type_str(), "). Fix: make the input contiguous "
             "first (x.contiguous()).");
  plan.kept_rank = static_cast<int>(kept.size());
  plan.reduced_rank = static_cast<int>(reduced.size());
  for (size_t d = 0; d < kept.size(); ++d) {
    plan.kept_sizes[d] = kept[d].size;
    plan.kept_strides[d] = kept[d].stride;
  }
  for (size_t d = 0; d < reduced.size(); ++d) {
    plan.reduced_sizes[d] = reduced[d].size;
    plan.reduced_strides[d] = reduced[d].stride;
  }
  return plan;
}

ReduceKernelDims reduce_kernel_dims(const ReductionPlan& plan) {
  ReduceKernelDims out{};
  for (size_t d = 0; d < ReductionPlan::kMaxDims; ++d) {
    out.kept_sizes[d] = plan.kept_sizes[d];
    out.kept_strides[d] = plan.kept_strides[d];
    out.reduced_sizes[d] = plan.reduced_sizes[d];
    out.reduced_strides[d] = plan.reduced_strides[d];
  }
  return out;
}

std::string reduction_kernel_key(ReductionKind kind, DType input, DType output,
                                 const ReductionPlan& plan) {
  std::ostringstream key;
  key << kind_name(kind) << "(" << dtype_name(input) << ")->" << dtype_name(output) << "/kept"
      << plan.kept_rank << "/reduced" << plan.reduced_rank;
  return key.str();
}

std::string reduction_kernel_source(ReductionKind kind, DType input, DType output,
                                    const ReductionPlan& plan, const std::string& name) {
  const std::string acc = CudaCBuilder::compute_type(output);
  // The three pieces the loop needs, each written by the scalar builder: the input as an
  // accumulator value, the identity, and the combining step.
  CudaCBuilder to_acc;
  const ScalarValue converted = to_acc.cast(to_acc.parameter("x", input), output);
  CudaCBuilder start;
  const ScalarValue identity_value = start.constant(identity(kind, output), output);
  CudaCBuilder step;
  const ScalarValue combined = step.binary(combining_op(kind), step.parameter("a", output),
                                           step.parameter("b", output));

  std::ostringstream s;
  s << "// kiln eager kernel: " << reduction_kernel_key(kind, input, output, plan) << "\n"
    << kKernelPrelude
    << function(to_acc, output, name + "_load",
                std::string(CudaCBuilder::compute_type(input)) + " x", converted)
    << function(start, output, name + "_identity", "", identity_value)
    << function(step, output, name + "_combine", acc + " a, " + acc + " b", combined)
    << block_reduce_source(name + "_block", acc, name + "_combine", name + "_identity()", false)
    << "KILN_KERNEL void " << name << "(const " << storage_type(input) << "* __restrict__ in, "
    << storage_type(output) << "* __restrict__ out, long long outputs, long long reduced, "
    << "KilnReduceDims dims) {\n"
    << "  for (long long o = KILN_BLOCK_INDEX; o < outputs; o += KILN_BLOCK_COUNT) {\n"
    << "    long long base = 0;\n"
    << offset_code("o", "base", "kept_sizes", "kept_strides", plan.kept_rank, "    ")
    << "    " << acc << " value = " << name << "_identity();\n"
    << "    for (long long r = KILN_THREAD_INDEX; r < reduced; r += KILN_THREAD_COUNT) {\n"
    << "      long long offset = base;\n"
    << offset_code("r", "offset", "reduced_sizes", "reduced_strides", plan.reduced_rank, "      ")
    << "      value = " << name << "_combine(value, " << name << "_load("
    << load(input, "in[offset]") << "));\n"
    << "    }\n"
    << "    value = " << name << "_block(value);\n"
    << "    if (KILN_THREAD_INDEX == 0) out[o] = " << store(output, "value") << ";\n"
    << "  }\n}\n";
  return s.str();
}

std::string arg_reduction_kernel_source(bool max, DType dtype, const ReductionPlan& plan,
                                        const std::string& name) {
  const std::string t = CudaCBuilder::compute_type(dtype);
  CudaCBuilder start;
  const ScalarValue lowest = start.constant(identity(max ? ReductionKind::Max : ReductionKind::Min, dtype), dtype);
  std::ostringstream s;
  s << "// kiln eager kernel: " << (max ? "max_dim(" : "min_dim(") << dtype_name(dtype) << ")\n"
    << kKernelPrelude
    << function(start, dtype, name + "_identity", "", lowest)
    // Whether (a, ia) wins over (b, ib): a NaN beats any number, the more extreme value beats
    // the other, and between equals (or two NaNs) the lower index wins.
    << "KILN_DEVICE bool " << name << "_better(" << t << " a, long long ia, " << t
    << " b, long long ib) {\n"
    << "  const bool a_nan = a != a, b_nan = b != b;\n"
    << "  if (a_nan || b_nan) return a_nan && (!b_nan || ia < ib);\n"
    << "  return a " << (max ? ">" : "<") << " b || (a == b && ia < ib);\n}\n"
    << "KILN_DEVICE void " << name << "_pick(" << t << "& v, long long& i, " << t
    << " v2, long long i2) {\n"
    << "  if (" << name << "_better(v2, i2, v, i)) {\n    v = v2;\n    i = i2;\n  }\n}\n"
    << "KILN_DEVICE void " << name << "_block(" << t << "& v, long long& i) {\n"
    << "#if KILN_COOPERATIVE_BLOCKS\n"
    << "  __shared__ " << t << " values[32];\n"
    << "  __shared__ long long indices[32];\n"
    << "  for (int offset = 16; offset > 0; offset >>= 1)\n"
    << "    " << name << "_pick(v, i, kiln_shfl_down(v, offset), kiln_shfl_down(i, offset));\n"
    << "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    << "  __syncthreads();\n"
    << "  if (lane == 0) {\n    values[warp] = v;\n    indices[warp] = i;\n  }\n"
    << "  __syncthreads();\n"
    << "  const bool has = threadIdx.x < (blockDim.x + 31) / 32;\n"
    << "  v = has ? values[threadIdx.x] : " << name << "_identity();\n"
    << "  i = has ? indices[threadIdx.x] : 0x7fffffffffffffffLL;\n"
    << "  if (warp == 0)\n"
    << "    for (int offset = 16; offset > 0; offset >>= 1)\n"
    << "      " << name << "_pick(v, i, kiln_shfl_down(v, offset), kiln_shfl_down(i, offset));\n"
    << "#endif\n}\n"
    << "KILN_KERNEL void " << name << "(const " << storage_type(dtype) << "* __restrict__ in, "
    << storage_type(dtype) << "* __restrict__ values, long long* __restrict__ indices, "
    << "long long outputs, long long reduced, KilnReduceDims dims) {\n"
    << "  for (long long o = KILN_BLOCK_INDEX; o < outputs; o += KILN_BLOCK_COUNT) {\n"
    << "    long long base = 0;\n"
    << offset_code("o", "base", "kept_sizes", "kept_strides", plan.kept_rank, "    ")
    << "    " << t << " v = " << name << "_identity();\n"
    << "    long long i = 0x7fffffffffffffffLL;\n"
    << "    for (long long r = KILN_THREAD_INDEX; r < reduced; r += KILN_THREAD_COUNT) {\n"
    << "      long long offset = base;\n"
    << offset_code("r", "offset", "reduced_sizes", "reduced_strides", plan.reduced_rank, "      ")
    << "      " << name << "_pick(v, i, " << load(dtype, "in[offset]") << ", r);\n"
    << "    }\n"
    << "    " << name << "_block(v, i);\n"
    << "    if (KILN_THREAD_INDEX == 0) {\n"
    << "      values[o] = " << store(dtype, "v") << ";\n"
    << "      indices[o] = i;\n"
    << "    }\n"
    << "  }\n}\n";
  return s.str();
}

}  // namespace kiln::cuda
