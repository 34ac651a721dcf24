// OpCases for the activations composed from table ops (softplus, mish, hardswish, hardsigmoid,
// glu, prelu): every dtype, strided inputs, naive references, gradcheck, compiled == eager and
// the GPU against the CPU through the harness; and the activation modules around them (their
// printouts, PReLU's parameter, the errors).
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "test_util.h"

namespace kiln::testing {
namespace {

namespace F = nn::functional;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using RefFn = std::function<Ref(const std::vector<Ref>&)>;
using Runs = std::vector<std::vector<Input>>;

OpCase make(std::string op, std::string label, Runs runs, Fn fn, RefFn ref) {
  OpCase c;
  c.op = std::move(op);
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = std::move(fn);
  c.ref = std::move(ref);
  return c;
}

double softplus_ref(double x, double beta, double threshold) {
  return beta * x > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}

double relu6(double x) { return std::min(std::max(x, 0.0), 6.0); }

Register activation_cases({
    make("where", "softplus", unary_runs(),
         [](const std::vector<Tensor>& in) { return F::softplus(in[0] * 3, 2, 5) + F::softplus(in[0]); },
         [](const std::vector<Ref>& r) {
           return ref_map(r[0], [](double x) { return softplus_ref(3 * x, 2, 5) + softplus_ref(x, 1, 20); });
         }),
    make("tanh", "mish", unary_runs(), [](const std::vector<Tensor>& in) { return F::mish(in[0] * 2); },
         [](const std::vector<Ref>& r) {
           return ref_map(r[0], [](double x) { return 2 * x * std::tanh(softplus_ref(2 * x, 1, 20)); });
         }),
    make("clamp", "hardswish_hardsigmoid", unary_runs(),
         [](const std::vector<Tensor>& in) { return F::hardswish(in[0] * 2.5) + F::hardsigmoid(in[0] * 2.5); },
         [](const std::vector<Ref>& r) {
           return ref_map(r[0], [](double x) {
             const double y = 2.5 * x;
             return y * relu6(y + 3) / 6 + relu6(y + 3) / 6;
           });
         }),
    make("sigmoid", "glu", {{{{3, 6}}}, {{{4, 2, 5}}}},
         [](const std::vector<Tensor>& in) { return F::glu(in[0], in[0].dim() == 2 ? -1 : 1); },
         [](const std::vector<Ref>& r) {
           const Ref& a = r[0];
           const bool rows = a.shape.size() == 2;
           Shape out = a.shape;
           out[rows ? 1 : 1] /= 2;
           Ref o{out, std::vector<double>(static_cast<size_t>(numel(out)))};
           for (int64_t i = 0; i < o.numel(); ++i) {
             Shape idx(out.size());
             int64_t rest = i;
             for (size_t d = out.size(); d-- > 0;) {
               idx[d] = rest % out[d];
               rest /= out[d];
             }
             Shape second = idx;
             second[1] += out[1];
             o.v[static_cast<size_t>(i)] = ref_at(a, idx) / (1 + std::exp(-ref_at(a, second)));
           }
           return o;
         }),
    make("where", "prelu", {{{{4, 3, 5}}, {{3}}}, {{{6}}, {{1}}}},
         [](const std::vector<Tensor>& in) { return F::prelu(in[0], in[1]); },
         [](const std::vector<Ref>& r) {
           const Ref& x = r[0];
           const bool channels = x.shape.size() == 3;
           Ref o = x;
           for (int64_t i = 0; i < x.numel(); ++i) {
             const double w = channels ? r[1].v[static_cast<size_t>((i / 5) % 3)] : r[1].v[0];
             const double v = x.v[static_cast<size_t>(i)];
             o.v[static_cast<size_t>(i)] = v >= 0 ? v : w * v;
           }
           return o;
         }),
});

TEST(ActivationModules, PrintComputeAndLearn) {
  EXPECT_EQ(nn::LeakyReLU(0.2).repr(), "LeakyReLU(negative_slope=0.2)");
  EXPECT_EQ(nn::Softplus(2, 10).repr(), "Softplus(beta=2, threshold=10)");
  EXPECT_EQ(nn::GLU().repr(), "GLU(dim=-1)");
  EXPECT_EQ(nn::Mish().repr(), "Mish()");
  const Tensor x = Tensor::from_vector<float>({-2, -0.5f, 0, 1.5f});
  EXPECT_EQ(nn::LeakyReLU(0.1)(x).to_vector<float>(), leaky_relu(x, 0.1).to_vector<float>());
  EXPECT_EQ(nn::ELU(0.5)(x).to_vector<float>(), elu(x, 0.5).to_vector<float>());
  EXPECT_EQ(nn::Hardswish()(x).to_vector<float>(), F::hardswish(x).to_vector<float>());
  EXPECT_EQ(nn::Hardsigmoid()(x).to_vector<float>(), F::hardsigmoid(x).to_vector<float>());
  // PReLU's slope is a parameter named "weight", 0.25 to start, and it learns.
  auto prelu = std::make_shared<nn::PReLU>(3);
  EXPECT_EQ(prelu->repr(), "PReLU(num_parameters=3)");
  ASSERT_EQ(prelu->named_parameters().size(), 1u);
  EXPECT_EQ(prelu->named_parameters().begin()->first, "weight");
  EXPECT_EQ(prelu->weight.to_vector<float>(), (std::vector<float>{0.25f, 0.25f, 0.25f}));
  const Tensor images = -ones({2, 3, 4});
  (*prelu)(images).sum().backward();
  EXPECT_EQ(prelu->weight.grad().to_vector<float>(), (std::vector<float>{-8, -8, -8}));
  expect_error([&] { (*prelu)(ones({2, 5})); },
               {"[prelu] a weight of 3 elements needs 3 channels (dim 1 of x), got float32[2, 5]",
                "Fix: build PReLU with num_parameters equal to the channel count, or 1"});
  expect_error([] { nn::PReLU(0); }, {"[PReLU] expected num_parameters >= 1, got 0"});
  expect_error([] { F::glu(ones({2, 3})); }, {"[glu] expected an even size along dim -1, got float32[2, 3]"});
  expect_error([] { nn::Softplus(0); }, {"[Softplus] expected a non-zero beta"});
  // softplus stays finite, with finite gradients, far past its threshold.
  Tensor big = Tensor::from_vector<float>({100, 1000}).requires_grad_();
  const Tensor y = F::softplus(big);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{100, 1000}));
  y.sum().backward();
  EXPECT_EQ(big.grad().to_vector<float>(), (std::vector<float>{1, 1}));
}

}  // namespace
}  // namespace kiln::testing
