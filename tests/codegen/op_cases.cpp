// See op_cases.h.
#include "codegen/op_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "kiln/cpu/exec/kernel_spec.h"
#include "kiln/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused.h"

namespace kiln::cpu::codegen::testing {

using ir::Graph;
using ir::InputKind;
using ir::Value;

Case parse_case(std::string_view text) {
  Case c;
  c.graph = ir::parse_graph(text);
  ir::verify(*c.graph);
  for (const auto& node : c.graph->nodes())
    if (node->op == &ops::fused) c.fused = node.get();
  EXPECT_NE(c.fused, nullptr) << text;
  return c;
}

std::vector<int64_t> runtime_dims(const ir::Node& fused, IntList iteration) {
  std::vector<int64_t> dims;
  for (const std::vector<int>& group : cpu::exec::fused_dim_groups(fused)) {
    int64_t size = 1;
    for (int d : group) size *= iteration[static_cast<size_t>(d)];
    dims.push_back(size);
  }
  return dims;
}

ir::Type type(DType dtype, Shape shape) {
  return ir::Type{dtype, std::move(shape), Device()};
}

Case build_case(const std::vector<ir::Type>& in_types, const std::vector<ir::Type>& out_types,
                const std::function<std::vector<Value*>(Graph&, std::vector<Value*>)>& body) {
  Case c;
  c.graph = std::make_shared<Graph>("test");
  std::vector<Value*> args;
  for (size_t i = 0; i < in_types.size(); ++i)
    args.push_back(c.graph->add_input(InputKind::Input, "in" + std::to_string(i), in_types[i]));
  ir::Node* node = c.graph->add_node(ops::fused, ops::FusedAttrs{}, args, out_types);
  Graph* region = c.graph->add_region(node);
  std::vector<Value*> region_args;
  for (const ir::Type& t : in_types)
    region_args.push_back(region->add_input(InputKind::Input, "", t));
  for (Value* out : body(*region, region_args)) region->add_output(out);
  for (Value* out : node->outputs) c.graph->add_output(out);
  c.fused = node;
  return c;
}

Tensor make_tensor(DType dtype, IntList sizes, const std::vector<double>& values) {
  Tensor t = Tensor::empty(sizes, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) {
      T* p = static_cast<T*>(t.raw_data());
      for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
    }
  });
  return t;
}

std::vector<double> value_grid(DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  if (t == DType::Bool) return {0, 1};
  if (t == DType::Int32)
    return {-2147483648.0, -1000, -7, -3, -2, -1, 0, 1, 2, 3, 5, 64, 2147483647.0};
  if (t == DType::Int64) {
    const double big = std::ldexp(1.0, 62);
    return {-2 * big, -big, -1000, -7, -3, -1, 0, 1, 2, 3, 64, 1000, big};
  }
  return {-inf, -100, -10.5, -3,  -2.5, -1, -0.75, -0.5, -1e-6, -0.0, 0.0, 1e-6,
          0.25, 0.5,  1,     1.5, 2.5,  3,  7,     30,   88.5,  100,  inf, std::nan("")};
}
const std::vector<double> kUnitGrid = {0, 1e-6, 0.1, 0.25, 0.5, 0.75, 0.9, 1};

// The attribute variants each op is tested with: its defaults, unless listed here.
std::vector<std::unique_ptr<Attrs>> attr_variants(const OpDef& op) {
  std::vector<std::unique_ptr<Attrs>> out;
  if (&op == &ops::clamp) {
    for (auto [lo, hi] : {std::pair<double, double>{-1, 2}, {0.5, NAN}, {NAN, -0.5}}) {
      ops::ClampAttrs a;
      if (!std::isnan(lo)) a.min = lo;
      if (!std::isnan(hi)) a.max = hi;
      out.push_back(a.clone());
    }
  } else if (&op == &ops::gelu) {
    for (bool t : {false, true}) {
      ops::GeluAttrs a;
      a.tanh_approximation = t;
      out.push_back(a.clone());
    }
  } else if (&op == &ops::pow_scalar) {
    for (double e : {3.0, 2.0, 0.5, -1.5}) {
      ops::PowScalarAttrs a;
      a.exponent = e;
      out.push_back(a.clone());
    }
  } else if (&op == &ops::cast) {
    for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool}) {
      ops::CastAttrs a;
      a.dtype = t;
      out.push_back(a.clone());
    }
  } else {
    out.push_back(op.attrs_prototype->clone());
  }
  return out;
}

