// kiln::cond, while_loop, fori_loop and scan: eager semantics and gradients, one graph with
// region nodes when traced (verified, round-tripped, run by interp == eager), captures of
// outer tensors and parameters, and the signature errors.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

bool same(const Tensor& a, const Tensor& b) {
  return Shape(a.sizes()) == Shape(b.sizes()) && a.to_vector<double>() == b.to_vector<double>();
}

void expect_one_verified_graph(const ir::Graph& g, const char* op) {
  ir::verify(g);
  std::string text = ir::print_graph(g);
  EXPECT_EQ(ir::print_graph(*ir::parse_graph(text)), text);
  EXPECT_NE(text.find(std::string(" = ") + op + "("), std::string::npos) << text;
}

// HalvingMLP rewritten with while_loop: one graph, no break.
struct HalvingWhile : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  Tensor forward(const Tensor& x) override {
    Tensor X = fc(x);
    return while_loop([](const TensorList& c) { return abs(c[0]).sum() > 1; },
                      [](const TensorList& c) { return TensorList{c[0] / 2}; }, {X})[0];
  }
};

TEST(ControlFlow, WhileLoopCompilesToOneGraphThatMatchesEager) {
  auto model = std::make_shared<HalvingWhile>();
  auto graph = trace(*model, randn({2, 4}));
  expect_one_verified_graph(*graph, "while_loop");
  auto compiled = compile(model, {.fullgraph = true});
  for (double scale : {0.01, 1.0, 100.0}) {
    Tensor x = randn({2, 4}) * scale;
    Tensor want = (*model)(x);
    EXPECT_TRUE(same(compiled(x), want)) << scale;
    EXPECT_LE(abs(want).sum().item<double>(), 1.0);
  }
  EXPECT_EQ(explain(compiled).graph_count(), 1u);
}

struct Branchy : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  Tensor forward(const Tensor& x) override {
    Tensor h = fc(x);
    // The false branch reads a parameter and an outer tensor: both become captures.
    return cond(
        h.sum() > 0, [](const TensorList& o) { return TensorList{o[0].relu() * 2}; },
        [&](const TensorList& o) { return TensorList{o[0] * fc->weight.sum() + x}; }, {h})[0];
  }
};

TEST(ControlFlow, CondTakesEitherBranchInOneGraph) {
  auto model = std::make_shared<Branchy>();
  auto compiled = compile(model, {.fullgraph = true});
  Tensor pos = Tensor::from_vector<float>({5, 5, 5, 5, 5, 5}, {2, 3});
  Tensor neg = pos * -1;
  for (const Tensor& x : {pos, neg, pos}) EXPECT_TRUE(same(compiled(x), (*model)(x)));
  EXPECT_EQ(explain(compiled).graph_count(), 1u);
  auto graph = trace(*model, pos);
  expect_one_verified_graph(*graph, "cond");
}

TEST(ControlFlow, CondGradientsFlowEagerlyAndThroughTheCompiledGraph) {
  auto model = std::make_shared<Branchy>();
  Tensor x = randn({2, 3});
  (*model)(x).sum().backward();
  Tensor eager_grad = model->fc->weight.grad().clone();
  model->zero_grad();
  auto compiled = compile(model);
  compiled(x).sum().backward();
  EXPECT_TRUE(same(model->fc->weight.grad(), eager_grad));
}

struct PowerSum : nn::Module {
  Tensor forward(const Tensor& x) override {
    return fori_loop(
        0, 4,
        [&](const Tensor& i, const TensorList& c) { return TensorList{c[0] + x * i.to(kFloat32)}; },
        {zeros_like(x)})[0];
  }
};

TEST(ControlFlow, ForiLoopRunsStaticBoundsAndIsDifferentiable) {
  auto model = std::make_shared<PowerSum>();
  Tensor x = randn({3}).requires_grad_();
  Tensor y = (*model)(x);
  EXPECT_TRUE(same(y, x * 6));
  y.sum().backward();
  EXPECT_TRUE(same(x.grad(), full({3}, 6.0)));
  auto compiled = compile(model, {.fullgraph = true});
  Tensor x2 = randn({3});
  EXPECT_TRUE(same(compiled(x2), (*model)(x2)));
  expect_one_verified_graph(*trace(*model, x2), "fori_loop");
}

struct Rnn : nn::Module {
  nn::ModulePtr<nn::Linear> cell = register_module("cell", std::make_shared<nn::Linear>(4, 4));
  Tensor forward(const Tensor& xs) override {
    auto [carry, ys] = scan(
        [&](const TensorList& h, const TensorList& x) {
          Tensor next = tanh(cell(h[0]) + x[0]);
          return std::pair<TensorList, TensorList>{{next}, {next * 2}};
        },
        {zeros({2, 4})}, {xs});
    return ys[0].sum({0}) + carry[0];
  }
};

