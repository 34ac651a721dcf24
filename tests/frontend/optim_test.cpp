// kiln::optim: every optimizer option against an independent plain-double implementation
// of PyTorch's update formulas, parameter groups, zero_grad, state-dict round trips and
// their errors, option validation, the lr schedulers' sequences, gradient clipping, and
// an end-to-end linear-regression fit.
#include "kiln/optim.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "kiln/kiln.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/training.h"
#include "kiln/nn/utils.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace kiln::optim;

// ---------------------------------------------------------------- reference updates
// A fixed gradient that also depends on the parameter (like a real loss would), so weight
// decay and state interact with it: g_k(p_j) = 0.5 p_j + sin(1 + 0.9 k + 1.7 j).
double test_grad(int k, size_t j, double p) {
  return 0.5 * p + std::sin(1.0 + 0.9 * k + 1.7 * j);
}

const std::vector<double> kInitial = {0.3, -1.2, 2.0, 0.0};

std::vector<double> ref_sgd(const SGDOptions& o, int steps, std::vector<double> p = kInitial) {
  std::vector<double> buf(p.size());
  for (int k = 0; k < steps; ++k) {
    for (size_t j = 0; j < p.size(); ++j) {
      double g = test_grad(k, j, p[j]);
      if (o.maximize) g = -g;
      g += o.weight_decay * p[j];
      if (o.momentum != 0) {
        buf[j] = k == 0 ? g : o.momentum * buf[j] + (1 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buf[j] : buf[j];
      }
      p[j] -= o.lr * g;
    }
  }
  return p;
}

// Adam and AdamW (decoupled) share the moment updates.
template <class Options>
std::vector<double> ref_adam(const Options& o, bool decoupled, int steps,
                             std::vector<double> p = kInitial) {
  size_t n = p.size();
  std::vector<double> m(n), v(n), vmax(n);
  auto [b1, b2] = o.betas;
  for (int k = 0; k < steps; ++k) {
    double t = k + 1;
    for (size_t j = 0; j < n; ++j) {
      double g = test_grad(k, j, p[j]);
      if (o.maximize) g = -g;
      if (decoupled)
        p[j] *= 1 - o.lr * o.weight_decay;
      else
        g += o.weight_decay * p[j];
      m[j] = b1 * m[j] + (1 - b1) * g;
      v[j] = b2 * v[j] + (1 - b2) * g * g;
      vmax[j] = std::max(vmax[j], v[j]);
      double second = o.amsgrad ? vmax[j] : v[j];
      double mhat = m[j] / (1 - std::pow(b1, t));
      double denom = std::sqrt(second) / std::sqrt(1 - std::pow(b2, t)) + o.eps;
      p[j] -= o.lr * mhat / denom;
    }
  }
  return p;
}

std::vector<double> ref_rmsprop(const RMSpropOptions& o, int steps,
                                std::vector<double> p = kInitial) {
  size_t n = p.size();
  std::vector<double> sq(n), ga(n), buf(n);
  for (int k = 0; k < steps; ++k) {
    for (size_t j = 0; j < n; ++j) {
      double g = test_grad(k, j, p[j]);
      if (o.maximize) g = -g;
      g += o.weight_decay * p[j];
      sq[j] = o.alpha * sq[j] + (1 - o.alpha) * g * g;
      double avg;
      if (o.centered) {
        ga[j] = o.alpha * ga[j] + (1 - o.alpha) * g;
        avg = std::sqrt(sq[j] - ga[j] * ga[j]) + o.eps;
      } else {
        avg = std::sqrt(sq[j]) + o.eps;
      }
      if (o.momentum > 0) {
        buf[j] = o.momentum * buf[j] + g / avg;
        p[j] -= o.lr * buf[j];
      } else {
        p[j] -= o.lr * g / avg;
      }
    }
  }
  return p;
}

std::vector<double> ref_adagrad(const AdagradOptions& o, int steps, std::vector<double> p = kInitial) {
  std::vector<double> sum(p.size(), o.initial_accumulator_value);
  for (int k = 0; k < steps; ++k) {
    for (size_t j = 0; j < p.size(); ++j) {
      double g = test_grad(k, j, p[j]);
      if (o.maximize) g = -g;
      g += o.weight_decay * p[j];
      sum[j] += g * g;
      p[j] -= o.lr / (1 + k * o.lr_decay) * g / (std::sqrt(sum[j]) + o.eps);
    }
  }
  return p;
}

std::vector<double> ref_adadelta(const AdadeltaOptions& o, int steps, std::vector<double> p = kInitial) {
  std::vector<double> sq(p.size()), acc(p.size());
  for (int k = 0; k < steps; ++k) {
    for (size_t j = 0; j < p.size(); ++j) {
      double g = test_grad(k, j, p[j]);
      if (o.maximize) g = -g;
      g += o.weight_decay * p[j];
      sq[j] = o.rho * sq[j] + (1 - o.rho) * g * g;
      const double d = std::sqrt(acc[j] + o.eps) / std::sqrt(sq[j] + o.eps) * g;
      acc[j] = o.rho * acc[j] + (1 - o.rho) * d * d;
      p[j] -= o.lr * d;
    }
  }
  return p;
}

std::vector<double> ref_adamax(const AdamaxOptions& o, int steps, std::vector<double> p = kInitial) {
  std::vector<double> m(p.size()), u(p.size());
  auto [b1, b2] = o.betas;
  for (int k = 0; k < steps; ++k) {
    for (size_t j = 0; j < p.size(); ++j) {
      double g = test_grad(k, j, p[j]);
      if (o.maximize) g = -g;
      g += o.weight_decay * p[j];
      m[j] = b1 * m[j] + (1 - b1) * g;
      u[j] = std::max(b2 * u[j], std::abs(g) + o.eps);
      p[j] -= o.lr / (1 - std::pow(b1, k + 1)) * m[j] / u[j];
    }
  }
  return p;
}

std::vector<double> ref_nadam(const NAdamOptions& o, int steps, std::vector<double> p = kInitial) {
  std::vector<double> m(p.size()), v(p.size()), mu_product(p.size(), 1.0);
  auto [b1, b2] = o.betas;
  for (int k = 0; k < steps; ++k) {
    const double t = k + 1;
    const double mu = b1 * (1 - 0.5 * std::pow(0.96, t * o.momentum_decay));
    const double mu_next = b1 * (1 - 0.5 * std::pow(0.96, (t + 1) * o.momentum_decay));
    for (size_t j = 0; j < p.size(); ++j) {
      double g = test_grad(k, j, p[j]);
      if (o.maximize) g = -g;
      if (o.decoupled_weight_decay)
        p[j] *= 1 - o.lr * o.weight_decay;
      else
        g += o.weight_decay * p[j];
      mu_product[j] *= mu;
      m[j] = b1 * m[j] + (1 - b1) * g;
      v[j] = b2 * v[j] + (1 - b2) * g * g;
      const double d = std::sqrt(v[j] / (1 - std::pow(b2, t))) + o.eps;
      p[j] -= o.lr * (1 - mu) / (1 - mu_product[j]) * g / d;
      p[j] -= o.lr * mu_next / (1 - mu_product[j] * mu_next) * m[j] / d;
    }
  }
  return p;
}

// RAdam's rectification term at step t, or 0 while rho_t <= 5 (plain momentum steps).
double radam_rect(double beta2, double t) {
  const double rho_inf = 2 / (1 - beta2) - 1;
  const double rho_t = rho_inf - 2 * t * std::pow(beta2, t) / (1 - std::pow(beta2, t));
  if (rho_t <= 5) return 0;
  return std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
}

std::vector<double> ref_radam(const RAdamOptions& o, int steps, std::vector<double> p = kInitial) {
  std::vector<double> m(p.size()), v(p.size());
  auto [b1, b2] = o.betas;
  for (int k = 0; k < steps; ++k) {
    const double t = k + 1;
    for (size_t j = 0; j < p.size(); ++j) {
      double g = test_grad(k, j, p[j]);
      if (o.maximize) g = -g;
      if (o.decoupled_weight_decay)
        p[j] *= 1 - o.lr * o.weight_decay;
      else
        g += o.weight_decay * p[j];
      m[j] = b1 * m[j] + (1 - b1) * g;
      v[j] = b2 * v[j] + (1 - b2) * g * g;
      const double m_hat = m[j] / (1 - std::pow(b1, t));
      const double rect = radam_rect(b2, t);
      if (rect > 0)
        p[j] -= o.lr * m_hat * rect * std::sqrt(1 - std::pow(b2, t)) / (std::sqrt(v[j]) + o.eps);
      else
        p[j] -= o.lr * m_hat;
    }
  }
  return p;
}

// ---------------------------------------------------------------- kiln runs

Tensor make_param(const std::vector<double>& values = kInitial, DType dt = kFloat64) {
  Tensor p = Tensor::from_vector(values).to(dt);
  p.set_requires_grad(true);
  return p;
}

// Sets p.grad to test_grad(k, ., p) in p's dtype.
void set_test_grad(const Tensor& p, int k) {
  std::vector<double> v = p.to_vector<double>();
  for (size_t j = 0; j < v.size(); ++j) v[j] = test_grad(k, j, v[j]);
  p.set_grad(Tensor::from_vector(v).to(p.dtype()));
}

template <class Opt>
void run_steps(Opt& opt, const Tensor& p, int first, int last) {
  for (int k = first; k < last; ++k) {
    set_test_grad(p, k);
    opt.step();
  }
}

template <class Opt, class Options>
std::vector<double> run_kiln(const Options& o, int steps, DType dt = kFloat64) {
  Tensor p = make_param(kInitial, dt);
  Opt opt({p}, o);
  run_steps(opt, p, 0, steps);
  return p.to_vector<double>();
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
        << what << " [" << i << "]";
}

constexpr int kSteps = 5;

TEST(Optim, SgdMatchesReferenceForEveryOption) {
  std::vector<std::pair<std::string, SGDOptions>> cases = {
      {"plain", {.lr = 0.1}},
      {"momentum", {.lr = 0.1, .momentum = 0.9}},
      {"dampening", {.lr = 0.05, .momentum = 0.8, .dampening = 0.3}},
      {"nesterov", {.lr = 0.1, .momentum = 0.9, .nesterov = true}},
      {"weight_decay", {.lr = 0.1, .weight_decay = 0.2}},
      {"maximize", {.lr = 0.1, .momentum = 0.5, .maximize = true}},
      {"all",
       {.lr = 0.07, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true, .maximize = true}},
  };
  for (const auto& [name, o] : cases) {
    std::vector<double> want = ref_sgd(o, kSteps);
    expect_close(run_kiln<SGD>(o, kSteps), want, 1e-12, "SGD " + name);
    EXPECT_NE(want, ref_sgd(o, kSteps - 1)) << name;  // the last step moved something
  }
  // One hand-checked step: p = 1, g = 2, lr = 0.5 -> 0.
  Tensor p = make_param({1.0});
  SGD opt({p}, {.lr = 0.5});
  p.set_grad(tensor({2.0}, kFloat64));
  opt.step();
  EXPECT_DOUBLE_EQ(p.item<double>(), 0.0);
}

TEST(Optim, AdamMatchesReferenceForEveryOption) {
  std::vector<std::pair<std::string, AdamOptions>> cases = {
      {"plain", {.lr = 0.1}},
      {"betas_eps", {.lr = 0.05, .betas = {0.8, 0.9}, .eps = 1e-3}},
      {"weight_decay", {.lr = 0.1, .weight_decay = 0.3}},
      {"amsgrad", {.lr = 0.1, .betas = {0.9, 0.5}, .amsgrad = true}},
      {"maximize", {.lr = 0.1, .maximize = true}},
      {"all",
       {.lr = 0.02, .betas = {0.5, 0.7}, .weight_decay = 0.1, .amsgrad = true, .maximize = true}},
  };
  for (const auto& [name, o] : cases)
    expect_close(run_kiln<Adam>(o, kSteps), ref_adam(o, false, kSteps), 1e-12, "Adam " + name);
  // float32 parameters follow the same formulas to float precision.
  AdamOptions o{.lr = 0.1, .betas = {0.9, 0.5}, .amsgrad = true};
  expect_close(run_kiln<Adam>(o, kSteps, kFloat32), ref_adam(o, false, kSteps), 2e-6, "Adam f32");
  // amsgrad changes the result on this gradient sequence (else the test could not tell):
  // with beta2 = 0.5 the second moment shrinks when the gradients do.
  std::vector<double> with = ref_adam(o, false, kSteps);
  o.amsgrad = false;
  std::vector<double> without = ref_adam(o, false, kSteps);
  double diff = 0;
  for (size_t j = 0; j < with.size(); ++j) diff = std::max(diff, std::abs(with[j] - without[j]));
  EXPECT_GT(diff, 1e-3);
}

TEST(Optim, AdamWDecouplesWeightDecay) {
  std::vector<std::pair<std::string, AdamWOptions>> cases = {
      {"default_decay", {.lr = 0.1}},
      {"decay", {.lr = 0.1, .weight_decay = 0.5}},
      {"amsgrad_maximize",
       {.lr = 0.05,
        .betas = {0.7, 0.8},
        .eps = 1e-4,
        .weight_decay = 0.2,
        .amsgrad = true,
        .maximize = true}},
  };
  for (const auto& [name, o] : cases)
    expect_close(run_kiln<AdamW>(o, kSteps), ref_adam(o, true, kSteps), 1e-12, "AdamW " + name);
  EXPECT_EQ(AdamWOptions{}.weight_decay, 1e-2);  // PyTorch's AdamW default
  // Decoupled decay differs from Adam's L2 decay.
  AdamOptions l2{.lr = 0.1, .weight_decay = 0.5};
  AdamWOptions decoupled{.lr = 0.1, .weight_decay = 0.5};
  EXPECT_GT(std::abs(run_kiln<AdamW>(decoupled, kSteps)[2] - run_kiln<Adam>(l2, kSteps)[2]), 1e-3);
}

TEST(Optim, RmspropMatchesReferenceForEveryOption) {
  std::vector<std::pair<std::string, RMSpropOptions>> cases = {
      {"plain", {.lr = 0.01}},
      {"alpha_eps", {.lr = 0.02, .alpha = 0.9, .eps = 1e-3}},
      {"weight_decay", {.lr = 0.01, .weight_decay = 0.1}},
      {"momentum", {.lr = 0.01, .momentum = 0.9}},
      {"centered", {.lr = 0.01, .centered = true}},
      {"maximize", {.lr = 0.01, .maximize = true}},
      {"all",
       {.lr = 0.005,
        .alpha = 0.95,
        .weight_decay = 0.05,
        .momentum = 0.5,
        .centered = true,
        .maximize = true}},
  };
  for (const auto& [name, o] : cases)
    expect_close(run_kiln<RMSprop>(o, kSteps), ref_rmsprop(o, kSteps), 1e-11, "RMSprop " + name);
}

TEST(Optim, AdagradMatchesReferenceForEveryOption) {
  std::vector<std::pair<std::string, AdagradOptions>> cases = {
      {"plain", {.lr = 0.1}},
      {"lr_decay", {.lr = 0.1, .lr_decay = 0.5}},
      {"weight_decay", {.lr = 0.1, .weight_decay = 0.2}},
      {"initial_accumulator", {.lr = 0.1, .initial_accumulator_value = 0.7, .eps = 1e-3}},
      {"all",
       {.lr = 0.05, .lr_decay = 0.1, .weight_decay = 0.1, .initial_accumulator_value = 0.2, .maximize = true}},
  };
  for (const auto& [name, o] : cases)
    expect_close(run_kiln<Adagrad>(o, kSteps), ref_adagrad(o, kSteps), 1e-12, "Adagrad " + name);
}

TEST(Optim, AdadeltaMatchesReferenceForEveryOption) {
  std::vector<std::pair<std::string, AdadeltaOptions>> cases = {
      {"plain", {}},
      {"rho_eps", {.lr = 0.5, .rho = 0.5, .eps = 1e-3}},
      {"weight_decay", {.weight_decay = 0.2}},
      {"maximize", {.lr = 2.0, .maximize = true}},
  };
  for (const auto& [name, o] : cases)
    expect_close(run_kiln<Adadelta>(o, kSteps), ref_adadelta(o, kSteps), 1e-12, "Adadelta " + name);
}

TEST(Optim, AdamaxMatchesReferenceForEveryOption) {
  std::vector<std::pair<std::string, AdamaxOptions>> cases = {
      {"plain", {.lr = 0.1}},
      {"betas_eps", {.lr = 0.05, .betas = {0.8, 0.5}, .eps = 1e-2}},
      {"weight_decay", {.lr = 0.1, .weight_decay = 0.3}},
      {"maximize", {.lr = 0.1, .maximize = true}},
  };
  for (const auto& [name, o] : cases)
    expect_close(run_kiln<Adamax>(o, kSteps), ref_adamax(o, kSteps), 1e-12, "Adamax " + name);
  AdamaxOptions o{.lr = 0.1, .betas = {0.8, 0.5}};
  expect_close(run_kiln<Adamax>(o, kSteps, kFloat32), ref_adamax(o, kSteps), 2e-6, "Adamax f32");
}

TEST(Optim, NAdamMatchesReferenceForEveryOption) {
  std::vector<std::pair<std::string, NAdamOptions>> cases = {
      {"plain", {.lr = 0.1}},
      {"betas_momentum_decay", {.lr = 0.05, .betas = {0.8, 0.9}, .eps = 1e-3, .momentum_decay = 0.1}},
      {"weight_decay", {.lr = 0.1, .weight_decay = 0.3}},
      {"decoupled", {.lr = 0.1, .weight_decay = 0.3, .decoupled_weight_decay = true}},
      {"maximize", {.lr = 0.1, .maximize = true}},
  };
  for (const auto& [name, o] : cases)
    expect_close(run_kiln<NAdam>(o, kSteps), ref_nadam(o, kSteps), 1e-12, "NAdam " + name);
  // The momentum product is state of its own, saved as a number per parameter.
  Tensor p = make_param();
  NAdam opt({p}, {.lr = 0.1});
  run_steps(opt, p, 0, 2);
  const OptimizerStateDict sd = opt.state_dict();
  ASSERT_TRUE(sd.count("state.0.mu_product"));
  EXPECT_EQ(sd.at("state.0.mu_product").dim(), 0);
  const double mu1 = 0.9 * (1 - 0.5 * std::pow(0.96, 1 * 4e-3)), mu2 = 0.9 * (1 - 0.5 * std::pow(0.96, 2 * 4e-3));
  EXPECT_NEAR(sd.at("state.0.mu_product").item<double>(), mu1 * mu2, 1e-15);
}

TEST(Optim, RAdamMatchesReferenceThroughBothPhases) {
  // beta2 = 0.9: the first steps (rho_t <= 5) are plain momentum, the later ones rectified.
  constexpr int steps = 12;
  EXPECT_EQ(radam_rect(0.9, 1), 0);
  EXPECT_GT(radam_rect(0.9, steps), 0);
  std::vector<std::pair<std::string, RAdamOptions>> cases = {
      {"plain", {.lr = 0.1, .betas = {0.9, 0.9}}},
      {"eps", {.lr = 0.05, .betas = {0.8, 0.9}, .eps = 1e-3}},
      {"weight_decay", {.lr = 0.1, .betas = {0.9, 0.9}, .weight_decay = 0.3}},
      {"decoupled", {.lr = 0.1, .betas = {0.9, 0.9}, .weight_decay = 0.3, .decoupled_weight_decay = true}},
      {"maximize", {.lr = 0.1, .betas = {0.9, 0.9}, .maximize = true}},
      {"default_betas", {.lr = 0.1}},  // beta2 = 0.999 stays unrectified for these steps
  };
  for (const auto& [name, o] : cases)
    expect_close(run_kiln<RAdam>(o, steps), ref_radam(o, steps), 1e-12, "RAdam " + name);
}

TEST(Optim, ParamGroupsHaveTheirOwnOptions) {
  Tensor a = make_param({1.0, 2.0}), b = make_param({3.0});
  SGD opt(std::vector<ParamGroup<SGDOptions>>{{{a}, {.lr = 0.1}}, {{b}, {.lr = 0.01}}});
  ASSERT_EQ(opt.num_param_groups(), 2u);
  a.set_grad(tensor({1.0, 1.0}, kFloat64));
  b.set_grad(tensor({1.0}, kFloat64));
  opt.step();
  expect_close(a.to_vector<double>(), {0.9, 1.9}, 1e-15, "group 0");
  expect_close(b.to_vector<double>(), {2.99}, 1e-15, "group 1");
  // Options are editable per group; add_param_group takes the defaults or its own.
  opt.param_groups()[1].options.lr = 1.0;
  opt.step();
  expect_close(b.to_vector<double>(), {1.99}, 1e-15, "edited lr");
  EXPECT_EQ(opt.lr(0), 0.1);
  Tensor c = make_param({0.0}), d = make_param({0.0});
  opt.add_param_group({c});
  opt.add_param_group({d}, {.lr = 2.0, .momentum = 0.5});
  EXPECT_EQ(opt.lr(2), SGDOptions{}.lr);
  EXPECT_EQ(opt.param_groups()[3].options.momentum, 0.5);
  EXPECT_EQ(opt.parameters().size(), 4u);
  // Per-group options drive the math: same grads, different results per group.
  std::vector<double> init = {0.5, -0.5};
  Tensor x = make_param(init), y = make_param(init);
  Adam adam(std::vector<ParamGroup<AdamOptions>>{{{x}, {.lr = 0.1}},
                                                 {{y}, {.lr = 0.05, .amsgrad = true}}});
  run_steps(adam, x, 0, 0);
  for (int k = 0; k < 3; ++k) {
    set_test_grad(x, k);
    set_test_grad(y, k);
    adam.step();
  }
  expect_close(x.to_vector<double>(), ref_adam(AdamOptions{.lr = 0.1}, false, 3, init), 1e-12, "x");
  expect_close(y.to_vector<double>(),
               ref_adam(AdamOptions{.lr = 0.05, .amsgrad = true}, false, 3, init), 1e-12, "y");
}

TEST(Optim, ParametersWithoutGradAreSkipped) {
  Tensor a = make_param({1.0}), b = make_param({5.0});
  Adam opt({a, b}, {.lr = 0.1});
  a.set_grad(tensor({1.0}, kFloat64));
  opt.step();
  EXPECT_NE(a.item<double>(), 1.0);
  EXPECT_EQ(b.item<double>(), 5.0);
  EXPECT_EQ(opt.state(b), nullptr);
  ASSERT_NE(opt.state(a), nullptr);
  EXPECT_EQ(opt.state(a)->step, 1);
  EXPECT_TRUE(opt.state(a)->buffers.count("exp_avg"));
  EXPECT_FALSE(opt.state(a)->buffers.count("max_exp_avg_sq"));  // amsgrad off
}

TEST(Optim, StepUpdatesParametersInPlaceThroughSharedHandles) {
  // The model keeps its handle; the optimizer's update shows through it.
  Tensor w = make_param({1.0, 2.0});
  Tensor model_view = w;
  SGD opt({w}, {.lr = 1.0});
  Tensor loss = (w * w).sum();
  loss.backward();
  opt.step();  // w -= 2w
  expect_close(model_view.to_vector<double>(), {-1.0, -2.0}, 0, "shared");
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
}

TEST(Optim, ZeroGrad) {
  Tensor a = make_param({1.0, 2.0});
  SGD opt({a}, {.lr = 0.1});
  a.set_grad(tensor({3.0, 4.0}, kFloat64));
  Tensor g = a.grad();
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(a.grad().defined());
  EXPECT_TRUE(a.grad().is_same(g));  // zeroed in place
  expect_close(a.grad().to_vector<double>(), {0, 0}, 0, "zeroed");
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  // Gradients accumulate without zero_grad; after it, backward starts fresh.
  Tensor b = make_param({1.0});
  SGD opt_b({b}, {.lr = 0.1});
  (b * 3.0).sum().backward();
  (b * 3.0).sum().backward();
  EXPECT_EQ(b.grad().item<double>(), 6.0);
  opt_b.zero_grad();
  (b * 3.0).sum().backward();
  EXPECT_EQ(b.grad().item<double>(), 3.0);
}

// Runs `steps` on a, saves, loads into a fresh optimizer over a copy, then runs both on
// and expects identical parameters; both must also match the uninterrupted reference.
template <class Opt, class Options>
void check_round_trip(const Options& o, const std::vector<double>& want, const char* what) {
  Tensor a = make_param();
  Opt opt_a({a}, o);
  run_steps(opt_a, a, 0, 3);
  OptimizerStateDict sd = opt_a.state_dict();
  Tensor b = make_param(a.to_vector<double>());
  Opt opt_b({b}, Options{});  // default options: the load must bring o back
  opt_b.load_state_dict(sd);
  EXPECT_EQ(opt_b.lr(0), o.lr) << what;
  run_steps(opt_a, a, 3, 6);
  run_steps(opt_b, b, 3, 6);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << what;
  expect_close(b.to_vector<double>(), want, 1e-12, what);
}

TEST(Optim, StateDictRoundTripContinuesIdentically) {
  SGDOptions sgd{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
  check_round_trip<SGD>(sgd, ref_sgd(sgd, 6), "SGD");
  AdamOptions adam{.lr = 0.1, .betas = {0.8, 0.95}, .weight_decay = 0.1, .amsgrad = true};
  check_round_trip<Adam>(adam, ref_adam(adam, false, 6), "Adam");
  AdamWOptions adamw{.lr = 0.05, .weight_decay = 0.3};
  check_round_trip<AdamW>(adamw, ref_adam(adamw, true, 6), "AdamW");
  RMSpropOptions rms{.lr = 0.01, .momentum = 0.5, .centered = true};
  check_round_trip<RMSprop>(rms, ref_rmsprop(rms, 6), "RMSprop");
  AdagradOptions adagrad{.lr = 0.1, .lr_decay = 0.1, .initial_accumulator_value = 0.5};
  check_round_trip<Adagrad>(adagrad, ref_adagrad(adagrad, 6), "Adagrad");
  AdadeltaOptions adadelta{.lr = 0.5, .rho = 0.8};
  check_round_trip<Adadelta>(adadelta, ref_adadelta(adadelta, 6), "Adadelta");
  AdamaxOptions adamax{.lr = 0.1, .betas = {0.8, 0.5}};
  check_round_trip<Adamax>(adamax, ref_adamax(adamax, 6), "Adamax");
  NAdamOptions nadam{.lr = 0.1, .weight_decay = 0.1, .decoupled_weight_decay = true};
  check_round_trip<NAdam>(nadam, ref_nadam(nadam, 6), "NAdam");
  RAdamOptions radam{.lr = 0.1, .betas = {0.9, 0.9}};
  check_round_trip<RAdam>(radam, ref_radam(radam, 6), "RAdam");
}

TEST(Optim, StateDictKeysAndSnapshot) {
  Tensor a = make_param(), b = make_param({1.0, 2.0});
  Adam opt(std::vector<ParamGroup<AdamOptions>>{{{a}, {.lr = 0.1, .amsgrad = true}}, {{b}, {}}});
  run_steps(opt, a, 0, 2);
  OptimizerStateDict sd = opt.state_dict();
  for (const char* key : {"param_groups.0.params", "param_groups.0.lr", "param_groups.0.beta1",
                          "param_groups.0.beta2", "param_groups.0.eps", "param_groups.0.amsgrad",
                          "param_groups.1.params", "state.0.step", "state.0.exp_avg",
                          "state.0.exp_avg_sq", "state.0.max_exp_avg_sq"})
    EXPECT_TRUE(sd.count(key)) << key;
  EXPECT_FALSE(sd.count("state.1.step"));  // b never had a gradient
  EXPECT_EQ(sd.at("state.0.step").item<int64_t>(), 2);
  EXPECT_EQ(sd.at("param_groups.0.amsgrad").item<double>(), 1.0);
  EXPECT_EQ(sd.at("param_groups.1.params").to_vector<int64_t>(), std::vector<int64_t>{1});
  // A snapshot: later steps do not change it.
  std::vector<double> saved = sd.at("state.0.exp_avg").to_vector<double>();
  run_steps(opt, a, 2, 3);
  EXPECT_EQ(sd.at("state.0.exp_avg").to_vector<double>(), saved);
}

TEST(Optim, LoadStateDictErrors) {
  Tensor a = make_param();
  Adam adam({a}, {.lr = 0.1});
  run_steps(adam, a, 0, 1);
  OptimizerStateDict sd = adam.state_dict();

  Tensor s = make_param();
  SGD sgd({s}, {.lr = 0.1, .momentum = 0.9});
  expect_error([&] { sgd.load_state_dict(sd); }, {"[SGD.load_state_dict]", "exp_avg", "Fix:"});

  Tensor two_a = make_param(), two_b = make_param();
  Adam two({two_a, two_b});
  expect_error([&] { two.load_state_dict(sd); },
               {"parameter group 0 has 2 parameter(s) here but 1", "same parameter groups"});

  Tensor g0 = make_param(), g1 = make_param();
  Adam grouped(std::vector<ParamGroup<AdamOptions>>{{{g0}, {}}, {{g1}, {}}});
  expect_error([&] { adam.load_state_dict(grouped.state_dict()); },
               {"the state has parameter group 1", "1 group(s)"});
  expect_error([&] { grouped.load_state_dict(sd); }, {"missing key \"param_groups.1.params\""});

  Tensor wide = make_param({1.0, 2.0, 3.0, 4.0, 5.0});
  Adam other_shape({wide});
  expect_error([&] { other_shape.load_state_dict(sd); },
               {"\"state.0.exp_avg\" has type float64[4]", "float64[5]"});

  OptimizerStateDict missing = sd;
  missing.erase("param_groups.0.eps");
  Tensor c = make_param();
  Adam fresh({c}, {.lr = 0.5});
  expect_error([&] { fresh.load_state_dict(missing); }, {"missing option \"param_groups.0.eps\""});

  OptimizerStateDict extra = sd;
  extra["param_groups.0.momentum"] = Tensor::scalar(0.9, kFloat64);
  expect_error([&] { fresh.load_state_dict(extra); },
               {"unexpected option", "no option \"momentum\""});
  extra = sd;
  extra["model.weight"] = Tensor::scalar(1.0, kFloat64);
  expect_error([&] { fresh.load_state_dict(extra); }, {"unexpected key \"model.weight\""});
  extra = sd;
  extra["state.7.step"] = Tensor::scalar(int64_t{1}, kInt64);
  expect_error([&] { fresh.load_state_dict(extra); }, {"entry for parameter 7", "1 parameter(s)"});

  // An invalid value is refused and nothing changes.
  OptimizerStateDict bad = sd;
  bad["param_groups.0.beta1"] = Tensor::scalar(1.5, kFloat64);
  expect_error([&] { fresh.load_state_dict(bad); }, {"[Adam] expected betas.first in [0, 1)"});
  EXPECT_EQ(fresh.lr(0), 0.5);
  EXPECT_EQ(fresh.state(c), nullptr);
}

TEST(Optim, OptionValidationErrors) {
  Tensor p = make_param();
  expect_error([&] { SGD({p}, {.lr = -0.1}); }, {"[SGD] expected lr >= 0, got -0.1", "Fix:"});
  expect_error([&] { SGD({p}, {.lr = 0.1, .momentum = -1}); }, {"expected momentum >= 0"});
  expect_error([&] { SGD({p}, {.lr = 0.1, .weight_decay = -1}); }, {"expected weight_decay >= 0"});
  expect_error([&] { SGD({p}, {.lr = 0.1, .nesterov = true}); },
               {"Nesterov momentum requires momentum > 0 and dampening == 0"});
  expect_error([&] { SGD({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
               {"dampening=0.1"});
  expect_error(
      [&] {
        Adam({p}, {.betas = {1.0, 0.999}});
      },
      {"[Adam] expected betas.first in [0, 1)"});
  expect_error([&] { Adam({p}, {.betas = {0.9, -0.1}}); }, {"expected betas.second in [0, 1)"});
  expect_error([&] { Adam({p}, {.eps = -1e-8}); }, {"expected eps >= 0"});
  expect_error([&] { AdamW({p}, {.lr = std::nan("")}); }, {"[AdamW] expected lr >= 0"});
  expect_error([&] { RMSprop({p}, {.alpha = -0.5}); }, {"[RMSprop] expected alpha >= 0"});
  expect_error([&] { RMSprop({p}, {.momentum = -0.5}); }, {"expected momentum >= 0"});
  expect_error([&] { Adagrad({p}, {.lr_decay = -1}); }, {"[Adagrad] expected lr_decay >= 0, got -1"});
  expect_error([&] { Adagrad({p}, {.initial_accumulator_value = -0.5}); },
               {"expected initial_accumulator_value >= 0"});
  expect_error([&] { Adadelta({p}, {.rho = 1.5}); }, {"[Adadelta] expected rho in [0, 1], got 1.5"});
  expect_error([&] { Adamax({p}, {.betas = {0.9, 1.0}}); }, {"[Adamax] expected betas.second in [0, 1)"});
  expect_error([&] { NAdam({p}, {.momentum_decay = -1}); }, {"[NAdam] expected momentum_decay >= 0"});
  expect_error([&] { RAdam({p}, {.lr = -1}); }, {"[RAdam] expected lr >= 0, got -1"});
  expect_error([&] { SGD(std::vector<Tensor>{}, {.lr = 0.1}); },
               {"[SGD] expected at least one parameter", "empty parameter list"});
  expect_error([&] { SGD({p, p}, {.lr = 0.1}); }, {"appears more than once"});
  expect_error([&] { Adam({Tensor()}); }, {"undefined tensor"});
  expect_error([&] { Adam({tensor({1, 2})}); }, {"floating-point", "int64[2]"});
  SGD opt({p}, {.lr = 0.1});
  expect_error([&] { opt.add_param_group({p}); }, {"appears more than once"});
  expect_error([&] { opt.add_param_group({make_param()}, {.lr = -1}); }, {"expected lr >= 0"});
  // Options edited to a bad value are caught at step().
  opt.param_groups()[0].options.lr = -1;
  p.set_grad(zeros({4}, kFloat64));
  expect_error([&] { opt.step(); }, {"[SGD] expected lr >= 0, got -1"});
  opt.param_groups()[0].options.lr = 0.1;
  p.set_grad(zeros({3}, kFloat64));
  expect_error([&] { opt.step(); }, {"[SGD.step]", "gradient of type float64[3]"});
}

// ---------------------------------------------------------------- schedulers

TEST(LRScheduler, StepLRSequence) {
  Tensor a = make_param(), b = make_param();
  SGD opt(std::vector<ParamGroup<SGDOptions>>{{{a}, {.lr = 0.1}}, {{b}, {.lr = 0.02}}});
  StepLR sched(opt, /*step_size=*/3, /*gamma=*/0.5);
  EXPECT_EQ(sched.last_epoch(), 0);
  for (int e = 0; e <= 10; ++e) {
    if (e > 0) sched.step();
    double f = std::pow(0.5, e / 3);
    ASSERT_EQ(sched.get_last_lr().size(), 2u);
    EXPECT_NEAR(sched.get_last_lr()[0], 0.1 * f, 1e-15) << e;
    EXPECT_NEAR(sched.get_last_lr()[1], 0.02 * f, 1e-15) << e;
    EXPECT_EQ(opt.lr(0), sched.get_last_lr()[0]);
  }
  EXPECT_EQ(sched.base_lrs(), (std::vector<double>{0.1, 0.02}));
  // Chainable, as in PyTorch: a manual change is kept and decayed at the next boundary.
  Tensor c = make_param();
  SGD opt_c({c}, {.lr = 1.0});
  StepLR chained(opt_c, 2, 0.1);
  chained.step();  // epoch 1
  opt_c.set_lr(0, 4.0);
  chained.step();  // epoch 2: 4.0 * 0.1
  EXPECT_NEAR(opt_c.lr(0), 0.4, 1e-15);
}

TEST(LRScheduler, CosineAnnealingSequenceMatchesClosedForm) {
  const double base = 0.1, eta_min = 0.001;
  const int T = 5;
  Tensor a = make_param();
  Adam opt({a}, {.lr = base});
  CosineAnnealingLR sched(opt, T, eta_min);
  for (int e = 0; e <= 3 * T + 2; ++e) {  // past T_max the cosine rises again, as in PyTorch
    if (e > 0) sched.step();
    double want = eta_min + (base - eta_min) * (1 + std::cos(std::numbers::pi * e / T)) / 2;
    EXPECT_NEAR(sched.get_last_lr()[0], want, 1e-14) << e;
    EXPECT_EQ(opt.lr(0), sched.get_last_lr()[0]);
  }
  EXPECT_EQ(sched.last_epoch(), 3 * T + 2);
  // The optimizer really uses the scheduled lr: one SGD step at epoch T moves by eta_min * g.
  Tensor p = make_param({1.0});
  SGD sgd({p}, {.lr = 1.0});
  CosineAnnealingLR to_min(sgd, 2, 0.25);
  to_min.step();
  to_min.step();
  p.set_grad(tensor({1.0}, kFloat64));
  sgd.step();
  EXPECT_NEAR(p.item<double>(), 0.75, 1e-15);
}

TEST(LRScheduler, ExponentialLinearAndLambdaSequences) {
  Tensor a = make_param(), b = make_param();
  auto two_groups = [&](double lr0, double lr1) {
    return std::make_unique<SGD>(std::vector<ParamGroup<SGDOptions>>{{{a}, {.lr = lr0}}, {{b}, {.lr = lr1}}});
  };
  auto exp_opt = two_groups(0.1, 0.02);
  ExponentialLR exponential(*exp_opt, 0.9);
  for (int e = 0; e <= 8; ++e) {
    if (e > 0) exponential.step();
    EXPECT_NEAR(exponential.get_last_lr()[0], 0.1 * std::pow(0.9, e), 1e-15) << e;
    EXPECT_NEAR(exp_opt->lr(1), 0.02 * std::pow(0.9, e), 1e-15) << e;
  }
  // A warm-up from a tenth of the lr to all of it over 4 epochs, then constant.
  auto lin_opt = two_groups(0.1, 0.02);
  LinearLR linear(*lin_opt, {.start_factor = 0.1, .end_factor = 1.0, .total_iters = 4});
  for (int e = 0; e <= 8; ++e) {
    if (e > 0) linear.step();
    const double factor = 0.1 + 0.9 * std::min(e, 4) / 4.0;
    EXPECT_NEAR(linear.get_last_lr()[0], 0.1 * factor, 1e-15) << e;
    EXPECT_NEAR(lin_opt->lr(1), 0.02 * factor, 1e-15) << e;
  }
  // And a cool-down to a quarter.
  auto cool_opt = two_groups(1.0, 1.0);
  LinearLR cool(*cool_opt, {.start_factor = 1.0, .end_factor = 0.25, .total_iters = 3});
  for (int e = 1; e <= 5; ++e) cool.step();
  EXPECT_NEAR(cool_opt->lr(0), 0.25, 1e-15);
  // One function per group, of the epoch.
  auto lambda_opt = two_groups(0.1, 0.02);
  LambdaLR lambda(*lambda_opt, std::vector<LambdaLR::Factor>{[](int64_t e) { return 1.0 / (e + 1); },
                                                             [](int64_t e) { return e % 2 ? 2.0 : 1.0; }});
  for (int e = 0; e <= 5; ++e) {
    if (e > 0) lambda.step();
    EXPECT_NEAR(lambda.get_last_lr()[0], 0.1 / (e + 1), 1e-15) << e;
    EXPECT_NEAR(lambda.get_last_lr()[1], e % 2 ? 0.04 : 0.02, 1e-15) << e;
  }
  expect_error([&] { LambdaLR(*lambda_opt, [](int64_t e) { return e >= 1 ? std::nan("") : 1.0; }).step(); },
               {"[LambdaLR] the function of group 0 returned nan for epoch 1"});
}

// ReduceLROnPlateau against a hand trace: patience 2, factor 0.5, cooldown 1, a floor of 0.2.
TEST(LRScheduler, ReduceLROnPlateauCutsAfterPatienceWithCooldownAndFloor) {
  Tensor a = make_param();
  SGD opt({a}, {.lr = 1.0});
  ReduceLROnPlateau plateau(opt, {.factor = 0.5, .patience = 2, .threshold = 0.1, .cooldown = 1, .min_lr = {0.2}});
  const std::vector<double> metrics = {10, 9, 9.5, 9.2, 9.1, 8.0, 8.5, 8.4, 8.3, 8.2, 8.1, 8.0, 7.9, 7.8, 7.7, 7.6, 7.5};
  const std::vector<double> lrs = {1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2, 0.2};
  for (size_t e = 0; e < metrics.size(); ++e) {
    plateau.step(metrics[e]);
    EXPECT_NEAR(opt.lr(0), lrs[e], 1e-15) << "epoch " << e + 1;
    EXPECT_EQ(plateau.get_last_lr()[0], opt.lr(0));
  }
  EXPECT_EQ(plateau.best(), 8.0);
  EXPECT_EQ(plateau.last_epoch(), 17);
  // Higher is better, by an absolute margin: gains under 0.05 are bad epochs.
  Tensor b = make_param();
  SGD acc_opt({b}, {.lr = 0.1});
  ReduceLROnPlateau on_accuracy(acc_opt, {.maximize = true, .patience = 1, .threshold = 0.05, .relative_threshold = false});
  for (double accuracy : {0.5, 0.6, 0.62, 0.64}) on_accuracy.step(accuracy);
  EXPECT_NEAR(acc_opt.lr(0), 0.01, 1e-15);
  expect_error([&] { ReduceLROnPlateau(opt, {.factor = 1.0}); }, {"[ReduceLROnPlateau] expected factor in [0, 1), got 1"});
  expect_error([&] { ReduceLROnPlateau(opt, {.min_lr = {0.1, 0.2}}); },
               {"expected one min_lr or one per parameter group (1), got 2"});
}

TEST(LRScheduler, OneCycleRisesThenAnnealsAndCyclesTheMomentum) {
  // max_lr 1 over 10 steps: warm-up ends at step 0.3 * 10 - 1 = 2, the cycle at step 9.
  Tensor a = make_param();
  SGD sgd({a}, {.lr = 0.5, .momentum = 0.9});
  OneCycleLR cycle(sgd, {.max_lr = {1.0}, .total_steps = 10});
  const double initial = 1.0 / 25, minimum = initial / 1e4;
  auto cosine = [](double from, double to, double pct) {
    return to + (from - to) / 2 * (1 + std::cos(std::numbers::pi * pct));
  };
  for (int step = 0; step <= 9; ++step) {
    if (step > 0) cycle.step();
    const bool warming = step <= 2;
    const double pct = warming ? step / 2.0 : (step - 2) / 7.0;
    EXPECT_NEAR(sgd.lr(0), warming ? cosine(initial, 1.0, pct) : cosine(1.0, minimum, pct), 1e-12) << step;
    EXPECT_NEAR(*sgd.momentum(0), warming ? cosine(0.95, 0.85, pct) : cosine(0.85, 0.95, pct), 1e-12) << step;
  }
  EXPECT_NEAR(sgd.lr(0), minimum, 1e-15);
  EXPECT_EQ(cycle.base_lrs(), std::vector<double>{initial});
  cycle.step();  // step 10 = total_steps is allowed, as in PyTorch; one more is not
  expect_error([&] { cycle.step(); }, {"[OneCycleLR] stepped 11 times, past the cycle's 10 steps"});
  // Adam's beta1 is its momentum; three phases come back to the initial lr at step 4; linear.
  Tensor b = make_param();
  Adam adam({b}, {.lr = 0.1});
  OneCycleLR three(adam, {.max_lr = {2.0}, .total_steps = 10, .cosine = false, .three_phase = true});
  EXPECT_NEAR(adam.param_groups()[0].options.betas.first, 0.95, 1e-15);
  three.step();
  EXPECT_NEAR(adam.lr(0), 0.08 + (2.0 - 0.08) * 0.5, 1e-12);
  for (int step = 2; step <= 4; ++step) three.step();
  EXPECT_NEAR(adam.lr(0), 0.08, 1e-12);
  EXPECT_NEAR(*adam.momentum(0), 0.95, 1e-12);
  // Without a momentum to cycle, say so.
  Tensor c = make_param();
  Adagrad adagrad({c});
  expect_error([&] { OneCycleLR(adagrad, {.max_lr = {0.1}, .total_steps = 5}); },
               {"[OneCycleLR] Adagrad has no momentum to cycle. Fix: set cycle_momentum = false"});
  OneCycleLR no_momentum(adagrad, {.max_lr = {0.1}, .epochs = 2, .steps_per_epoch = 3, .cycle_momentum = false});
  EXPECT_EQ(no_momentum.total_steps(), 6);
  expect_error([&] { OneCycleLR(adagrad, {.max_lr = {0.1}}); }, {"[OneCycleLR] expected total_steps > 0"});
}

TEST(LRScheduler, SequentialHandsOverAtMilestonesFromTheInitialLr) {
  Tensor a = make_param();
  SGD opt({a}, {.lr = 1.0});
  LinearLR warmup(opt, {.start_factor = 0.1, .end_factor = 1.0, .total_iters = 2});
  ExponentialLR decay(opt, 0.5);  // built after warmup lowered the lr: starts from 1.0 still
  EXPECT_EQ(decay.base_lrs(), std::vector<double>{1.0});
  SequentialLR sched(opt, {&warmup, &decay}, {3});
  const std::vector<double> want = {0.1, 0.55, 1.0, 1.0, 0.5, 0.25};
  for (size_t e = 0; e < want.size(); ++e) {
    if (e > 0) sched.step();
    EXPECT_NEAR(opt.lr(0), want[e], 1e-12) << "epoch " << e;
    EXPECT_EQ(sched.get_last_lr()[0], opt.lr(0));
  }
  expect_error([&] { SequentialLR(opt, {&warmup, &decay}, {}); },
               {"[SequentialLR] expected one milestone fewer than schedulers, got 2 scheduler(s) and 0"});
  SGD other({make_param()}, {.lr = 1.0});
  StepLR elsewhere(other, 2);
  expect_error([&] { SequentialLR(opt, {&warmup, &elsewhere}, {2}); }, {"scheduler 1 is null or drives another optimizer"});
}

TEST(LRScheduler, Errors) {
  Tensor a = make_param();
  SGD opt({a}, {.lr = 0.1});
  expect_error([&] { StepLR(opt, 0); }, {"[StepLR] expected step_size >= 1", "got 0"});
  expect_error([&] { CosineAnnealingLR(opt, 0); }, {"[CosineAnnealingLR] expected T_max >= 1"});
  expect_error([&] { ExponentialLR(opt, 0); }, {"[ExponentialLR] expected gamma > 0, got 0"});
  expect_error([&] { LinearLR(opt, {.start_factor = 0}); }, {"[LinearLR] expected start_factor in (0, 1]"});
  expect_error([&] { LinearLR(opt, {.total_iters = -1}); }, {"[LinearLR] expected total_iters >= 0"});
  expect_error([&] { LambdaLR(opt, std::vector<LambdaLR::Factor>{}); },
               {"[LambdaLR] expected one function per parameter group (1), got 0"});
  StepLR sched(opt, 2);
  opt.add_param_group({make_param()});
  expect_error([&] { sched.step(); }, {"has 2 parameter group(s)", "built when it had 1"});
}

// ---------------------------------------------------------------- gradient clipping

TEST(ClipGrad, NormValuesAndScaling) {
  namespace U = kiln::nn::utils;
  auto setup = [](Tensor& a, Tensor& b, Tensor& none) {
    a = make_param({0.0, 0.0});
    b = make_param({0.0});
    none = make_param({0.0});
    a.set_grad(tensor({3.0, -4.0}, kFloat64));
    b.set_grad(tensor({12.0}, kFloat64));
  };
  Tensor a, b, none;
  setup(a, b, none);
  // L2 over all gradients: sqrt(9 + 16 + 144) = 13; clip to 6.5 halves them (up to 1e-6).
  double total = U::clip_grad_norm_({a, b, none}, 6.5);
  EXPECT_DOUBLE_EQ(total, 13.0);
  double coef = 6.5 / (13.0 + 1e-6);
  expect_close(a.grad().to_vector<double>(), {3 * coef, -4 * coef}, 1e-15, "l2 a");
  expect_close(b.grad().to_vector<double>(), {12 * coef}, 1e-15, "l2 b");
  EXPECT_FALSE(none.grad().defined());
  // Below the limit: unchanged.
  setup(a, b, none);
  EXPECT_DOUBLE_EQ(U::clip_grad_norm_({a, b}, 100.0), 13.0);
  expect_close(a.grad().to_vector<double>(), {3, -4}, 0, "unclipped");
  // L1 and inf norms.
  setup(a, b, none);
  EXPECT_DOUBLE_EQ(U::clip_grad_norm_({a, b}, 1.0, 1.0), 19.0);
  expect_close(b.grad().to_vector<double>(), {12.0 / (19.0 + 1e-6)}, 1e-15, "l1");
  setup(a, b, none);
  EXPECT_DOUBLE_EQ(U::clip_grad_norm_({a, b}, 6.0, INFINITY), 12.0);
  expect_close(a.grad().to_vector<double>(), {3 * 6 / (12 + 1e-6), -4 * 6 / (12 + 1e-6)}, 1e-15,
               "inf");
  // p = 3 over elements: (27 + 64 + 1728)^(1/3).
  setup(a, b, none);
  EXPECT_NEAR(U::clip_grad_norm_({a, b}, 100.0, 3.0), std::cbrt(1819.0), 1e-12);
  // No gradients: 0.
  EXPECT_EQ(U::clip_grad_norm_({none}, 1.0), 0.0);
}

TEST(ClipGrad, NonFiniteAndErrors) {
  namespace U = kiln::nn::utils;
  Tensor a = make_param({0.0, 0.0});
  a.set_grad(tensor({1.0, std::nan("")}, kFloat64));
  expect_error(
      [&] { U::clip_grad_norm_({a}, 1.0, 2.0, /*error_if_nonfinite=*/true); },
      {"[clip_grad_norm_] the total norm of order 2", "nan", "error_if_nonfinite = false"});
  EXPECT_TRUE(std::isnan(U::clip_grad_norm_({a}, 1.0)));
  EXPECT_TRUE(std::isnan(a.grad().to_vector<double>()[0]));  // scaled by nan, as PyTorch
  a.set_grad(tensor({1.0, INFINITY}, kFloat64));
  expect_error([&] { U::clip_grad_norm_({a}, 1.0, INFINITY, true); }, {"inf"});
  expect_error([&] { U::clip_grad_norm_({a}, -1.0); }, {"expected max_norm >= 0"});
  expect_error([&] { U::clip_grad_norm_({a}, 1.0, -2.0); }, {"expected norm_type >= 0"});
  expect_error([&] { U::clip_grad_value_({a}, -1.0); }, {"expected clip_value >= 0"});
}

TEST(ClipGrad, ValueClampsEveryElement) {
  Tensor a = make_param({0.0, 0.0, 0.0}), b = make_param({0.0});
  a.set_grad(tensor({-3.0, 0.5, 2.0}, kFloat64));
  nn::utils::clip_grad_value_({a, b}, 1.0);
  expect_close(a.grad().to_vector<double>(), {-1.0, 0.5, 1.0}, 0, "clamped");
  EXPECT_FALSE(b.grad().defined());
}

// ---------------------------------------------------------------- end to end

// Fits y = 3x + 2 (+ small noise) by full-batch gradient descent on the mean squared error.
template <class Opt, class Options>
std::pair<double, double> fit_line(const Options& o, int steps) {
  Generator gen(1234);
  Tensor x = randn({256}, kFloat32, &gen);
  Tensor y = x * 3.0 + 2.0 + randn({256}, kFloat32, &gen) * 0.01;
  Tensor w = zeros({1});
  Tensor b = zeros({1});
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  Opt opt({w, b}, o);
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor loss = square(x * w + b - y).mean();
    loss.backward();
    opt.step();
  }
  return {w.item<double>(), b.item<double>()};
}

TEST(Optim, FitsLinearRegression) {
  auto [w_sgd, b_sgd] = fit_line<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9}, 300);
  EXPECT_NEAR(w_sgd, 3.0, 1e-2);
  EXPECT_NEAR(b_sgd, 2.0, 1e-2);
  auto [w_adam, b_adam] = fit_line<Adam>(AdamOptions{.lr = 0.05}, 800);
  EXPECT_NEAR(w_adam, 3.0, 1e-2);
  EXPECT_NEAR(b_adam, 2.0, 1e-2);
}

TEST(Optim, FitStopsAtANonFiniteLossBeforeItsStep) {
  manual_seed(0);
  auto model = models::build(models::FashionMLPConfig{.d_in = 4, .d_hidden = 8, .d_out = 3});
  optim::SGD sgd(model->parameters(), {.lr = 0.1});
  Tensor images = randn({8, 4});
  Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1});
  // A weight that already diverged: the first loss is not finite.
  Tensor last = model->named_parameters().back().second;
  {
    NoGradGuard no_grad;
    last.view({-1}).narrow(0, 0, 1).fill_(std::numeric_limits<double>::infinity());
  }
  Tensor first = model->named_parameters().front().second.clone();
  expect_error([&] { models::fit(*model, sgd, images, labels, {.batch_size = 4}); },
               {"[fit] the loss became ", " at epoch 1, step 1 of 2 (SGD, learning rate 0.1)",
                "training diverged", "Fix: lower the learning rate"});
  // No step ran: the other weights are as they were.
  EXPECT_EQ(model->named_parameters().front().second.to_vector<float>(), first.to_vector<float>());
}

}  // namespace
}  // namespace kiln
