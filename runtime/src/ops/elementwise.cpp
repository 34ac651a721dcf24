// Definitions of the elementwise ops.
#include "kiln/ops/elementwise.h"

#include "kiln/ops/infer_util.h"
#include "scalar_bodies.h"

namespace kiln::ops {

namespace {

constexpr auto E = LoweringClass::Elementwise;

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
  c.outputs.push_back({c.inputs[1].dtype(), s, c.inputs[1].device()});
}

}  // namespace

OpDef neg("neg", {"x"}, numeric_unary, E);
OpDef abs("abs", {"x"}, numeric_unary, E);
OpDef exp("exp", {"x"}, floating_unary, E);
OpDef log("log", {"x"}, floating_unary, E);
OpDef log1p("log1p", {"x"}, floating_unary, E);
OpDef sqrt("sqrt", {"x"}, floating_unary, E);
OpDef rsqrt("rsqrt", {"x"}, floating_unary, E);
OpDef sin("sin", {"x"}, floating_unary, E);
OpDef cos("cos", {"x"}, floating_unary, E);
OpDef tanh("tanh", {"x"}, floating_unary, E);
OpDef sigmoid("sigmoid", {"x"}, floating_unary, E);
OpDef relu("relu", {"x"}, numeric_unary, E);
OpDef silu("silu", {"x"}, floating_unary, E);
OpDef erf("erf", {"x"}, floating_unary, E);
OpDef square("square", {"x"}, numeric_unary, E);
OpDef reciprocal("reciprocal", {"x"}, floating_unary, E);
OpDef sign("sign", {"x"}, numeric_unary, E);
OpDef floor("floor", {"x"}, numeric_unary, E);
OpDef ceil("ceil", {"x"}, numeric_unary, E);
OpDef round("round", {"x"}, numeric_unary, E);
OpDef gelu("gelu", {"x"}, floating_unary, E, attrs_of<GeluAttrs>());
OpDef leaky_relu("leaky_relu", {"x"}, floating_unary, E, attrs_of<LeakyReluAttrs>());
OpDef elu("elu", {"x"}, floating_unary, E, attrs_of<EluAttrs>());
OpDef clamp("clamp", {"x"}, infer_clamp, E, attrs_of<ClampAttrs>());
OpDef pow_scalar("pow_scalar", {"x"}, floating_unary, E, attrs_of<PowScalarAttrs>());
OpDef cast("cast", {"x"}, infer_cast, E, attrs_of<CastAttrs>());

OpDef add("add", {"a", "b"}, infer::broadcast_same_dtype, E);
OpDef sub("sub", {"a", "b"}, numeric_binary, E);
OpDef mul("mul", {"a", "b"}, infer::broadcast_same_dtype, E);
OpDef div("div", {"a", "b"}, floating_binary, E);
OpDef pow("pow", {"a", "b"}, floating_binary, E);
OpDef maximum("maximum", {"a", "b"}, infer::broadcast_same_dtype, E);
OpDef minimum("minimum", {"a", "b"}, infer::broadcast_same_dtype, E);

OpDef eq("eq", {"a", "b"}, infer::broadcast_to_bool, E);
OpDef ne("ne", {"a", "b"}, infer::broadcast_to_bool, E);
OpDef lt("lt", {"a", "b"}, infer::broadcast_to_bool, E);
OpDef le("le", {"a", "b"}, infer::broadcast_to_bool, E);
OpDef gt("gt", {"a", "b"}, infer::broadcast_to_bool, E);
OpDef ge("ge", {"a", "b"}, infer::broadcast_to_bool, E);
OpDef logical_and("logical_and", {"a", "b"}, infer::broadcast_to_bool, E);
OpDef logical_or("logical_or", {"a", "b"}, infer::broadcast_to_bool, E);
OpDef logical_not("logical_not", {"x"}, bool_unary, E);
OpDef where("where", {"cond", "a", "b"}, infer_where, E);

namespace {
// Properties that differ from the defaults, set once at static-init time.
struct Properties {
  Properties() {
    for (OpDef* op : {&eq, &ne, &lt, &le, &gt, &ge, &logical_and, &logical_or, &logical_not})
      op->differentiable = false;
    // What each vjp reads (the default saves every input).
    for (OpDef* op : {&neg, &add, &sub, &sign, &floor, &ceil, &round}) op->saves_inputs = 0;
    for (OpDef* op : {&exp, &tanh, &sigmoid, &sqrt, &rsqrt}) {
      op->saves_inputs = 0;
      op->saves_outputs = 1;
    }
    where.nondiff_inputs = 1;  // the condition
    where.saves_inputs = 1;
    set_scalar_bodies();
  }

  // What each op computes per element (scalar_bodies.cpp), for fused kernels.
  static void set_scalar_bodies() {
    namespace body = scalar_bodies;
    neg.scalar_body = body::neg;
    abs.scalar_body = body::abs;
    exp.scalar_body = body::exp;
    log.scalar_body = body::log;
    log1p.scalar_body = body::log1p;
    sqrt.scalar_body = body::sqrt;
    rsqrt.scalar_body = body::rsqrt;
    sin.scalar_body = body::sin;
    cos.scalar_body = body::cos;
    tanh.scalar_body = body::tanh;
    sigmoid.scalar_body = body::sigmoid;
    relu.scalar_body = body::relu;
    silu.scalar_body = body::silu;
    erf.scalar_body = body::erf;
    square.scalar_body = body::square;
    reciprocal.scalar_body = body::reciprocal;
    sign.scalar_body = body::sign;
    floor.scalar_body = body::floor;
    ceil.scalar_body = body::ceil;
    round.scalar_body = body::round;
    gelu.scalar_body = body::gelu;
    leaky_relu.scalar_body = body::leaky_relu;
    elu.scalar_body = body::elu;
    clamp.scalar_body = body::clamp;
    pow_scalar.scalar_body = body::pow_scalar;
    cast.scalar_body = body::cast;
    add.scalar_body = body::add;
    sub.scalar_body = body::sub;
    mul.scalar_body = body::mul;
    div.scalar_body = body::div;
    pow.scalar_body = body::pow;
    maximum.scalar_body = body::maximum;
    minimum.scalar_body = body::minimum;
    eq.scalar_body = body::eq;
    ne.scalar_body = body::ne;
    lt.scalar_body = body::lt;
    le.scalar_body = body::le;
    gt.scalar_body = body::gt;
    ge.scalar_body = body::ge;
    logical_and.scalar_body = body::logical_and;
    logical_or.scalar_body = body::logical_or;
    logical_not.scalar_body = body::logical_not;
    where.scalar_body = body::where;
  }
} properties;
}  // namespace

}  // namespace kiln::ops
