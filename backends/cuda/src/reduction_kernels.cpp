// The eager kernels of sum, prod, amax, amin, all and any on CUDA tensors
// (kiln/cuda/reduction_kernels.h): plan the reads, find the kernel for the plan's pattern,
// launch a block per output (whole warps, up to 1024 threads, as many as the reduced count
// needs) on the thread's current stream.
#include "kiln/cuda/reduction_kernels.h"

#include "kernel_cache.h"
#include "kiln/error.h"
#include "kiln/ops/reduction.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

template <ReductionKind Kind>
void reduction_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& out = c.outputs[0];
  const auto& attrs = static_cast<const ops::ReduceAttrs&>(c.attrs);
  const uint64_t mask = reduction_mask(attrs.dims, x.dim(), c.op.name.c_str());
  const ReductionPlan plan = plan_reduction(x, mask);
  if (plan.outputs == 0) return;
  const int device = out.device().index;
  const std::string key = reduction_kernel_key(Kind, x.dtype(), out.dtype(), plan);
  const GeneratedKernel& kernel = generated_kernel(device, key, c.op.name, [&](const std::string& name) {
    return reduction_kernel_source(Kind, x.dtype(), out.dtype(), plan, name);
  });

  const void* in_pointer = x.raw_data();
  void* out_pointer = out.raw_data();
  long long outputs = plan.outputs, reduced = plan.reduced;
  ReduceKernelDims dims = reduce_kernel_dims(plan);
  void* params[] = {&in_pointer, &out_pointer, &outputs, &reduced, &dims};
  launch_over_rows(kernel, plan.outputs, plan.reduced, params);
}

template <bool Max>
void arg_reduction_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& attrs = static_cast<const ops::DimReduceAttrs&>(c.attrs);
  const int64_t dim = x.dim() == 0 ? 0 : wrap_dim(attrs.dim, x.dim(), c.op.name.c_str());
  const ReductionPlan plan = plan_reduction(x, x.dim() == 0 ? 0 : uint64_t{1} << dim);
  if (plan.outputs == 0) return;
  const int device = x.device().index;
  const std::string key = std::string(c.op.name) + "(" + std::string(dtype_name(x.dtype())) +
                          ")/kept" + std::to_string(plan.kept_rank) + "/reduced" +
                          std::to_string(plan.reduced_rank);
  const GeneratedKernel& kernel = generated_kernel(device, key, c.op.name, [&](const std::string& name) {
    return arg_reduction_kernel_source(Max, x.dtype(), plan, name);
  });
  const void* in_pointer = x.raw_data();
  void* values_pointer = c.outputs[0].raw_data();
  void* indices_pointer = c.outputs[1].raw_data();
  long long outputs = plan.outputs, reduced = plan.reduced;
  ReduceKernelDims dims = reduce_kernel_dims(plan);
  void* params[] = {&in_pointer, &values_pointer, &indices_pointer, &outputs, &reduced, &dims};
  launch_over_rows(kernel, plan.outputs, plan.reduced, params);
}

}  // namespace

void register_reduction_kernels() {
  auto set = [](OpDef& op, KernelFn kernel) {
    op.kernels[static_cast<size_t>(DeviceType::CUDA)] = kernel;
  };
  set(ops::sum, reduction_kernel<ReductionKind::Sum>);
  set(ops::prod, reduction_kernel<ReductionKind::Prod>);
  set(ops::amax, reduction_kernel<ReductionKind::Max>);
  set(ops::amin, reduction_kernel<ReductionKind::Min>);
  set(ops::all, reduction_kernel<ReductionKind::All>);
  set(ops::any, reduction_kernel<ReductionKind::Any>);
  set(ops::max_dim, arg_reduction_kernel<true>);
  set(ops::min_dim, arg_reduction_kernel<false>);
}

}  // namespace kiln::cuda
