// Shared infer checks of the neural-network ops.
#include "nn_infer.h"

#include "kiln/ops/infer_util.h"

namespace kiln::infer {

void check_optional_vector(const InferCall& c, size_t i, int64_t n, const char* what) {
  if (!has_input(c, i)) return;
  const Tensor& t = c.inputs[i];
  KILN_CHECK(t.dim() == 1 && t.size(0) == n, "[", c.op.name, "] expected ", what, " (",
             c.op.input_names[i], ") of shape [", n, "], got ", t.type_str(),
             ". Fix: pass a 1-D tensor with ", n, " elements, one per ", what, " entry, or none.");
  KILN_CHECK(t.dtype() == c.inputs[0].dtype(), "[", c.op.name, "] expected ", c.op.input_names[i],
             " of dtype ", c.inputs[0].dtype(), " (the input's), got ", t.dtype(),
             ". Fix: convert it with .to(", c.inputs[0].dtype(), ").");
}

void check_index_tensor(const InferCall& c, size_t i) {
  KILN_CHECK(has_input(c, i), "[", c.op.name, "] input ", i, " (", c.op.input_names[i],
             ") is undefined.");
  DType t = c.inputs[i].dtype();
  KILN_CHECK(
      t == DType::Int64 || t == DType::Int32, "[", c.op.name, "] expected integer indices for ",
      c.op.input_names[i], " (int64), got ", c.inputs[i].type_str(),
      ". Fix: convert with .to(kiln::kInt64); class indices are integers, not probabilities.");
}

void check_reduction(const InferCall& c, const std::string& reduction) {
  KILN_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", "[", c.op.name,
             "] expected reduction \"mean\", \"sum\" or \"none\", got \"", reduction, "\".");
}

void check_pair(const InferCall& c, IntList v, const char* name, int64_t min) {
  KILN_CHECK(v.size() == 2, "[", c.op.name, "] expected ", name,
             " with 2 entries (height, width), got ", shape_str(v),
             ". Fix: pass one value or two.");
  for (int64_t x : v)
    KILN_CHECK(x >= min, "[", c.op.name, "] expected every ", name, " entry >= ", min, ", got ",
               shape_str(v), ".");
}

void check_image(const InferCall& c, bool allow_unbatched) {
  KILN_CHECK(has_input(c, 0), "[", c.op.name, "] the input is undefined.");
  check_floating(c, 0);
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.dim() == 4 || (allow_unbatched && x.dim() == 3), "[", c.op.name,
             "] expected a 4-D input [N, C, H, W]", allow_unbatched ? " (or 3-D [C, H, W])" : "",
             ", got ", x.type_str(),
             ". Fix: add a batch dim with unsqueeze(0), or reshape to [N, C, H, W].");
}

}  // namespace kiln::infer
