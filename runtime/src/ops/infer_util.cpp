// Shared infer helpers.
#include "kiln/ops/infer_util.h"

namespace kiln::infer {

void check_arity(const InferCall& c, size_t n) {
  KILN_CHECK(c.inputs.size() == n, "[", c.op.name, "] expected ", n, " inputs, got ", c.inputs.size(), ".");
  for (size_t i = 0; i < n; ++i)
    KILN_CHECK(c.inputs[i].defined(), "[", c.op.name, "] input ", i, " (", c.op.input_names[i],
               ") is an undefined tensor.");
}

void check_floating(const InferCall& c, size_t i) {
  DType t = c.inputs[i].dtype();
  KILN_CHECK(t == DType::Float32 || t == DType::Float64, "[", c.op.name, "] expected a float32 or float64 ",
             c.op.input_names[std::min(i, c.op.input_names.size() - 1)], ", got ", t,
             is_floating(t) ? " (a storage-only type)" : "", ". Fix: convert with .to(kiln::kFloat32).");
}

void check_compute_dtype(const InferCall& c, size_t i) {
  DType t = c.inputs[i].dtype();
  KILN_CHECK(is_compute_type(t), "[", c.op.name, "] ", t, " is a storage-only type; kiln computes in "
             "float32. Fix: convert with .to(kiln::kFloat32) first.");
}

bool is_host_scalar(const Tensor& t) {
  return t.dim() == 0 && t.device().type == DeviceType::CPU && !t.requires_grad();
}

Device elementwise_device(const InferCall& c) {
  for (const Tensor& t : c.inputs)
    if (t.defined() && !is_host_scalar(t)) return t.device();
  return c.inputs.empty() ? kCPU : c.inputs[0].device();
}

void check_same_dtype(const InferCall& c) {
  for (size_t i = 1; i < c.inputs.size(); ++i)
    KILN_CHECK(c.inputs[i].dtype() == c.inputs[0].dtype(), "[", c.op.name, "] expected inputs of one dtype, got ",
               c.inputs[0].dtype(), " and ", c.inputs[i].dtype(),
               ". Fix: use the kiln:: function (it promotes types) or convert with .to().");
}

void same_as_input(InferCall& c) {
  check_arity(c, 1);
  check_compute_dtype(c, 0);
  const Tensor& x = c.inputs[0];
  c.outputs.push_back({x.dtype(), Shape(x.sizes()), x.device()});
}

static Shape broadcast_all(const InferCall& c) {
  Shape shape(c.inputs[0].sizes());
  for (size_t i = 1; i < c.inputs.size(); ++i) shape = broadcast_shapes(shape, c.inputs[i].sizes(), c.op.name.c_str());
  return shape;
}

void broadcast_same_dtype(InferCall& c) {
  check_arity(c, c.op.input_names.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) check_compute_dtype(c, i);
  check_same_dtype(c);
  c.outputs.push_back({c.inputs[0].dtype(), broadcast_all(c), elementwise_device(c)});
}

void broadcast_to_bool(InferCall& c) {
  check_arity(c, c.op.input_names.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) check_compute_dtype(c, i);
  check_same_dtype(c);
  c.outputs.push_back({DType::Bool, broadcast_all(c), elementwise_device(c)});
}

}  // namespace kiln::infer
