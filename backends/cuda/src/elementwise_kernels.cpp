// The eager elementwise kernel of every op with a scalar body on CUDA tensors
// (kiln/cuda/elementwise_kernels.h): plan the reads, find the op's kernel for that plan (made
// by NVRTC at its first use, once per GPU), launch it on the thread's current stream.
#include "kiln/cuda/elementwise_kernels.h"

#include <cstring>
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

// Computes into `out`, a tensor or a view.
void run_elementwise(const OpDef& op, TensorSpan inputs, const Attrs& attrs, const Tensor& out) {
  ElementwisePlan plan = plan_elementwise(inputs, out.sizes(), out.strides());
  if (plan.numel == 0) return;
  read_host_scalars_by_value(plan, inputs, out.device());
  for (const Tensor& t : inputs) plan.output_aliases_input |= t.shares_storage(out);
  std::vector<DType> dtypes;
  for (const Tensor& t : inputs) dtypes.push_back(t.dtype());
  const int device = out.device().index;
  const std::string key = elementwise_kernel_key(op, attrs, dtypes, out.dtype(), plan);
  const GeneratedKernel& kernel = generated_kernel(device, key, op.name, [&](const std::string& name) {
    return elementwise_kernel_source(op, attrs, dtypes, out.dtype(), plan, name);
  });

  // Each input's parameter: its pointer, or a host scalar's bytes (the kernel's parameter is
  // its storage type, at most 8 bytes, which the driver reads from the start of the slot).
  std::vector<const void*> pointers;
  std::vector<uint64_t> values(inputs.size(), 0);
  std::vector<void*> params;
  pointers.reserve(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    pointers.push_back(inputs[k].raw_data());
    if (plan.access[k] == InputAccess::Value) {
      std::memcpy(&values[k], pointers[k], itemsize(inputs[k].dtype()));
      params.push_back(&values[k]);
    } else {
      params.push_back(&pointers[k]);
    }
  }
  void* out_pointer = out.raw_data();
  long long n = plan.numel;
  KernelDims dims = kernel_dims(plan);
  params.push_back(&out_pointer);
  params.push_back(&n);
  params.push_back(&dims);
  launch_over_elements(kernel, plan.numel, params.data());
}

void elementwise_kernel(KernelCall& c) {
  // An absent optional input (binary_cross_entropy_with_logits's pos_weight) is left out: the
  // scalar body is called without it.
  size_t defined = c.inputs.size();
  while (defined > 0 && !c.inputs[defined - 1].defined()) --defined;
  run_elementwise(c.op, c.inputs.subspan(0, defined), c.attrs, c.outputs[0]);
}

// full (zeros, ones, zeros_like, the seed of backward()).
void full_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::FullAttrs&>(c.attrs);
  fill_on_gpu(c.outputs[0], a.value);
}

// clone on the GPU: a copy by cast's kernel, from any strides into any strides (copy_ into a
// view); copies between devices go through the host.
void clone_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& out = c.outputs[0];
  if (x.device() != out.device()) {
    ops::copy_across_devices(c);
    return;
  }
  KILN_CHECK(x.dtype() == out.dtype(), "[clone] expected the copy's dtype ", out.dtype(),
             ", found ", x.dtype(), ". Fix: cast first (copy_ does).");
  copy_on_gpu(x, out);
}

}  // namespace

Tensor contiguous_on_gpu(const Tensor& x) {
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  copy_on_gpu(x, out);
  return out;
}

void copy_on_gpu(const Tensor& x, const Tensor& out) {
  ops::CastAttrs same;
  same.dtype = out.dtype();
  run_elementwise(ops::cast, std::span<const Tensor>(&x, 1), same, out);
}

// The value, a host scalar passed to cast's kernel as a parameter, broadcast into `out`.
void fill_on_gpu(const Tensor& out, double value) { copy_on_gpu(Tensor::scalar(value, out.dtype()), out); }

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