// Ops whose eager kernels use other math (Eigen's vectorized exp, tanh, ...) than the fused
// kernel say so in the table (Numerics::Approximate): compared within a tolerance, everything
// else bit for bit. Eager sqrt (Eigen's, on dense tensors) is not IEEE: some results are an
// ulp off, sqrt(-0) is +0 and sqrt(+inf) is NaN, where the fused llvm.sqrt is exact; +inf is
// left out of its grid.
bool approximate(const OpDef& op) { return op.numerics == Numerics::Approximate; }

// Unary ops on the grid; binary ones on a [G, 1] x [1, G] outer product (so every pair meets,
// through broadcasting), or elementwise pairs where the op wants equal shapes. `where` takes
// an alternating condition.
std::optional<OpCase> make_op_case(const OpDef& op, const Attrs& attrs, DType t, bool absent_last,
                                   const std::vector<double>& grid) {
  const auto g = static_cast<int64_t>(grid.size());
  std::vector<double> reversed(grid.rbegin(), grid.rend());
  std::vector<std::vector<Tensor>> candidates;
  const size_t arity = op.input_names.size();
  if (&op == &ops::where) {
    std::vector<double> cond(grid.size());
    for (size_t i = 0; i < cond.size(); ++i) cond[i] = i % 3 == 1;
    candidates.push_back({make_tensor(DType::Bool, {g}, cond), make_tensor(t, {g}, grid),
                          make_tensor(t, {g}, reversed)});
  } else if (arity == 1) {
    std::vector<double> values = grid;
    const auto* cast = dynamic_cast<const ops::CastAttrs*>(&attrs);
    if (cast && is_floating(t) && is_integral(cast->dtype))  // undefined outside the range
      std::erase_if(values, [](double v) { return !std::isfinite(v) || std::abs(v) > 1e9; });
    if (&op == &ops::sqrt)  // see approximate()
      std::erase_if(values, [](double v) { return std::isinf(v) && v > 0; });
    candidates.push_back({make_tensor(t, {static_cast<int64_t>(values.size())}, values)});
  } else {
    candidates.push_back({make_tensor(t, {g, 1}, grid), make_tensor(t, {1, g}, grid)});
    std::vector<Tensor> same = {make_tensor(t, {g}, grid), make_tensor(t, {g}, reversed)};
    if (arity == 3) same.push_back(absent_last ? Tensor() : make_tensor(t, {g}, grid));
    candidates.push_back(same);
  }
  for (std::vector<Tensor>& inputs : candidates) {
    Tensor want;
    try {  // dtypes and shapes the op rejects, and values outside its domain, are skipped
      want = dispatch(op, inputs, attrs)[0];
    } catch (const Error&) {
      continue;
    }
    std::vector<ir::Type> in_types;
    std::vector<Tensor> present;
    for (const Tensor& x : inputs)
      if (x.defined()) {
        in_types.push_back(ir::Type::of(x));
        present.push_back(x);
      }
    ir::Type out_type = ir::Type::of(want);
    const size_t n_inputs = inputs.size();
    Case c = build_case(in_types, {out_type}, [&](Graph& r, std::vector<Value*> a) {
      std::vector<Value*> args = a;
      if (args.size() < n_inputs) args.push_back(nullptr);
      return std::vector<Value*>{r.add_node(op, attrs, args, {out_type})->outputs[0]};
    });
    OpCase out{op.name + "(" + std::string(dtype_name(t)) + ") " + attrs.str() +
                   (absent_last ? " absent last operand" : ""),
               std::move(c),
               std::move(present),
               want,
               {}};
    if (approximate(op))
      out.tol = t == DType::Float64 ? Tolerance{1e-13, 1e-300} : Tolerance{1e-5, 1e-6};
    return out;
  }
  return std::nullopt;
}

ElementwiseOpCases every_elementwise_op_case() {
  ElementwiseOpCases out;
  std::vector<OpCase>& cases = out.cases;
  for (const OpDef* op : all_ops()) {
    if (op->lowering != LoweringClass::Elementwise) continue;
    if (!op->scalar_body) {
      out.without_body += " " + op->name;
      continue;
    }
    for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool}) {
      for (const std::unique_ptr<Attrs>& attrs : attr_variants(*op)) {
        for (bool absent_last : {false, true}) {
          if (absent_last && op->input_names.size() != 3) continue;
          if (absent_last && op == &ops::where) continue;
          std::optional<OpCase> c = make_op_case(*op, *attrs, t, absent_last, value_grid(t));
          if (!c && is_floating(t)) c = make_op_case(*op, *attrs, t, absent_last, kUnitGrid);
          if (!c) continue;
          out.covered.insert(op->name);
          cases.push_back(std::move(*c));
        }
      }
    }
  }
  return out;
}

}  // namespace kiln::cpu::codegen::testing
