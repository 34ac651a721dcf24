// Fusion groups the code generator tests build, shared by the CPU kernels' tests
// (kernels_test.cpp) and the GPU code generator's (ptx_test.cpp): a group from IR text or from a
// body, and one group per elementwise op, dtype and attribute variant with the eager kernel's
// result on grid operands that probe each dtype's corners.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/attrs.h"
#include "kiln/ir/graph.h"
#include "kiln/op.h"
#include "kiln/tensor.h"

namespace kiln::cpu::codegen::testing {

// A graph whose one `fused` node the tests compile; its outputs are the graph's outputs.
struct Case {
  std::shared_ptr<ir::Graph> graph;
  const ir::Node* fused = nullptr;
};

Case parse_case(std::string_view text);

ir::Type type(DType dtype, Shape shape);

// A fused node over inputs of `in_types` whose region `body` fills (it gets the region's
// inputs and returns its outputs). Not verified: the error tests build broken groups.
Case build_case(
    const std::vector<ir::Type>& in_types, const std::vector<ir::Type>& out_types,
    const std::function<std::vector<ir::Value*>(ir::Graph&, std::vector<ir::Value*>)>& body);

Tensor make_tensor(DType dtype, IntList sizes, const std::vector<double>& values);

// The run-time size of each iteration dim of `fused`'s kernel (exec::fused_dim_groups), for
// the concrete shape it iterates over (its output's, or a row group's reduced shape).
std::vector<int64_t> runtime_dims(const ir::Node& fused, IntList iteration);

// Bit-exact by default (NaNs of any payload match); otherwise |got - want| <= atol + rtol |want|
// with infinities exact.
struct Tolerance {
  double rtol = 0, atol = 0;
};

// Values that probe each dtype's corners (NaN, infinities, signed zeros, wrap-around).
std::vector<double> value_grid(DType t);
// For ops defined on [0, 1] only (binary_cross_entropy's input).
extern const std::vector<double> kUnitGrid;

// The attribute variants each op is tested with: its defaults, unless it has interesting ones.
std::vector<std::unique_ptr<Attrs>> attr_variants(const OpDef& op);

// Ops whose eager kernels use other math than the fused kernel (Numerics::Approximate).
bool approximate(const OpDef& op);

// One op on grid operands, with the eager kernel's result.
struct OpCase {
  std::string label;
  Case c;
  std::vector<Tensor> inputs;
  Tensor want;
  Tolerance tol;
};

// The case of `op` on dtype `t`, or nothing when the eager kernel rejects the dtype or shapes.
std::optional<OpCase> make_op_case(const OpDef& op, const Attrs& attrs, DType t, bool absent_last,
                                   const std::vector<double>& grid);

// Every elementwise op with a scalar body, on every dtype its eager kernel takes, with each of
// its attribute variants (and an absent optional last operand where it has one).
struct ElementwiseOpCases {
  std::vector<OpCase> cases;
  std::set<std::string> covered;  // the ops' names
  std::string without_body;       // " name name": elementwise ops without a scalar body
};
ElementwiseOpCases every_elementwise_op_case();

}  // namespace kiln::cpu::codegen::testing
