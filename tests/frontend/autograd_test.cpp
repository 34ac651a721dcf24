// The autograd engine: backward, grad, higher order, accumulation, grad mode, in-place
// checks and every error path.
#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>

#include "kiln/kiln.h"

namespace kiln {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

TEST(Autograd, ScalarBackwardAccumulatesIntoLeaves) {
  Tensor x = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  Tensor w = tensor({0.5, -1.0, 2.0}, kFloat64).requires_grad_();
  Tensor loss = (x * w + x).sum();
  loss.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1.5, 0.0, 3.0}));
  EXPECT_EQ(values(w.grad()), (std::vector<double>{1.0, 2.0, 3.0}));
  // A second graph accumulates into the same .grad.
  (x * 2).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3.5, 2.0, 5.0}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(loss.is_leaf());
  EXPECT_EQ(loss.grad_fn()->name(), "SumBackward");
}

TEST(Autograd, DiamondSumsBothPaths) {
  Tensor x = tensor({2.0}, kFloat64).requires_grad_();
  Tensor y = x * x;        // dy/dx = 2x
  Tensor z = y * 3 + y.exp();
  z.sum().backward();
  double xv = 2.0;
  EXPECT_NEAR(x.grad().item<double>(), 3 * 2 * xv + std::exp(xv * xv) * 2 * xv, 1e-9);
}

TEST(Autograd, BackwardWithExplicitGradient) {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor y = x * x;
  y.backward(tensor({1.0, 10.0}, kFloat64));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2.0, 40.0}));
}

TEST(Autograd, BroadcastGradientsSumBack) {
  Tensor a = ones({3, 1}, kFloat64).requires_grad_();
  Tensor b = ones({4}, kFloat64).requires_grad_();
  (a * b).sum().backward();
  EXPECT_EQ(Shape(a.grad().sizes()), (Shape{3, 1}));
  EXPECT_EQ(values(a.grad()), (std::vector<double>{4, 4, 4}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{3, 3, 3, 3}));
}

TEST(Autograd, NonScalarWithoutGradientIsAnError) {
  Tensor x = ones({2}).requires_grad_();
  EXPECT_NE(error_of([&] { (x * 2).backward(); }).find("a gradient can be implied only for a tensor with one element"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (x * 2).backward(ones({3})); }).find("has shape [3]"), std::string::npos);
  EXPECT_NE(error_of([&] { ones({1}).backward(); }).find("does not require grad"), std::string::npos);
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = tensor({3.0}, kFloat64).requires_grad_();
  Tensor y = (x * x).sum();
  y.backward();
  EXPECT_NE(error_of([&] { y.backward(); }).find("retain_graph=true"), std::string::npos);

  Tensor x2 = tensor({3.0}, kFloat64).requires_grad_();
  Tensor y2 = (x2 * x2).sum();
  y2.backward(Tensor(), /*retain_graph=*/true);
  y2.backward();
  EXPECT_EQ(x2.grad().item<double>(), 12.0);
}

TEST(Autograd, HigherOrderThroughCreateGraph) {
  Tensor x = tensor({2.0, -1.0}, kFloat64).requires_grad_();
  Tensor y = (x * x * x).sum();
  auto g = grad({y}, {x}, {}, GradOptions{.create_graph = true});  // 3x^2
  EXPECT_EQ(values(g[0]), (std::vector<double>{12.0, 3.0}));
  EXPECT_TRUE(g[0].requires_grad());
  auto h = grad({g[0].sum()}, {x});  // 6x
  EXPECT_EQ(values(h[0]), (std::vector<double>{12.0, -6.0}));
  // Third order through ops that save their outputs (exp) and unary chains (tanh).
  Tensor t = tensor({0.3}, kFloat64).requires_grad_();
  auto d1 = grad({tanh(t).sum()}, {t}, {}, GradOptions{.create_graph = true});
  auto d2 = grad({d1[0].sum()}, {t}, {}, GradOptions{.create_graph = true});
  double th = std::tanh(0.3);
  EXPECT_NEAR(d2[0].item<double>(), -2 * th * (1 - th * th), 1e-12);
  auto d3 = grad({d2[0].sum()}, {t});
  EXPECT_NEAR(d3[0].item<double>(), -2 * (1 - th * th) * (1 - 3 * th * th), 1e-12);
}

