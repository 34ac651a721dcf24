// Typed op attributes: print/parse round trips for every field type, map_ints, the parse
// errors, and the op table's prototypes (each parses its own printed form, and the frontend
// passes every op exactly its prototype's attribute type, which the IR parser relies on).
#include "kiln/attrs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/ops/debug_print.h"
#include "kiln/ops/dropout.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/pool.h"
#include "ops/harness.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace F = nn::functional;

enum class Shade : int8_t { Light, Medium, Dark };

// One field of every type an attribute struct may hold.
struct EveryKind : AttrsOf<EveryKind> {
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  bool b = false;
  Shape list{1, 2};
  std::optional<int64_t> oi;
  std::optional<double> od;
  DType dtype = DType::Float32;
  Device device;
  std::string s = "mean";
  Shade shade = Shade::Light;
  ops::GeneratorRef generator;
  template <class V>
  void fields(V& v) {
    v("i", i), v("u", u), v("d", d), v("b", b), v("list", list), v("oi", oi), v("od", od),
        v("dtype", dtype), v("device", device), v("s", s), v("shade", shade),
        v("generator", generator);
  }
};

// Parses `a`'s printed form into default attributes and checks nothing was lost.
template <class A>
A round_trip(const A& a) {
  std::string text = a.str();
  A back;
  back.parse(text);
  EXPECT_TRUE(back.equals(a)) << text << " came back as " << back.str();
  EXPECT_EQ(back.str(), text);
  return back;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

bool same_bits(double a, double b) {
  return std::isnan(a) ? std::isnan(b) : std::signbit(a) == std::signbit(b) && a == b;
}

TEST(AttrsParse, DefaultsPrintAndParseBack) {
  EveryKind a;
  EXPECT_EQ(a.str(),
            "{i=0, u=0, d=0, b=false, list=[1, 2], oi=none, od=none, dtype=float32, device=cpu, "
            "s=\"mean\", shade=0, generator=default}");
  round_trip(a);
}

TEST(AttrsParse, NonDefaultValuesOfEveryFieldTypeRoundTrip) {
  Generator gen(7);
  EveryKind a;
  a.i = -42;
  a.u = std::numeric_limits<uint64_t>::max();
  a.d = 0.1;
  a.b = true;
  a.list = {};
  a.oi = -3;
  a.od = 1e-5;
  a.dtype = DType::BFloat16;
  a.device = Device("cuda:1");
  a.s = "sum";
  a.shade = Shade::Dark;
  a.generator.generator = &gen;
  EveryKind back = round_trip(a);
  EXPECT_EQ(back.i, -42);
  EXPECT_EQ(back.u, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(back.d, 0.1);
  EXPECT_TRUE(back.b);
  EXPECT_TRUE(back.list.empty());
  EXPECT_EQ(back.oi, std::optional<int64_t>(-3));
  EXPECT_EQ(back.od, std::optional<double>(1e-5));
  EXPECT_EQ(back.dtype, DType::BFloat16);
  EXPECT_EQ(back.device, Device("cuda:1"));
  EXPECT_EQ(back.s, "sum");
  EXPECT_EQ(back.shade, Shade::Dark);
  EXPECT_EQ(back.generator.generator, &gen);  // an address of this process
  EXPECT_NE(
      a.str().find("list=[], oi=-3, od=1e-05, dtype=bfloat16, device=cuda:1, s=\"sum\", shade=2"),
      std::string::npos)
      << a.str();
}

TEST(AttrsParse, DoublesComeBackBitForBit) {
  const double denormal = std::numeric_limits<double>::denorm_min();
  for (double d : {0.1, 1e-5, 0.30000000000000004, -2.5, 1.0 / 3.0, 1e300, -0.0, denormal,
                   std::numeric_limits<double>::max(), kInf, -kInf, std::nan("")}) {
    EveryKind a;
    a.d = d;
    a.od = d;
    EveryKind back = round_trip(a);
    EXPECT_TRUE(same_bits(back.d, d)) << a.str();
    ASSERT_TRUE(back.od.has_value());
    EXPECT_TRUE(same_bits(*back.od, d)) << a.str();
  }
  EveryKind a;
  a.d = 0.1;
  EXPECT_NE(a.str().find("d=0.1,"), std::string::npos) << "shortest form expected: " << a.str();
  a.d = kInf;
  a.od = -kInf;
  EXPECT_NE(a.str().find("d=inf, b=false, list=[1, 2], oi=none, od=-inf"), std::string::npos)
      << a.str();
  a.d = std::nan("");
  EXPECT_NE(a.str().find("d=nan,"), std::string::npos) << a.str();
}

TEST(AttrsParse, IntegerExtremesAndListsRoundTrip) {
  EveryKind a;
  a.i = std::numeric_limits<int64_t>::min();
  a.list = {std::numeric_limits<int64_t>::max(), -1, 0};
  a.oi = 0;
  EveryKind back = round_trip(a);
  EXPECT_EQ(back.i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(back.list, Shape({std::numeric_limits<int64_t>::max(), -1, 0}));
  EXPECT_EQ(back.oi, std::optional<int64_t>(0));
}

TEST(AttrsParse, EveryDTypeAndDeviceRoundTrips) {
  for (DType t : {DType::Bool, DType::Int32, DType::Int64, DType::Float16, DType::BFloat16,
                  DType::Float32, DType::Float64}) {
    EveryKind a;
    a.dtype = t;
    EXPECT_EQ(round_trip(a).dtype, t);
  }
  for (Device d : {kCPU, kCUDA, Device("cuda:3")}) {
    EveryKind a;
    a.device = d;
    EXPECT_EQ(round_trip(a).device, d);
  }
  EveryKind bare;
  bare.parse("{device=cuda}");
  EXPECT_EQ(bare.device, kCUDA);
}

TEST(AttrsParse, StringsWithSeparatorsQuotesAndBackslashesRoundTrip) {
  for (std::string s : {"", "a, b=[c]}", "say \"hi\"", "back\\slash", "\\", "\""}) {
    EveryKind a;
    a.s = s;
    EXPECT_EQ(round_trip(a).s, s) << a.str();
  }
  EveryKind a;
  a.s = "say \"hi\"";
  EXPECT_NE(a.str().find("s=\"say \\\"hi\\\"\""), std::string::npos) << a.str();
}

TEST(AttrsParse, NamedFieldsAreSetAndOthersKept) {
  EveryKind a;
  a.i = 5;
  a.s = "none";
  a.parse("{ b = true ,list=[ 4 ,5 ],  oi=7 }");
  EXPECT_TRUE(a.b);
  EXPECT_EQ(a.list, Shape({4, 5}));
  EXPECT_EQ(a.oi, std::optional<int64_t>(7));
  EXPECT_EQ(a.i, 5);
  EXPECT_EQ(a.s, "none");
  a.parse("{oi=none}");
  EXPECT_FALSE(a.oi.has_value());
  a.parse("{}");
  EXPECT_EQ(a.i, 5);
  EXPECT_FALSE(a.equals(EveryKind()));
  EXPECT_FALSE(a.equals(no_attrs()));
}

TEST(AttrsParse, NestedFieldsParse) {
  ops::AvgPool2dBackwardAttrs a;
  a.pool.kernel_size = {3, 2};
  a.pool.divisor_override = 5;
  a.pool.count_include_pad = false;
  a.input_size = {7, 9};
  ops::AvgPool2dBackwardAttrs back = round_trip(a);
  EXPECT_EQ(back.pool.kernel_size, Shape({3, 2}));
  EXPECT_EQ(back.pool.divisor_override, std::optional<int64_t>(5));
  EXPECT_FALSE(back.pool.count_include_pad);
  EXPECT_EQ(back.input_size, Shape({7, 9}));
}

TEST(AttrsParse, NoAttrsParsesOnlyEmptyBraces) {
  auto a = no_attrs().clone();
  a->parse("{}");
  a->parse("  { }  ");
  EXPECT_TRUE(a->equals(no_attrs()));
  expect_error([&] { a->parse("{dim=1}"); }, {"[attrs]", "unknown field 'dim'", "{dim=1}", "Fix:"});
}

TEST(AttrsMapInts, RewritesInt64FieldsListElementsAndOptionalInts) {
  ops::AvgPool2dBackwardAttrs pool;
  pool.pool.divisor_override = 2;
  pool.input_size = {3, 4};
  pool.map_ints([](int64_t v) { return v * 10; });
  EXPECT_EQ(pool.pool.divisor_override, std::optional<int64_t>(20));
  EXPECT_EQ(pool.pool.kernel_size, Shape({10, 10}));
  EXPECT_EQ(pool.input_size, Shape({30, 40}));

  EveryKind a;
  a.i = 3;
  a.u = 7;
  a.d = 1.5;
  a.od = 2.5;
  a.oi = 4;
  a.list = {1, -2};
  a.shade = Shade::Medium;
  a.map_ints([](int64_t v) { return v * 10; });
  EXPECT_EQ(a.i, 30);
  EXPECT_EQ(a.oi, std::optional<int64_t>(40));
  EXPECT_EQ(a.list, Shape({10, -20}));
  // Not sizes: the uint64 seed, doubles, enums, bools and dtypes stay as they were.
  EXPECT_EQ(a.u, 7u);
  EXPECT_EQ(a.d, 1.5);
  EXPECT_EQ(a.od, std::optional<double>(2.5));
  EXPECT_EQ(a.shade, Shade::Medium);

  EveryKind none;
  none.map_ints([](int64_t v) { return v + 1; });
  EXPECT_FALSE(none.oi.has_value());

  ops::DropoutAttrs drop;
  drop.seed = 11;
  drop.offset = 12;
  drop.map_ints([](int64_t v) { return v + 100; });
  EXPECT_EQ(drop.seed, 11u);
  EXPECT_EQ(drop.offset, 12u);
}

TEST(AttrsMapDevices, RewritesDeviceFieldsOnly) {
  ops::FullAttrs full;
  full.shape = {2, 3};
  full.value = 4;
  full.map_devices([](Device d) { return d.is_cpu() ? kCUDA : d; });
  EXPECT_EQ(full.device, kCUDA);
  EXPECT_EQ(full.shape, Shape({2, 3}));
  EXPECT_EQ(full.value, 4);
  auto none = no_attrs().clone();
  none->map_devices([](Device) -> Device { throw std::logic_error("no device field"); });
}

// Stands in for a graph's symbolic sizes: -7 is "s0".
class SymbolCodec final : public IntCodec {
 public:
  void print(std::ostream& os, int64_t v) const override {
    if (v == -7) {
      os << "s0";
    } else {
      os << v;
    }
  }
  int64_t parse(std::string_view text) const override {
    if (text == "s0") return -7;
    return std::stoll(std::string(text));
  }
};

TEST(AttrsParse, IntCodecPrintsAndParsesEveryInt64) {
  SymbolCodec codec;
  EveryKind a;
  a.i = -7;
  a.list = {-7, 4};
  a.oi = -7;
  a.u = 9;
  std::ostringstream os;
  a.print(os, &codec);
  std::string text = os.str();
  EXPECT_NE(text.find("{i=s0, u=9,"), std::string::npos) << text;
  EXPECT_NE(text.find("list=[s0, 4], oi=s0,"), std::string::npos) << text;
  EXPECT_NE(text.find("shade=0"), std::string::npos) << text;  // enums print as numbers
  EveryKind back;
  back.parse(text, &codec);
  EXPECT_TRUE(back.equals(a)) << back.str();
}

TEST(AttrsErrors, UnknownAndRepeatedFieldsAreNamed) {
  EveryKind a;
  expect_error([&] { a.parse("{i=1, nope=2}"); },
               {"[attrs]", "unknown field 'nope'", "{i=1, nope=2}", "Fix:"});
  expect_error([&] { a.parse("{i=1, i=2}"); },
               {"[attrs]", "expected each field once", "'i' twice", "Fix:"});
  expect_error([&] { a.parse("{i}"); }, {"[attrs]", "expected name=value", "\"i\""});
  expect_error([&] { a.parse("{=1}"); }, {"[attrs]", "expected name=value", "\"=1\""});
  expect_error([&] { a.parse("{i=1,}"); }, {"[attrs]", "expected name=value", "found \"\""});
}

TEST(AttrsErrors, MalformedValuesNameTheFieldAndWhatWasExpected) {
  EveryKind a;
  struct Case {
    const char* text;
    const char* field;
    const char* expected;
    const char* found;
  };
  for (const Case& c : std::vector<Case>{
           {"{i=1.5}", "'i'", "an integer", "\"1.5\""},
           {"{i=}", "'i'", "an integer", "\"\""},
           {"{i=99999999999999999999}", "'i'", "an integer", "99999999999999999999"},
           {"{u=-1}", "'u'", "a non-negative integer", "\"-1\""},
           {"{d=abc}", "'d'", "a number", "\"abc\""},
           {"{d=1.5x}", "'d'", "a number", "\"1.5x\""},
           {"{b=yes}", "'b'", "true or false", "\"yes\""},
           {"{b=1}", "'b'", "true or false", "\"1\""},
           {"{dtype=float33}", "'dtype'", "a dtype name", "\"float33\""},
           {"{device=tpu}", "'device'", "cpu or cuda:N", "\"tpu\""},
           {"{device=cuda:x}", "'device'", "cpu or cuda:N", "\"cuda:x\""},
           {"{device=cuda:1x}", "'device'", "cpu or cuda:N", "\"cuda:1x\""},
           {"{device=cuda:-1}", "'device'", "cpu or cuda:N", "\"cuda:-1\""},
           {"{device=cuda:70000}", "'device'", "cpu or cuda:N", "\"cuda:70000\""},
           {"{s=sum}", "'s'", "a quoted string", "\"sum\""},
           {"{s=\"a\"b\"c\"}", "'s'", "inner quotes escaped", "a\"b\"c"},
           {"{list=1}", "'list'", "a list in brackets", "\"1\""},
           {"{list=[1, x]}", "'list'", "an integer", "\"x\""},
           {"{list=[1,,2]}", "'list'", "an integer", "\"\""},
           {"{oi=abc}", "'oi'", "an integer", "\"abc\""},
           {"{od=[1]}", "'od'", "a number", "\"[1]\""},
           {"{shade=dark}", "'shade'", "an integer", "\"dark\""},
           {"{generator=foo}", "'generator'", "default or generator@0x<address>", "\"foo\""},
           {"{generator=generator@0x}", "'generator'", "generator@0x<address>", "@0x\""},
           {"{generator=generator@0xzz}", "'generator'", "generator@0x<address>", "0xzz"},
       }) {
    SCOPED_TRACE(c.text);
    expect_error([&] { a.parse(c.text); },
                 {"[attrs] field ", c.field, c.expected, c.found, "Fix:"});
  }
}

TEST(AttrsErrors, UnbalancedBracketsAndMissingBracesAreReported) {
  EveryKind a;
  expect_error([&] { a.parse("{list=[1, 2}"); },
               {"[attrs]", "unbalanced brackets", "{list=[1, 2}", "an unclosed bracket", "Fix:"});
  expect_error([&] { a.parse("{list=1]}"); },
               {"[attrs]", "unbalanced brackets", "{list=1]}", "extra ']'", "Fix:"});
  expect_error([&] { a.parse("{s=\"abc}"); },
               {"[attrs]", "unbalanced brackets or quotes", "an unterminated string"});
  for (const char* text : {"i=1", "{i=1", "i=1}", "", "[i=1]"}) {
    SCOPED_TRACE(text);
    expect_error([&] { a.parse(text); },
                 {"[attrs] expected attributes in braces", "{dim=[1], keepdim=true}",
                  std::string("found \"") + text + "\"", "Fix:"});
  }
}

// ---- the op table's prototypes ----

TEST(AttrsOpTable, EveryPrototypeParsesItsOwnPrintedForm) {
  ASSERT_GT(all_ops().size(), 0u);
  for (const OpDef* op : all_ops()) {
    ASSERT_NE(op->attrs_prototype, nullptr) << op->name;
    const Attrs& proto = *op->attrs_prototype;
    std::string text = proto.str();
    std::unique_ptr<Attrs> fresh = proto.clone();
    fresh->parse(text);
    EXPECT_TRUE(fresh->equals(proto)) << op->name << ": " << text << " -> " << fresh->str();
    EXPECT_EQ(fresh->str(), text) << op->name;
    // With every integer changed, parsing must set the fields, not just keep the defaults.
    std::unique_ptr<Attrs> changed = proto.clone();
    changed->map_ints([](int64_t v) { return v + 7; });
    std::unique_ptr<Attrs> back = proto.clone();
    back->parse(changed->str());
    EXPECT_TRUE(back->equals(*changed))
        << op->name << ": " << changed->str() << " -> " << back->str();
  }
}

// Records, for every op call dispatch sees, whether the attributes have the type of the op's
// prototype; each call then runs for real with the recorder out of the way.
class PrototypeTypeRecorder final : public DispatchInterceptor {
 public:
  std::set<std::string> seen;
  std::set<std::string> mismatches;  // "op: passed X, prototype Y", once each

  Tensors intercept(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                    TensorTypes&&) override {
    record(op, attrs);
    Away away;
    return dispatch(op, inputs, attrs);
  }
  bool intercept_into(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                      const Tensor& self) override {
    record(op, attrs);
    Away away;
    dispatch_into(op, inputs, attrs, self);
    return true;
  }

 private:
  // Uninstalls the recorder (which set_interceptor returns) until the end of the scope.
  struct Away {
    DispatchInterceptor* recorder = set_interceptor(nullptr);
    ~Away() { set_interceptor(recorder); }
  };
  void record(const OpDef& op, const Attrs& attrs) {
    seen.insert(op.name);
    if (typeid(attrs) != typeid(*op.attrs_prototype))
      mismatches.insert(op.name + ": passed " + typeid(attrs).name() + ", prototype " +
                        typeid(*op.attrs_prototype).name());
  }
};

// Installs a recorder for one scope, and leaves the default generator as it found it.
struct Recording {
  PrototypeTypeRecorder recorder;
  uint64_t seed = default_generator().seed(), offset = default_generator().offset();
  DispatchInterceptor* previous = set_interceptor(&recorder);
  ~Recording() {
    set_interceptor(previous);
    default_generator().manual_seed(seed);
    default_generator().set_offset(offset);
  }
};

Tensor leaf(IntList sizes, Generator& gen) {
  return randn(sizes, kFloat32, &gen).requires_grad_();
}

void backward_of(const Tensor& y) {
  y.sum().backward();
}

// A sample of frontend calls (with their backwards) reaching every op that has attributes.
void run_sample(Generator& gen) {
  Tensor x = leaf({3, 5}, gen);
  for (Tensor y :
       {gelu(x, GeluApproximation::Tanh), leaky_relu(x, 0.2), elu(x, 0.5), clamp(x, -0.5, 0.5),
        pow(x, Scalar(2.0)), relu(x) + exp(x) * sigmoid(x), where(x > 0, x, -x)})
    backward_of(y);
  backward_of(cast(x, kFloat64));
  backward_of(to_device(x, kCPU, /*copy=*/true));
  ops::set_debug_print_sink([](std::string_view) {});
  backward_of(debug_print(x, "sample"));
  ops::set_debug_print_sink({});
  backward_of(x.sum({1}) + x.prod({1}) + amax(x, {1}) + amin(x, {1}, true).squeeze(1));
  backward_of(std::get<0>(max(x, 1)) + std::get<0>(min(x, 1)) + var(x, {1}) + norm(x, 3.0, {1}));
  (void)all(x > 0, {0}), (void)any(x > 0), (void)argmax(x, 1);
  backward_of(F::softmax(x, 1) + F::log_softmax(x, 0));

  // Views and layout.
  backward_of(x.reshape({5, 3}).permute({1, 0}) + x.transpose(0, 1).contiguous().view({3, 5}));
  backward_of(x.slice(1, 1, 4, 2).select(0, 1).unsqueeze(0).expand({2, 2}));
  backward_of(x.unsqueeze(0).squeeze(0) + x.unsqueeze(2).squeeze());
  backward_of(stack(unbind(x, 1), 1));
  backward_of(as_strided(x, {2, 2}, {1, 2}, 1));
  backward_of(slice_scatter(x, leaf({1, 5}, gen), 0, 1, 2));
  Tensor index = tensor({0, 2, 1});
  Tensor index2d = tensor({0, 4, 1, 2, 3, 0}).reshape({3, 2});
  backward_of(cat({x, leaf({3, 2}, gen)}, 1));
  backward_of(gather(x, 1, index2d) + scatter_add(x, 1, index2d, leaf({3, 2}, gen)).slice(1, 0, 2));
  backward_of(scatter_reduce(x, 1, index2d, leaf({3, 2}, gen), "amax", false) + scatter(x, 1, index2d, 0.5));
  backward_of(index_select(x, 0, index) + index_add(x, 0, index, leaf({3, 5}, gen)));
  backward_of(sort(x, 1, true).values + topk(x, 5, 1).values + cumsum(x, 0) + cumprod(x, 1));
  (void)searchsorted(sort(x, 1).values, x, false, true);
  backward_of(masked_select(x, x > 0, 4));
  (void)nonzero(x, 3);

  // Factories and random ops (own generator: other tests' streams stay put).
  (void)zeros({2}), (void)ones({2}), (void)full({2}, 3.0), (void)arange(0, 5, 2);
  (void)linspace(0, 1, 5), (void)eye(3), (void)rand({2}, kFloat32, &gen);
  (void)randint(0, 5, {3}, kInt64, &gen), (void)bernoulli(rand({4}, kFloat32, &gen), &gen);
  backward_of(F::dropout(x, 0.3, true, &gen));
  backward_of(matmul(x, leaf({5, 2}, gen)));

  // Convolution, pooling, normalization, attention, padding.
  Tensor img = leaf({2, 3, 6, 6}, gen);
  backward_of(F::conv2d(img, leaf({4, 3, 3, 3}, gen), leaf({4}, gen), {1}, {1}));
  backward_of(F::max_pool2d(img, {2, 2}) + F::avg_pool2d(img, {2, 2}, {}, {0}, false, true, 3));
  backward_of(F::adaptive_avg_pool2d(img, {2, 2}));
  backward_of(F::layer_norm(img, {6}, leaf({6}, gen), leaf({6}, gen)));
  backward_of(F::scaled_dot_product_attention(leaf({2, 3, 4}, gen), leaf({2, 5, 4}, gen),
                                              leaf({2, 5, 4}, gen), Tensor(), 0.0, true));
  Tensor running_mean = zeros({3}), running_var = ones({3});
  backward_of(F::batch_norm(img, running_mean, running_var, leaf({3}, gen), leaf({3}, gen), true));
  backward_of(F::batch_norm(img, running_mean, running_var, Tensor(), Tensor(), false));
  backward_of(F::pad(img, {1, 1, 2, 0}, "reflect").sum() +
              F::pad(img, {1, 2}, "constant", 0.5).sum());

  // Lookups and losses.
  Tensor table = leaf({5, 4}, gen);
  backward_of(F::embedding(tensor({0, 3, 3, 1}), table, 0));
  (void)F::one_hot(tensor({0, 3, 1}), 5);
  backward_of(F::cross_entropy(x, tensor({0, 4, 2})));
  F::NllLossOptions nll;
  nll.reduction = "sum";
  backward_of(F::nll_loss(F::log_softmax(x, 1), tensor({1, 2, 3}), nll));
  Tensor target = rand({3, 5}, kFloat32, &gen);
  backward_of(F::binary_cross_entropy(sigmoid(x), target) +
              F::binary_cross_entropy_with_logits(x, target, Tensor(), "mean", ones({5})));

  // In-place writes go through intercept_into.
  Tensor plain = randn({4}, kFloat32, &gen);
  plain.clamp_(-0.1, 0.1);
  plain.add_(ones({4}));
  plain.copy_(zeros({4}));
}

TEST(AttrsOpTable, FrontendPassesEveryOpItsPrototypeType) {
  Generator gen(3);
  Recording rec;
  run_sample(gen);
  set_interceptor(rec.previous);
  EXPECT_TRUE(rec.recorder.mismatches.empty()) << ::testing::PrintToString(rec.recorder.mismatches);
  // Every op with attributes must be in the sample, so a new one cannot drift unchecked.
  for (const OpDef* op : all_ops()) {
    if (typeid(*op->attrs_prototype) == typeid(NoAttrs)) continue;
    // Control flow is recorded by the tracer, not dispatched (its attrs are checked there);
    // fusion groups are made by the fuse pass.
    if (op->lowering == LoweringClass::ControlFlow || op->lowering == LoweringClass::Fused) continue;
    EXPECT_TRUE(rec.recorder.seen.count(op->name))
        << op->name << " has attributes but no call in run_sample; add one";
  }
}

// The op harness's case for every table op, forward and backward: its frontend paths too
// must pass the prototype's type.
TEST(AttrsOpTable, HarnessCasesPassEveryOpItsPrototypeType) {
  Recording rec;
  uint64_t seed = 500;
  for (const testing::OpCase& c : testing::registry()) {
    SCOPED_TRACE(c.op + "/" + c.label);
    ASSERT_FALSE(c.runs.empty());
    DType dtype = c.dtypes.front();
    std::vector<Tensor> inputs, wrt;
    for (const testing::Input& in : c.runs.front()) {
      inputs.push_back(testing::make_input(in, dtype, false, ++seed));
      if (c.gradcheck && in.grad && inputs.back().is_floating_point() && inputs.back().numel() > 0)
        wrt.push_back(inputs.back().requires_grad_());
    }
    Tensor out = c.fn(inputs);
    if (!wrt.empty() && out.numel() > 0)
      (void)grad({out.sum()}, wrt, {}, GradOptions{.create_graph = true, .allow_unused = true});
  }
  set_interceptor(rec.previous);
  EXPECT_TRUE(rec.recorder.mismatches.empty()) << ::testing::PrintToString(rec.recorder.mismatches);
  EXPECT_GT(rec.recorder.seen.size(), 50u);
}

}  // namespace
}  // namespace kiln
