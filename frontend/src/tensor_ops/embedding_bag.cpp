// embedding_bag as a composite: a membership matrix M [bags, L] (which positions belong to
// which bag, padding entries left out) turns the sum into one matmul, M @ rows (weighted by
// per_sample_weights), the mean into that sum over M's row counts, and the max into a masked
// amax. No offset is read on the host, so a bag layout compiles into one graph.
#include <limits>

#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/linalg.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"

namespace kiln::nn::functional {

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets,
                     const std::string& mode, const Tensor& per_sample_weights,
                     bool include_last_offset, std::optional<int64_t> padding_idx) {
  KILN_CHECK(mode == "sum" || mode == "mean" || mode == "max",
             "[embedding_bag] expected mode \"sum\", \"mean\" or \"max\", got \"", mode,
             "\". Fix: pass one of them.");
  KILN_CHECK(input.defined() && (input.dtype() == kInt64 || input.dtype() == kInt32) &&
                 (input.dim() == 1 || input.dim() == 2),
             "[embedding_bag] expected integer indices [B, L] or [L] (with offsets), got ",
             input.defined() ? input.type_str() : "undefined", ".");
  KILN_CHECK(weight.defined() && weight.dim() == 2, "[embedding_bag] expected a 2-D weight, got ",
             weight.defined() ? weight.type_str() : "undefined", ".");
  KILN_CHECK(!per_sample_weights.defined() || mode == "sum",
             "[embedding_bag] per_sample_weights needs mode \"sum\", got \"", mode,
             "\". Fix: use mode=\"sum\" (as PyTorch), or weight the rows yourself.");
  KILN_CHECK(!per_sample_weights.defined() ||
                 Shape(per_sample_weights.sizes()) == Shape(input.sizes()),
             "[embedding_bag] expected per_sample_weights of the input's shape ",
             shape_str(input.sizes()), ", got ", per_sample_weights.type_str(), ".");
  const double lowest = -std::numeric_limits<double>::infinity();
  if (input.dim() == 2) {
    // One bag per row: reduce the looked-up rows [B, L, D] over L.
    KILN_CHECK(!offsets.defined(), "[embedding_bag] takes offsets only with a 1-D input, got "
               "input ", input.type_str(), " and offsets ", offsets.type_str(),
               ". Fix: drop the offsets (each row of a 2-D input is a bag).");
    Tensor rows = embedding(input.to(kInt64), weight);
    Tensor member = padding_idx ? input != *padding_idx : ones_like(input).to(kBool);  // [B, L]
    if (mode == "max")
      return where(member.any({1}).unsqueeze(-1),
                   amax(where(member.unsqueeze(-1), rows, lowest), {1}), 0.0);
    Tensor m = member.to(weight.dtype());
    if (per_sample_weights.defined()) m = m * per_sample_weights.to(weight.dtype());
    Tensor sum = (rows * m.unsqueeze(-1)).sum({1});
    if (mode == "sum") return sum;
    return sum / clamp(member.to(weight.dtype()).sum({1}, true), 1.0, std::nullopt);
  }
  KILN_CHECK(offsets.defined() && offsets.dim() == 1 &&
                 (offsets.dtype() == kInt64 || offsets.dtype() == kInt32),
             "[embedding_bag] a 1-D input needs integer offsets [B] (where each bag starts), "
             "got ", offsets.defined() ? offsets.type_str() : "none",
             ". Fix: pass offsets, or a 2-D input with one bag per row.");
  const int64_t length = input.size(0);
  Tensor starts = offsets.to(kInt64).to(input.device()), ends;
  if (include_last_offset) {
    KILN_CHECK(starts.size(0) >= 1, "[embedding_bag] include_last_offset needs at least one "
               "offset (the end of the last bag). Fix: pass the bags' starts and the end.");
    ends = starts.slice(0, 1, starts.size(0));
    starts = starts.slice(0, 0, starts.size(0) - 1);
  } else {
    ends = cat({starts.slice(0, 1, starts.size(0)),
                full({1}, length, TensorOptions(kInt64).with_device(input.device()))},
               0);
  }
  // member[b, j]: position j lies in bag b, [starts[b], ends[b]).
  Tensor position = arange(0, length, 1, TensorOptions(kInt64).with_device(input.device())).unsqueeze(0);
  Tensor member = logical_and(position >= starts.unsqueeze(1), position < ends.unsqueeze(1));
  if (padding_idx) member = logical_and(member, (input != *padding_idx).unsqueeze(0));
  Tensor rows = embedding(input.to(kInt64), weight);  // [L, D]
  if (mode == "max")
    return where(member.any({1}).unsqueeze(-1),
                 amax(where(member.unsqueeze(-1), rows.unsqueeze(0), lowest), {1}), 0.0);
  Tensor m = member.to(weight.dtype());
  if (per_sample_weights.defined()) m = m * per_sample_weights.to(weight.dtype()).unsqueeze(0);
  Tensor sum = matmul(m, rows);
  if (mode == "sum") return sum;
  return sum / clamp(member.to(weight.dtype()).sum({1}, true), 1.0, std::nullopt);
}

}  // namespace kiln::nn::functional
