// The eager elementwise kernel of every op with a scalar body on CUDA tensors
// (kiln/cuda/elementwise_kernels.h): plan the reads, find the op's kernel for that plan (made
// by NVRTC at its first use, once per GPU), launch it on the thread's current stream.
#include "kiln/cuda/elementwise_kernels.h"

#include <vector>

#include "kernel_cache.h"
#include "kiln/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/to_device.h"
#include "kiln/ops/view.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

// Computes into the contiguous `out`.
void run_elementwise(const OpDef& op, TensorSpan inputs, const Attrs& attrs, const Tensor& out) {
  ElementwisePlan plan = plan_elementwise(inputs, out.sizes());
  if (plan.numel == 0) return;
  for (const Tensor& t : inputs) plan.output_aliases_input |= t.shares_storage(out);
  std::vector<DType> dtypes;
  for (const Tensor& t : inputs) dtypes.push_back(t.dtype());
  const int device = out.device().index;
  const std::string key = elementwise_kernel_key(op, attrs, dtypes, out.dtype(), plan);
  const GeneratedKernel& kernel = generated_kernel(device, key, op.name, [&](const std::string& name) {
    return elementwise_kernel_source(op, attrs, dtypes, out.dtype(), plan, name);
  });

  std::vector<const void*> pointers;
  for (const Tensor& t : inputs) pointers.push_back(t.raw_data());
  void* out_pointer = out.raw_data();
  long long n = plan.numel;
  KernelDims dims = kernel_dims(plan);
  std::vector<void*> params;
  for (const void*& p : pointers) params.push_back(&p);
  params.push_back(&out_pointer);
  params.push_back(&n);
  params.push_back(&dims);
  launch_over_elements(kernel, plan.numel, params.data());
}

void elementwise_kernel(KernelCall& c) {
  Tensor& out = c.outputs[0];
  if (out.is_contiguous()) {
    run_elementwise(c.op, c.inputs, c.attrs, out);
    return;
  }
  // An in-place op on a strided view: computed densely, then copied into the view.
  Tensor dense = Tensor::empty(out.sizes(), out.dtype(), out.device());
  run_elementwise(c.op, c.inputs, c.attrs, dense);
  Tensor copy_out[] = {out};
  const TensorTypes types = {{out.dtype(), Shape(out.sizes()), out.device()}};
  KernelCall copy{ops::clone, std::span<const Tensor>(&dense, 1), no_attrs(), copy_out, types};
  ops::copy_across_devices(copy);
}

// full (zeros, ones, zeros_like, the seed of backward()).
void full_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::FullAttrs&>(c.attrs);
  fill_on_gpu(c.outputs[0], a.value);
}

// clone on the GPU: a copy by cast's kernel (any strides in, contiguous out); a strided
// destination (copy_ into a view) is written through the host until kernels write views.
void clone_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& out = c.outputs[0];
  if (x.device() != out.device() || !out.is_contiguous()) {
    ops::copy_across_devices(c);
    return;
  }
  ops::CastAttrs same;
  same.dtype = out.dtype();
  KILN_CHECK(x.dtype() == out.dtype(), "[clone] expected the copy's dtype ", out.dtype(),
             ", found ", x.dtype(), ". Fix: cast first (copy_ does).");
  run_elementwise(ops::cast, c.inputs, same, out);
}

}  // namespace

Tensor contiguous_on_gpu(const Tensor& x) {
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  ops::CastAttrs same;
  same.dtype = x.dtype();
  run_elementwise(ops::cast, std::span<const Tensor>(&x, 1), same, out);
  return out;
}

// The value, as one element on the GPU, broadcast into `out` by cast's kernel (its plan reads
// the one element for every output element).
void fill_on_gpu(const Tensor& out, double value) {
  const Tensor one = Tensor::scalar(value, out.dtype(), out.device());
  ops::CastAttrs same;
  same.dtype = out.dtype();
  run_elementwise(ops::cast, std::span<const Tensor>(&one, 1), same, out);
}

void register_elementwise_kernels() {
  ops::full.kernels[static_cast<size_t>(DeviceType::CUDA)] = full_kernel;
  ops::clone.kernels[static_cast<size_t>(DeviceType::CUDA)] = clone_kernel;
  for (OpDef* op : all_ops()) {
    if (op->lowering != LoweringClass::Elementwise || !op->scalar_body) continue;
    KernelFn& slot = op->kernels[static_cast<size_t>(DeviceType::CUDA)];
    if (!slot) slot = elementwise_kernel;
  }
}

}  // namespace kiln::cuda
