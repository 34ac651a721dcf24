// Definitions of the factory ops.
#include "kiln/ops/factory.h"

#include <charconv>
#include <cmath>

#include "kiln/ops/infer_util.h"

namespace kiln::ops {

namespace {

void infer_full(InferCall& c) {
  const auto& a = static_cast<const FullAttrs&>(c.attrs);
  for (int64_t s : a.shape)
    KILN_CHECK(s >= 0, "[full] sizes must be non-negative, got ", shape_str(a.shape), ".");
  c.outputs.push_back({a.dtype, a.shape, a.device});
}

void infer_arange(InferCall& c) {
  const auto& a = static_cast<const ArangeAttrs&>(c.attrs);
  KILN_CHECK(a.step != 0, "[arange] step must be non-zero.");
  KILN_CHECK(std::isfinite(a.start) && std::isfinite(a.end), "[arange] start and end must be finite.");
  KILN_CHECK((a.end - a.start) / a.step >= 0, "[arange] the range [", a.start, ", ", a.end, ") with step ",
             a.step, " goes the wrong way. Fix: flip the sign of step.");
  int64_t n = static_cast<int64_t>(std::ceil((a.end - a.start) / a.step));
  c.outputs.push_back({a.dtype, Shape{n}, a.device});
}

void check_shape(const Shape& shape, const char* op) {
  for (int64_t s : shape)
    KILN_CHECK(s >= 0, "[", op, "] sizes must be non-negative, got ", shape_str(shape), ".");
}

void infer_linspace(InferCall& c) {
  const auto& a = static_cast<const LinspaceAttrs&>(c.attrs);
  KILN_CHECK(a.steps >= 0, "[linspace] number of steps must be non-negative, got ", a.steps, ".");
  KILN_CHECK(is_compute_type(a.dtype) && a.dtype != DType::Bool, "[linspace] cannot produce ",
             a.dtype, ". Fix: use kiln::kFloat32, kFloat64 or an integer dtype.");
  c.outputs.push_back({a.dtype, Shape{a.steps}, a.device});
}

void infer_eye(InferCall& c) {
  const auto& a = static_cast<const EyeAttrs&>(c.attrs);
  KILN_CHECK(a.n >= 0 && a.m >= 0, "[eye] n and m must be non-negative, got n = ", a.n,
             ", m = ", a.m, ".");
  KILN_CHECK(is_compute_type(a.dtype), "[eye] cannot produce ", a.dtype,
             ". Fix: use a compute dtype (float32, ...).");
  c.outputs.push_back({a.dtype, Shape{a.n, a.m}, a.device});
}

void infer_random_float(InferCall& c) {
  const auto& a = static_cast<const RandomAttrs&>(c.attrs);
  check_shape(a.shape, c.op.name.c_str());
  KILN_CHECK(a.dtype == DType::Float32 || a.dtype == DType::Float64, "[", c.op.name,
             "] draws floating values, "
             "but dtype ",
             a.dtype,
             " was requested. Fix: pass kiln::kFloat32 or kFloat64 (for integers use randint).");
  c.outputs.push_back({a.dtype, a.shape, a.device});
}

void infer_randint(InferCall& c) {
  const auto& a = static_cast<const RandintAttrs&>(c.attrs);
  check_shape(a.shape, "randint");
  KILN_CHECK(a.low < a.high, "[randint] expected low < high, got low = ", a.low,
             ", high = ", a.high, " (the range [low, high) is empty). Fix: pass high > low.");
  KILN_CHECK(is_compute_type(a.dtype) && a.dtype != DType::Bool, "[randint] cannot produce ",
             a.dtype, ". Fix: use kiln::kInt64 (the default), kInt32, kFloat32 or kFloat64.");
  c.outputs.push_back({a.dtype, a.shape, a.device});
}

void infer_bernoulli(InferCall& c) {
  infer::check_arity(c, 1);
  infer::check_floating(c, 0);
  const Tensor& p = c.inputs[0];
  c.outputs.push_back({p.dtype(), Shape(p.sizes()), p.device()});
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const GeneratorRef& g) {
  if (!g.generator) return os << "default";
  return os << "generator@" << static_cast<const void*>(g.generator);
}

void parse_attr(std::string_view field, std::string_view text, GeneratorRef& g) {
  if (text == "default") {
    g.generator = nullptr;
    return;
  }
  constexpr std::string_view prefix = "generator@0x";
  uintptr_t address = 0;
  bool ok = text.size() > prefix.size() && text.starts_with(prefix);
  if (ok) {
    const char* end = text.data() + text.size();
    auto res = std::from_chars(text.data() + prefix.size(), end, address, 16);
    ok = res.ec == std::errc() && res.ptr == end && address != 0;
  }
  if (!ok) kiln::detail::fail_attr_value(field, text, "default or generator@0x<address>");
  g.generator = reinterpret_cast<Generator*>(address);
}

OpDef full("full", {}, infer_full, LoweringClass::Layout, attrs_of<FullAttrs>(),
           {.differentiable = false});
OpDef arange("arange", {}, infer_arange, LoweringClass::Layout, attrs_of<ArangeAttrs>(),
             {.differentiable = false});
OpDef linspace("linspace", {}, infer_linspace, LoweringClass::Layout, attrs_of<LinspaceAttrs>(),
               {.differentiable = false});
OpDef eye("eye", {}, infer_eye, LoweringClass::Layout, attrs_of<EyeAttrs>(),
          {.differentiable = false});
OpDef rand("rand", {}, infer_random_float, LoweringClass::Random, attrs_of<RandomAttrs>(),
           {.differentiable = false, .random = true});
OpDef randn("randn", {}, infer_random_float, LoweringClass::Random, attrs_of<RandomAttrs>(),
            {.differentiable = false, .random = true});
OpDef randint("randint", {}, infer_randint, LoweringClass::Random, attrs_of<RandintAttrs>(),
              {.differentiable = false, .random = true});
OpDef bernoulli("bernoulli", {"p"}, infer_bernoulli, LoweringClass::Random,
                attrs_of<BernoulliAttrs>(), {.differentiable = false, .random = true});

}  // namespace kiln::ops
