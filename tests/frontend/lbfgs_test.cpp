// LBFGS against PyTorch's torch.optim.LBFGS (trajectories in tests/data/parity/lbfgs_*.safetensors,
// written by make_lbfgs.py), and its closure, state and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "kiln/kiln.h"
#include "kiln/serialize/safetensors.h"
#include "test_util.h"

namespace kiln {
namespace {

using optim::LBFGS;
using optim::LBFGSOptions;

SafetensorsFile trajectory(const std::string& name) {
  const char* dir = std::getenv("KILN_TEST_DATA");
  return load_safetensors(std::string(dir ? dir : "tests/data") + "/parity/lbfgs_" + name + ".safetensors");
}

const Tensor& entry(const SafetensorsFile& file, const std::string& key) {
  const Tensor* t = file.find(key);
  if (t == nullptr) throw std::runtime_error("no tensor " + key);
  return *t;
}

double max_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(Shape(got.sizes()), Shape(want.sizes()));
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double err = 0;
  for (size_t i = 0; i < g.size(); ++i) err = std::max(err, std::abs(g[i] - w[i]));
  return err;
}

Tensor rosenbrock(const Tensor& xy) {
  const Tensor x = xy.select(0, 0), y = xy.select(0, 1);
  return (1 - x).pow(2) + 100 * (y - x.pow(2)).pow(2);
}

// Runs the file's steps through kiln's LBFGS and compares each step's loss and parameters,
// and the counters at the end.
void check_trajectory(const std::string& name, const std::vector<std::string>& names,
                      const std::function<Tensor(const std::vector<Tensor>&)>& loss_of, LBFGSOptions options,
                      double tolerance) {
  const SafetensorsFile file = trajectory(name);
  std::vector<Tensor> params;
  for (const std::string& n : names) params.push_back(entry(file, "param." + n).clone().requires_grad_(true));
  LBFGS opt(params, options);
  int steps = 0;
  for (; file.find("step." + std::to_string(steps) + ".loss"); ++steps) {
    const std::string at = "step." + std::to_string(steps) + ".";
    const Tensor loss = opt.step([&] {
      opt.zero_grad();
      Tensor l = loss_of(params);
      l.backward();
      return l;
    });
    EXPECT_LE(max_error(loss, entry(file, at + "loss")), tolerance) << name << " " << at << "loss";
    for (size_t i = 0; i < names.size(); ++i)
      EXPECT_LE(max_error(params[i], entry(file, at + names[i])), tolerance) << name << " " << at << names[i];
  }
  EXPECT_EQ(steps, 4);
  const optim::ParamState* s = opt.state(params[0]);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->scalars.at("func_evals"), entry(file, "state.func_evals").item<double>()) << name;
  EXPECT_EQ(s->scalars.at("n_iter"), entry(file, "state.n_iter").item<double>()) << name;
}

Tensor regression_loss(const SafetensorsFile& file, const std::vector<Tensor>& p) {
  const Tensor& x = entry(file, "data.x");
  const Tensor& y = entry(file, "data.y");
  return (tanh(matmul(x, p[0]) + p[1]).matmul(p[2]) - y).pow(2).mean();
}

TEST(LBFGS, StrongWolfeFollowsPyTorchOnRosenbrock) {
  check_trajectory("rosenbrock_wolfe", {"xy"}, [](const std::vector<Tensor>& p) { return rosenbrock(p[0]); },
                   {.lr = 1, .max_iter = 20, .history_size = 10, .line_search_fn = "strong_wolfe"}, 1e-9);
}

TEST(LBFGS, FixedStepsFollowPyTorchWithAShortHistory) {
  const SafetensorsFile file = trajectory("regression_fixed_step");
  check_trajectory("regression_fixed_step", {"w", "b", "v"},
                   [&](const std::vector<Tensor>& p) { return regression_loss(file, p); },
                   {.lr = 0.5, .max_iter = 5, .history_size = 3}, 1e-9);
}

TEST(LBFGS, StrongWolfeFollowsPyTorchOnAModel) {
  const SafetensorsFile file = trajectory("regression_wolfe");
  check_trajectory("regression_wolfe", {"w", "b", "v"},
                   [&](const std::vector<Tensor>& p) { return regression_loss(file, p); },
                   {.lr = 1, .max_iter = 6, .history_size = 3, .line_search_fn = "strong_wolfe"}, 1e-9);
}

TEST(LBFGS, StateDictResumesTheSameTrajectory) {
  auto make = [] { return Tensor::from_vector<double>({-1.2, 1.0}, {2}).requires_grad_(true); };
  const LBFGSOptions options{.max_iter = 3, .history_size = 4, .line_search_fn = "strong_wolfe"};
  auto run = [](LBFGS& opt, Tensor& xy, int steps) {
    for (int i = 0; i < steps; ++i)
      opt.step([&] {
        opt.zero_grad();
        Tensor l = rosenbrock(xy);
        l.backward();
        return l;
      });
  };
  Tensor straight = make();
  LBFGS through(std::vector<Tensor>{straight}, options);
  run(through, straight, 4);

  Tensor resumed = make();
  optim::OptimizerStateDict saved;
  {
    LBFGS first(std::vector<Tensor>{resumed}, options);
    run(first, resumed, 2);
    saved = first.state_dict();
  }
  EXPECT_TRUE(saved.count("state.0.old_dirs.0") && saved.count("state.0.ro.0") && saved.count("state.0.d"));
  LBFGS second(std::vector<Tensor>{resumed}, options);
  second.load_state_dict(saved);
  run(second, resumed, 2);
  EXPECT_EQ(resumed.to_vector<double>(), straight.to_vector<double>());
}

TEST(LBFGS, HistoryIsFlatOverEveryParameter) {
  Tensor a = Tensor::from_vector<double>({1, 2, 3}, {3}).requires_grad_(true);
  Tensor b = Tensor::from_vector<double>({-1, 0.5}, {2, 1}).requires_grad_(true);
  LBFGS opt({a, b}, {.max_iter = 4});
  opt.step([&] {
    opt.zero_grad();
    Tensor l = (a * a).sum() + (b * b * 3).sum();
    l.backward();
    return l;
  });
  optim::OptimizerStateDict sd = opt.state_dict();
  EXPECT_EQ(Shape(sd.at("state.0.d").sizes()), Shape({5}));
  EXPECT_EQ(Shape(sd.at("state.0.old_dirs.0").sizes()), Shape({5}));
  sd["state.0.d"] = zeros({3}, kFloat64);
  LBFGS other({a, b}, {.max_iter = 4});
  expect_error([&] { other.load_state_dict(sd); }, {"state.0.d", "[5]", "Fix:"});
}

TEST(LBFGS, ErrorsNameTheFix) {
  Tensor p = zeros({2}).requires_grad_(true);
  LBFGS opt(std::vector<Tensor>{p});
  expect_error([&] { opt.step(); }, {"[LBFGS] step() needs a closure", "Fix: opt.step("});
  expect_error([&] { opt.step([] { return zeros({2}); }); }, {"closure must return the loss", "[2]"});
  expect_error([&] { LBFGS bad(std::vector<Tensor>{p}, {.line_search_fn = "backtracking"}); },
               {"line_search_fn", "\"backtracking\"", "strong_wolfe"});
  expect_error([&] { LBFGS bad(std::vector<Tensor>{p}, {.history_size = 0}); }, {"history_size"});
  Tensor q = zeros({2}, kFloat64).requires_grad_(true);
  expect_error([&] { LBFGS mixed({p, q}); }, {"one dtype and device", "Fix:"});
}

}  // namespace
}  // namespace kiln