TEST(ControlFlow, ScanThreadsACarryAndStacksItsOutputs) {
  auto model = std::make_shared<Rnn>();
  Tensor xs = randn({5, 2, 4});
  Tensor want = (*model)(xs);
  auto compiled = compile(model, {.fullgraph = true});
  EXPECT_TRUE(same(compiled(xs), want));
  auto graph = trace(*model, xs);
  expect_one_verified_graph(*graph, "scan");
  // The cell's parameters are read inside the body: captured through the region.
  EXPECT_NE(ir::print_graph(*graph).find("cell.weight"), std::string::npos);
  // Gradients through the compiled scan equal eager ones.
  model->zero_grad();
  (*model)(xs).sum().backward();
  Tensor eager_grad = model->cell->weight.grad().clone();
  model->zero_grad();
  compiled(xs).sum().backward();
  EXPECT_TRUE(same(model->cell->weight.grad(), eager_grad));
}

// A running sum from the end: ys[t] = xs[t] + ... + xs[T-1], the carry their total.
struct SuffixSum : nn::Module {
  Tensor forward(const Tensor& xs) override {
    auto [carry, ys] = scan(
        [](const TensorList& c, const TensorList& x) {
          Tensor next = c[0] + x[0];
          return std::pair<TensorList, TensorList>{{next}, {next * 1}};
        },
        {zeros({xs.size(1)})}, {xs}, {.reverse = true});
    return ys[0] + carry[0];
  }
};

TEST(ControlFlow, ReverseScanStepsFromTheLastSliceAndKeepsYsInPlace) {
  auto model = std::make_shared<SuffixSum>();
  Tensor xs = tensor({1.0, 2.0, 3.0, 4.0}).reshape({4, 1}).requires_grad_(true);
  // suffix sums 10, 9, 7, 4, plus the total 10.
  Tensor eager = (*model)(xs);
  EXPECT_EQ(eager.to_vector<double>(), (std::vector<double>{20, 19, 17, 14}));
  auto graph = trace(*model, xs);
  expect_one_verified_graph(*graph, "scan");
  EXPECT_NE(ir::print_graph(*graph).find("reverse=true"), std::string::npos);
  auto compiled = compile(model, {.fullgraph = true});
  Tensor y = compiled(xs);
  EXPECT_TRUE(same(y, eager));
  // y[3] = xs[3] + the total: gradient 1 everywhere, 2 at xs[3].
  (y * tensor({0.0, 0.0, 0.0, 1.0}).reshape({4, 1})).sum().backward();
  EXPECT_EQ(xs.grad().to_vector<double>(), (std::vector<double>{1, 1, 1, 2}));
}

struct MismatchedBranches : nn::Module {
  Tensor forward(const Tensor& x) override {
    return cond(
        x.sum() > 0, [](const TensorList& o) { return TensorList{o[0]}; },
        [](const TensorList& o) { return TensorList{o[0].sum({0})}; }, {x})[0];
  }
};

struct Outer : nn::Module {
  nn::ModulePtr<MismatchedBranches> inner =
      register_module("inner", std::make_shared<MismatchedBranches>());
  Tensor forward(const Tensor& x) override { return inner(x); }
};

TEST(ControlFlow, SignatureMismatchesNameTheOutputTheTypesAndTheModule) {
  Outer model;
  expect_error(
      [&] {
        trace(model, randn({2, 3}));
      },
      {"[kiln::cond] output 0 is float32[3] in false_fn but float32[2, 3] in true_fn",
       "module inner"});
  auto grows = [](const TensorList& c) { return TensorList{cat({c[0], c[0]})}; };
  auto small = [](const TensorList& c) { return c[0].numel() < 100; };
  expect_error(
      [&] {
        while_loop([&](const TensorList& c) { return Tensor::scalar(small(c)); }, grows,
                   {ones({2})});
      },
      {"[kiln::while_loop] output 0 is float32[4] in body_fn but float32[2] in the carry"});
  expect_error(
      [] {
        cond(
            ones({2}), [](const TensorList& o) { return o; }, [](const TensorList& o) { return o; },
            {});
      },
      {"predicate must have one element"});
}

struct Leaky : nn::Module {
  Tensor forward(const Tensor& x) override {
    Tensor inside;
    cond(
        x.sum() > 0,
        [&](const TensorList& o) {
          inside = o[0] * 2;
          return o;
        },
        [](const TensorList& o) { return o; }, {x});
    return inside + 1;
  }
};

TEST(ControlFlow, ATensorMadeInsideABodyCannotBeUsedOutsideIt) {
  Leaky model;
  expect_error([&] { trace(model, randn({2})); },
               {"made inside a kiln control-flow body", "return it from the body"});
}

struct Nested : nn::Module {
  Tensor forward(const Tensor& x) override {
    return cond(
        x.sum() > 0,
        [](const TensorList& o) {
          return while_loop([](const TensorList& c) { return c[0].sum() < 100; },
                            [&](const TensorList& c) { return TensorList{c[0] + o[0]}; }, {o[0]});
        },
        [](const TensorList& o) { return TensorList{o[0] - 1}; }, {x})[0];
  }
};

TEST(ControlFlow, RegionsNestAndCaptureThroughEachLevel) {
  auto model = std::make_shared<Nested>();
  auto compiled = compile(model, {.fullgraph = true});
  for (const Tensor& x : {full({2}, 3.0), full({2}, -3.0)})
    EXPECT_TRUE(same(compiled(x), (*model)(x)));
  expect_one_verified_graph(*trace(*model, full({2}, 3.0)), "cond");
}

}  // namespace
}  // namespace kiln