TEST(Autograd, GradDoesNotTouchDotGrad) {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor w = tensor({3.0, 4.0}, kFloat64).requires_grad_();
  auto g = grad({(x * w).sum()}, {x});
  EXPECT_EQ(values(g[0]), (std::vector<double>{3.0, 4.0}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  Tensor unused = ones({1}, kFloat64).requires_grad_();
  EXPECT_NE(error_of([&] { grad({(x * 2).sum()}, {unused}); }).find("allow_unused"), std::string::npos);
  auto u = grad({(x * 2).sum()}, {unused}, {}, GradOptions{.allow_unused = true});
  EXPECT_FALSE(u[0].defined());
  // Gradient with respect to an intermediate tensor.
  Tensor mid = x * 3;
  auto gm = grad({(mid * mid).sum()}, {mid});
  EXPECT_EQ(values(gm[0]), (std::vector<double>{6.0, 12.0}));
}

TEST(Autograd, NoGradAndDetachStopRecording) {
  Tensor x = ones({2}).requires_grad_();
  {
    NoGradGuard guard;
    EXPECT_FALSE(is_grad_enabled());
    EXPECT_FALSE((x * 2).requires_grad());
    {
      EnableGradGuard enable;
      EXPECT_TRUE((x * 2).requires_grad());
    }
  }
  EXPECT_TRUE(is_grad_enabled());
  Tensor d = (x * 2).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_FALSE((x > 0).requires_grad());  // bool results never require grad
  EXPECT_NE(error_of([&] { arange(3).requires_grad_(); }).find("only floating-point"), std::string::npos);
  EXPECT_NE(error_of([&] { (x * 2).requires_grad_(false); }).find("only leaf tensors"), std::string::npos);
}

TEST(Autograd, SavedTensorModifiedInPlaceIsRefused) {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor a = x * 1;  // non-leaf
  Tensor b = a * a;  // saves a
  {
    NoGradGuard guard;
    a.add_(1.0);  // version bump
  }
  std::string msg = error_of([&] { b.sum().backward(); });
  EXPECT_NE(msg.find("modified in place"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'mul'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("version 0 -> 1"), std::string::npos) << msg;
}

TEST(Autograd, InPlaceOnLeafRequiringGradIsRefused) {
  Tensor w = ones({2}).requires_grad_();
  EXPECT_NE(error_of([&] { w.add_(1.0); }).find("leaf tensor that requires grad"), std::string::npos);
  {
    NoGradGuard guard;  // optimizer-style update is fine
    w.sub_(ones({2}), 0.5);
  }
  EXPECT_EQ(values(w), (std::vector<double>{0.5, 0.5}));
}

TEST(Autograd, InPlaceOnNonLeafRebasesHistory) {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor y = x * 2;
  y.mul_(x);  // y = 2x * x
  y.add_(x);  // y = 2x^2 + x
  y.sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{5.0, 9.0}));  // 4x + 1
}

TEST(Autograd, RetainGradKeepsNonLeafGradient) {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor h = x * 3;
  h.retain_grad();
  (h * h).sum().backward();
  EXPECT_EQ(values(h.grad()), (std::vector<double>{6.0, 12.0}));
  Tensor h2 = x * 3;
  (h2 * h2).sum().backward();
  EXPECT_FALSE(h2.grad().defined());
}

TEST(Autograd, ViewsAndSelectsRouteGradients) {
  Tensor x = arange(6).to(kFloat64).reshape({2, 3}).detach().requires_grad_();
  Tensor y = x.t().slice(0, 1, 3).select(1, 0).sum() + x[1].sum() * 2;
  y.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 1, 1, 2, 2, 2}));
}

TEST(Autograd, IntegerOutputsDoNotRequireGrad) {
  Tensor x = tensor({1.5, 2.5}).requires_grad_();
  Tensor i = x.to(kInt64);
  EXPECT_FALSE(i.requires_grad());
  EXPECT_TRUE(x.to(kFloat64).requires_grad());
}

}  // namespace
}  // namespace kiln
