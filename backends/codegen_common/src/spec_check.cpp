// Spec checks: everything the emitters rely on in a cpu::exec::FusedKernelSpec (its region,
// dims, broadcast flags, dtypes, scalar bodies, row reductions). See spec_check.h.
#include "kiln/codegen_common/spec_check.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/reduction.h"

namespace kiln::codegen_common {

bool supported_dtype(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Int32 || t == DType::Int64 ||
         t == DType::Bool;
}

std::string node_str(const ir::Node& n) {
  std::string out = n.op ? n.op->name : "<no op>";
  for (size_t i = 0; i < n.outputs.size(); ++i)
    out += (i == 0 ? " %" : ", %") + std::to_string(n.outputs[i]->id);
  return out;
}

std::optional<ScalarOp> row_reduction_kind(const ir::Node& n) {
  if (n.op == &ops::sum) return ScalarOp::Add;
  if (n.op == &ops::amax) return ScalarOp::Max;
  if (n.op == &ops::amin) return ScalarOp::Min;
  return std::nullopt;
}

void check_spec(const cpu::exec::FusedKernelSpec& spec, std::string_view generator) {
  const std::string where = "[" + std::string(generator) + "] kernel '" + spec.name + "'";
  KILN_CHECK(
      spec.region != nullptr, where,
      ": expected a fusion region, found none. Fix: build the spec with exec::fused_kernel_spec() "
      "from a fused node.");
  const ir::Graph& region = *spec.region;
  KILN_CHECK(!spec.dims.empty() && spec.broadcast.size() == region.inputs().size(), where,
             ": expected iteration dims and one broadcast row per region input (",
             region.inputs().size(), "), found ", spec.dims.size(), " dims and ",
             spec.broadcast.size(), " rows. Fix: build the spec with exec::fused_kernel_spec().");
  for (const std::vector<bool>& row : spec.broadcast)
    KILN_CHECK(row.size() == spec.dims.size(), where, ": expected ", spec.dims.size(),
               " broadcast flags per input (one per iteration dim), found ", row.size(),
               ". Fix: build the spec with exec::fused_kernel_spec().");
  KILN_CHECK(!region.outputs().empty(), where,
             ": expected the region to have outputs, found none. Fix: the fusion pass must not "
             "create a group without results.");
  auto check_dtype = [&](const ir::Value* v, const std::string& what) {
    KILN_CHECK(supported_dtype(v->type.dtype), where, ": ", what, " has dtype ", v->type.dtype,
               "; expected float32, float64, int32, int64 or bool. Fix: leave it out of the "
               "fusion group (or cast to float32 before it).");
  };
  for (size_t i = 0; i < region.inputs().size(); ++i)
    check_dtype(region.inputs()[i].value, "region input " + std::to_string(i));
  KILN_CHECK(spec.output_per_row.size() == region.outputs().size() &&
                 (spec.rows || std::none_of(spec.output_per_row.begin(), spec.output_per_row.end(),
                                            [](bool b) { return b; })),
             where, ": expected one per-row flag per region output (", region.outputs().size(),
             "), set only in a row kernel, found ", spec.output_per_row.size(),
             " flags. Fix: build the spec with exec::fused_kernel_spec().");
  KILN_CHECK(!spec.rows || spec.dims.size() >= 2, where,
             ": expected a row kernel to have a dim of rows and the reduced dim, found ",
             spec.dims.size(),
             " iteration dims. Fix: build the spec with exec::fused_kernel_spec().");
  for (const auto& node : region.nodes()) {
    if (spec.rows && row_reduction_kind(*node)) {
      KILN_CHECK(is_floating(node->outputs[0]->type.dtype), where, ": expected the row reduction ",
                 node_str(*node), " to be over float32 or float64, found ",
                 node->outputs[0]->type.dtype, ". Fix: leave it out of the fusion group.");
      continue;
    }
    KILN_CHECK(node->op->scalar_body != nullptr, where, ": op ", node_str(*node),
               " has no scalar body (lowering class ", lowering_class_name(node->op->lowering),
               "). Fix: leave it out of the fusion group; only elementwise ops with a "
               "scalar_body fuse.");
    KILN_CHECK(node->outputs.size() == 1, where, ": expected op ", node_str(*node),
               " to have one output, found ", node->outputs.size(),
               ". Fix: leave it out of the fusion group.");
    for (const ir::Value* in : node->inputs)
      if (in) check_dtype(in, "an operand of op " + node_str(*node));
    check_dtype(node->outputs[0], "op " + node_str(*node));
  }
}

}  // namespace kiln::codegen_common
