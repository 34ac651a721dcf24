// Definitions of the elementwise ops.
#include "kiln/ops/elementwise.h"

#include "kiln/ops/infer_util.h"
#include "scalar_bodies.h"

namespace kiln::ops {

namespace {

constexpr auto E = LoweringClass::Elementwise;
constexpr auto kApproximate = Numerics::Approximate;
namespace body = scalar_bodies;

void floating_unary(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_floating(c, 0);
  infer::same_as_input(c);
}

void numeric_unary(InferCall& c) {  // any compute dtype except bool
  infer::same_as_input(c);
  KILN_CHECK(c.inputs[0].dtype() != DType::Bool, "[", c.op.name,
             "] does not accept bool tensors. Fix: convert with .to(kiln::kInt64) or .to(kiln::kFloat32).");
}

void numeric_binary(InferCall& c) {
  infer::broadcast_same_dtype(c);
  KILN_CHECK(c.inputs[0].dtype() != DType::Bool, "[", c.op.name,
             "] does not accept bool tensors. Fix: use logical_and/logical_or, or convert with .to().");
}

void floating_binary(InferCall& c) {
  infer::broadcast_same_dtype(c);
  infer::check_floating(c, 0);
}

void bool_unary(InferCall& c) {
  infer::check_arity(c, 1);
  const Tensor& x = c.inputs[0];
  infer::check_compute_dtype(c, 0);
  c.outputs.push_back({DType::Bool, Shape(x.sizes()), x.device()});
}

void infer_cast(InferCall& c) {
  infer::check_arity(c, 1);
  const auto& a = static_cast<const CastAttrs&>(c.attrs);
  c.outputs.push_back({a.dtype, Shape(c.inputs[0].sizes()), c.inputs[0].device()});
}

void infer_clamp(InferCall& c) {
  numeric_unary(c);
  const auto& a = static_cast<const ClampAttrs&>(c.attrs);
  KILN_CHECK(a.min || a.max, "[clamp] expected at least one of min and max. Fix: pass a bound.");
}

void infer_where(InferCall& c) {
  infer::check_arity(c, 3);
  KILN_CHECK(c.inputs[0].dtype() == DType::Bool, "[where] expected a bool condition, got ",
             c.inputs[0].dtype(), ". Fix: compare first (x > 0) or convert with .to(kiln::kBool).");
  infer::check_compute_dtype(c, 1);
  KILN_CHECK(c.inputs[1].dtype() == c.inputs[2].dtype(), "[where] expected both branches of one dtype, got ",
             c.inputs[1].dtype(), " and ", c.inputs[2].dtype(), ". Fix: use kiln::where (it promotes).");
  Shape s = broadcast_shapes(c.inputs[0].sizes(), c.inputs[1].sizes(), "where");
  s = broadcast_shapes(s, c.inputs[2].sizes(), "where");
  c.outputs.push_back({c.inputs[1].dtype(), s, infer::elementwise_device(c)});
}

}  // namespace

// Each op's scalar body (scalar_bodies.cpp) is what fused kernels compute per element;
// kApproximate marks the ops whose eager kernels use other math (Eigen's vectorized exp,
// tanh, ...), so a fused kernel matches them within a few ulp rather than bit for bit.
OpDef neg("neg", {"x"}, numeric_unary, E, {.scalar_body = body::neg});
OpDef abs("abs", {"x"}, numeric_unary, E, {.scalar_body = body::abs});
OpDef exp("exp", {"x"}, floating_unary, E, {.scalar_body = body::exp, .numerics = kApproximate});
OpDef log("log", {"x"}, floating_unary, E, {.scalar_body = body::log, .numerics = kApproximate});
OpDef log1p("log1p", {"x"}, floating_unary, E,
            {.scalar_body = body::log1p, .numerics = kApproximate});
OpDef sqrt("sqrt", {"x"}, floating_unary, E, {.scalar_body = body::sqrt, .numerics = kApproximate});
OpDef rsqrt("rsqrt", {"x"}, floating_unary, E,
            {.scalar_body = body::rsqrt, .numerics = kApproximate});
OpDef sin("sin", {"x"}, floating_unary, E, {.scalar_body = body::sin, .numerics = kApproximate});
OpDef cos("cos", {"x"}, floating_unary, E, {.scalar_body = body::cos, .numerics = kApproximate});
OpDef tanh("tanh", {"x"}, floating_unary, E, {.scalar_body = body::tanh, .numerics = kApproximate});
OpDef sigmoid("sigmoid", {"x"}, floating_unary, E,
              {.scalar_body = body::sigmoid, .numerics = kApproximate});
OpDef relu("relu", {"x"}, numeric_unary, E, {.scalar_body = body::relu});
OpDef silu("silu", {"x"}, floating_unary, E, {.scalar_body = body::silu, .numerics = kApproximate});
OpDef erf("erf", {"x"}, floating_unary, E, {.scalar_body = body::erf, .numerics = kApproximate});
OpDef erfinv("erfinv", {"x"}, floating_unary, E,
             {.scalar_body = body::erfinv, .numerics = kApproximate});
OpDef square("square", {"x"}, numeric_unary, E, {.scalar_body = body::square});
OpDef reciprocal("reciprocal", {"x"}, floating_unary, E, {.scalar_body = body::reciprocal});
OpDef sign("sign", {"x"}, numeric_unary, E, {.scalar_body = body::sign});
OpDef floor("floor", {"x"}, numeric_unary, E, {.scalar_body = body::floor});
OpDef ceil("ceil", {"x"}, numeric_unary, E, {.scalar_body = body::ceil});
OpDef round("round", {"x"}, numeric_unary, E, {.scalar_body = body::round});
OpDef gelu("gelu", {"x"}, floating_unary, E, attrs_of<GeluAttrs>(),
           {.scalar_body = body::gelu, .numerics = kApproximate});
OpDef leaky_relu("leaky_relu", {"x"}, floating_unary, E, attrs_of<LeakyReluAttrs>(),
                 {.scalar_body = body::leaky_relu});
OpDef elu("elu", {"x"}, floating_unary, E, attrs_of<EluAttrs>(),
          {.scalar_body = body::elu, .numerics = kApproximate});
OpDef clamp("clamp", {"x"}, infer_clamp, E, attrs_of<ClampAttrs>(), {.scalar_body = body::clamp});
OpDef pow_scalar("pow_scalar", {"x"}, floating_unary, E, attrs_of<PowScalarAttrs>(),
                 {.scalar_body = body::pow_scalar, .numerics = kApproximate});
OpDef cast("cast", {"x"}, infer_cast, E, attrs_of<CastAttrs>(), {.scalar_body = body::cast});

OpDef add("add", {"a", "b"}, infer::broadcast_same_dtype, E, {.scalar_body = body::add});
OpDef sub("sub", {"a", "b"}, numeric_binary, E, {.scalar_body = body::sub});
OpDef mul("mul", {"a", "b"}, infer::broadcast_same_dtype, E, {.scalar_body = body::mul});
OpDef div("div", {"a", "b"}, floating_binary, E, {.scalar_body = body::div});
OpDef pow("pow", {"a", "b"}, floating_binary, E,
          {.scalar_body = body::pow, .numerics = kApproximate});
OpDef atan2("atan2", {"a", "b"}, floating_binary, E,
            {.scalar_body = body::atan2, .numerics = kApproximate});
OpDef maximum("maximum", {"a", "b"}, infer::broadcast_same_dtype, E,
              {.scalar_body = body::maximum});
OpDef minimum("minimum", {"a", "b"}, infer::broadcast_same_dtype, E,
              {.scalar_body = body::minimum});

OpDef eq("eq", {"a", "b"}, infer::broadcast_to_bool, E,
         {.scalar_body = body::eq, .differentiable = false});
OpDef ne("ne", {"a", "b"}, infer::broadcast_to_bool, E,
         {.scalar_body = body::ne, .differentiable = false});
OpDef lt("lt", {"a", "b"}, infer::broadcast_to_bool, E,
         {.scalar_body = body::lt, .differentiable = false});
OpDef le("le", {"a", "b"}, infer::broadcast_to_bool, E,
         {.scalar_body = body::le, .differentiable = false});
OpDef gt("gt", {"a", "b"}, infer::broadcast_to_bool, E,
         {.scalar_body = body::gt, .differentiable = false});
OpDef ge("ge", {"a", "b"}, infer::broadcast_to_bool, E,
         {.scalar_body = body::ge, .differentiable = false});
OpDef logical_and("logical_and", {"a", "b"}, infer::broadcast_to_bool, E,
                  {.scalar_body = body::logical_and, .differentiable = false});
OpDef logical_or("logical_or", {"a", "b"}, infer::broadcast_to_bool, E,
                 {.scalar_body = body::logical_or, .differentiable = false});
OpDef logical_not("logical_not", {"x"}, bool_unary, E,
                  {.scalar_body = body::logical_not, .differentiable = false});
OpDef where("where", {"cond", "a", "b"}, infer_where, E,
            {.scalar_body = body::where, .nondiff_inputs = 1 /* the condition */});

}  // namespace kiln::ops
