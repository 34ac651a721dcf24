// kiln::trace and kiln::compile with the reference backend: graphs of real models, compiled
// == eager bitwise (also after optimizer steps), guards and their one-line recompile
// reasons, graph breaks, buffer write-back, dropout streams, the cache limit and captured
// constants.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/ops/debug_print.h"
#include "test_util.h"

namespace kiln {
namespace {

bool same(const Tensor& a, const Tensor& b) {
  if (!(Shape(a.sizes()) == Shape(b.sizes())) || a.dtype() != b.dtype()) return false;
  return a.to_vector<double>() == b.to_vector<double>();
}

// Captures KILN_LOG lines (all channels) for one test.
struct LogCapture {
  std::vector<std::pair<std::string, std::string>> lines;
  LogCapture() {
    set_log_channels("all");
    set_log_sink([this](std::string_view ch, std::string_view line) {
      lines.emplace_back(std::string(ch), std::string(line));
    });
  }
  ~LogCapture() {
    set_log_sink({});
    set_log_channels("");
  }
  std::vector<std::string> of(std::string_view channel) const {
    std::vector<std::string> out;
    for (const auto& [ch, line] : lines)
      if (ch == channel) out.push_back(line);
    return out;
  }
};

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

struct Mlp : nn::Module {
  nn::ModulePtr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 8));
  nn::ModulePtr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

TEST(Trace, RecordsOpsWithParametersAsNamedInputs) {
  Mlp model;
  auto graph = trace(model, randn({2, 6}));
  std::vector<std::string> names;
  for (const ir::GraphInput& in : graph->inputs()) names.push_back(in.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"x", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(graph->inputs()[1].kind, ir::InputKind::Parameter);
  ASSERT_EQ(graph->outputs().size(), 1u);
  EXPECT_EQ(graph->outputs()[0].value->type.shape, Shape({2, 3}));
  ir::verify(*graph);
  // Tracing and verifying read no location: resolving them means reading the debug line
  // tables, which only an error, a graph break or a printed graph needs.
  for (const auto& node : graph->nodes()) EXPECT_TRUE(node->loc.is_pending()) << node->op->name;
  // Every node knows its module and the user's line that led to it.
  bool saw_fc2 = false;
  for (const auto& node : graph->nodes()) {
    EXPECT_TRUE(node->loc.known()) << node->op->name;
    EXPECT_EQ(node->loc.file(), "tests/frontend/compile_test.cpp");
    saw_fc2 |= node->module_path == "fc2";
  }
  EXPECT_TRUE(saw_fc2);
  std::string text = ir::print_graph(*graph);
  EXPECT_EQ(ir::print_graph(*ir::parse_graph(text)), text);
}

TEST(Compile, MatchesEagerBitwiseAndFollowsOptimizerSteps) {
  manual_seed(0);
  auto model = std::make_shared<Mlp>();
  auto compiled = compile(model);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
  LogCapture log;
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({4, 6});
    Tensor eager = (*model)(x);
    Tensor fast = compiled(x);
    EXPECT_TRUE(same(eager, fast)) << "step " << step;
    // Backward through the compiled call trains the live parameters.
    opt.zero_grad();
    fast.sum().backward();
    ASSERT_TRUE(model->fc1->weight.grad().defined());
    opt.step();
  }
  EXPECT_TRUE(log.of("recompiles").empty());
  ExplainReport report = explain(compiled);
  EXPECT_EQ(report.graph_count(), 1u);
  EXPECT_EQ(report.calls, 3u);
}

TEST(Compile, RecompileOnANewBatchSizeSaysWhichDimChanged) {
  auto model = std::make_shared<Mlp>();
  auto compiled = compile(model);
  LogCapture log;
  compiled(randn({2, 6}));
  compiled(randn({4, 6}));
  compiled(randn({2, 6}));  // cached: no third trace
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("recompile 2/8 of Mlp: input x dim 0: 2 -> 4"), std::string::npos)
      << lines[0];
  EXPECT_EQ(explain(compiled).graph_count(), 2u);
}

TEST(Compile, EachGuardKindExplainsItself) {
  auto model = std::make_shared<Mlp>();
  auto compiled = compile(model);
  LogCapture log;
  Tensor x = randn({2, 6});
  compiled(x);
  auto last = [&] {
    auto lines = log.of("recompiles");
    return lines.empty() ? std::string() : lines.back();
  };
  compiled(x.to(kFloat64));
  EXPECT_NE(last().find("input x dtype: float32 -> float64"), std::string::npos) << last();
  model->eval();
  compiled(x);
  EXPECT_NE(last().find("training (every module): true -> false"), std::string::npos) << last();
  model->fc1->train();
  compiled(x);
  EXPECT_NE(last().find("of Mlp: fc1 training: false -> true"), std::string::npos) << last();
  {
    NoGradGuard no_grad;
    compiled(x);
  }
  EXPECT_NE(last().find("grad mode: true -> false"), std::string::npos) << last();
  compiled(randn({2, 6}).requires_grad_());
  EXPECT_NE(last().find("input x requires_grad: false -> true"), std::string::npos) << last();
  model->fc2->bias.set_requires_grad(false);
  compiled(x);
  EXPECT_NE(last().find("fc2.bias requires_grad: true -> false"), std::string::npos) << last();
}

struct Scaled : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  Tensor forward(const Tensor& x, double scale) { return fc(x) * scale; }
};

TEST(Compile, NonTensorArgumentsAreGuardedByValue) {
  auto model = std::make_shared<Scaled>();
  auto compiled = compile(model);
  LogCapture log;
  Tensor x = randn({2, 3});
  EXPECT_TRUE(same(compiled(x, 2.0), nn::call(*model, x, 2.0)));
  EXPECT_TRUE(same(compiled(x, 3.0), nn::call(*model, x, 3.0)));
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("argument 1 (not a tensor): 2 -> 3"), std::string::npos) << lines[0];
}

// The seeds' HalvingMLP: a loop on a tensor value.
struct HalvingMLP : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  int loop_line = 0;
  Tensor forward(const Tensor& x) override {
    Tensor X = fc(x);
    loop_line = __LINE__ + 1;
    while (abs(X).sum() > 1) X = X / 2;
    return X;
  }
};

TEST(Compile, FullgraphNamesTheLineOfADataDependentLoop) {
  auto model = std::make_shared<HalvingMLP>();
  auto compiled = compile(model, {.fullgraph = true});
  std::string msg = error_of([&] { compiled(randn({2, 4})); });
  EXPECT_NE(msg.find("graph break in HalvingMLP"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a conversion to bool"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tests/frontend/compile_test.cpp:" + std::to_string(model->loop_line)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("depends on the input data"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kiln::while_loop"), std::string::npos) << msg;
}

TEST(Compile, WithoutFullgraphABreakRunsInSegmentsThatMatchEager) {
  auto model = std::make_shared<HalvingMLP>();
  auto compiled = compile(model);
  LogCapture log;
  for (double scale : {10.0, 10.0, 1000.0, 0.001}) {
    Tensor x = randn({2, 4}) * scale;
    Tensor got = compiled(x), want = (*model)(x);
    EXPECT_TRUE(same(got, want)) << scale;
    EXPECT_FALSE(got.is_symbolic());
  }
  ExplainReport r = explain(compiled);
  ASSERT_EQ(r.graph_break_count(), 1u);
  EXPECT_EQ(log.of("graph_breaks").size(), 1u);  // logged when found, not on every call
  const ExplainEntry& e = r.entries[0];
  EXPECT_EQ(e.calls, 4u);
  // The last call (tiny input) never halves: fc, the first test, and the empty tail.
  EXPECT_GE(e.segments, 1u);
  ASSERT_FALSE(e.breaks.empty());
  EXPECT_NE(e.breaks[0].find("a conversion to bool at tests/frontend/compile_test.cpp:" +
                             std::to_string(model->loop_line)),
            std::string::npos)
      << e.breaks[0];
  // Segments recur (the halving step is the same graph every iteration): compiled once.
  EXPECT_GT(e.segment_hits, e.segment_misses);
  EXPECT_NE(r.str().find("segments per call"), std::string::npos);
}

TEST(Compile, SegmentedResultsBackpropagateLikeEager) {
  auto model = std::make_shared<HalvingMLP>();
  auto compiled = compile(model);
  Tensor x = randn({2, 4}) * 5;
  (*model)(x).sum().backward();
  Tensor want = model->fc->weight.grad().clone();
  model->zero_grad();
  compiled(x);  // the first call finds the break
  compiled(x).sum().backward();
  EXPECT_TRUE(same(model->fc->weight.grad(), want));
}

// momentum=None BatchNorm reads num_batches_tracked on the host after updating it: a
// segment boundary, after which the read sees the updated buffer.
struct CumulativeBN : nn::Module {
  nn::ModulePtr<nn::BatchNorm1d> bn = register_module(
      "bn", std::make_shared<nn::BatchNorm1d>(3, nn::BatchNormOptions{.momentum = std::nullopt}));
  Tensor forward(const Tensor& x) override { return bn(x); }
};

TEST(Compile, ABufferReadAfterItsUpdateSeesTheNewValue) {
  auto eager = std::make_shared<CumulativeBN>();
  auto twin = std::make_shared<CumulativeBN>();
  auto compiled = compile(twin);
  for (int i = 0; i < 3; ++i) {
    Tensor x = randn({4, 3});
    EXPECT_TRUE(same(compiled(x), (*eager)(x))) << i;
  }
  EXPECT_TRUE(same(twin->bn->running_mean, eager->bn->running_mean));
  EXPECT_TRUE(same(twin->bn->running_var, eager->bn->running_var));
  EXPECT_EQ(twin->bn->num_batches_tracked.item<int64_t>(), 3);
  expect_error([&] { trace(*twin, randn({4, 3})); }, {"graph break", "module 'bn'"});
}

// The cpu backend: without gradients, the graph's fusion groups are listed and KILN_LOG=passes
// logs the pass timings and the graph after every pass; with them, the entry runs on interp
// and says why.
TEST(Compile, CpuBackendReportsItsPassesAndFallsBackForGradients) {
  auto model = std::make_shared<Mlp>();
  {
    LogCapture log;
    NoGradGuard no_grad;
    auto compiled = compile(model);
    compiled(randn({2, 6}));
    ExplainReport report = explain(compiled);
    ASSERT_EQ(report.entries.size(), 1u);
    EXPECT_EQ(report.entries[0].backend.rfind("cpu: passes", 0), 0u) << report.str();
    // A group takes the module of its last op (relu runs in the root module).
    EXPECT_EQ(report.entries[0].fusion_groups, (std::vector<std::string>{"add, relu", "add @fc2"}))
        << report.str();
    std::string passes;
    for (const std::string& line : log.of("passes")) passes += line + "\n";
    EXPECT_NE(passes.find("after fuse:\ngraph Mlp"), std::string::npos) << passes;
    EXPECT_NE(passes.find("Mlp: canonicalize"), std::string::npos) << passes;
  }
  auto compiled = compile(model);  // grad mode on, parameters require grad
  compiled(randn({2, 6}));
  ExplainReport report = explain(compiled);
  EXPECT_NE(report.entries.at(0).backend.find("interp, because gradients are needed (parameter "
                                              "fc1.weight requires grad"),
            std::string::npos)
      << report.str();
  EXPECT_TRUE(report.entries[0].fusion_groups.empty());
}

TEST(Compile, ExplainOnAModelAndInputsCompilesRunsAndReports) {
  auto model = std::make_shared<HalvingMLP>();
  testing::internal::CaptureStdout();
  ExplainReport r = explain(model, randn({2, 4}) * 8);
  std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_EQ(r.graph_break_count(), 1u);
  EXPECT_EQ(printed, r.str());
  EXPECT_NE(printed.find("compiled HalvingMLP (backend cpu): 0 graphs, 1 graph break"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("module"), std::string::npos);
}

struct Printing : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(2, 2));
  Tensor forward(const Tensor& x) override { return debug_print(fc(x), "hidden") * 2; }
};

TEST(Compile, DebugPrintPrintsOnEveryCompiledCall) {
  std::vector<std::string> lines;
  ops::set_debug_print_sink([&](std::string_view l) { lines.emplace_back(l); });
  auto model = std::make_shared<Printing>();
  auto compiled = compile(model, {.fullgraph = true});
  Tensor x = randn({1, 2});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same(compiled(x), (*model)(x)));
  ops::set_debug_print_sink({});
  ASSERT_EQ(lines.size(), 6u);  // three eager and three compiled calls
  EXPECT_EQ(lines[1].rfind("hidden: tensor(", 0), 0u) << lines[1];
  EXPECT_EQ(lines[0], lines[1]);
  EXPECT_EQ(explain(compiled).graph_count(), 1u);
}

struct ItemInForward : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(2, 2));
  int line = 0;
  Tensor forward(const Tensor& x) override {
    Tensor y = fc(x);
    line = __LINE__ + 1;
    double m = y.max().item<double>();
    return y - m;
  }
};

TEST(Compile, ItemNamesItsExactLineAndModule) {
  auto model = std::make_shared<ItemInForward>();
  std::string msg = error_of([&] { trace(*model, randn({3, 2})); });
  EXPECT_NE(msg.find("item() at tests/frontend/compile_test.cpp:" + std::to_string(model->line)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the root module"), std::string::npos) << msg;
  EXPECT_NE(msg.find("made by amax"), std::string::npos) << msg;
}

struct Net2 : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  nn::ModulePtr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
  nn::ModulePtr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
  Tensor forward(const Tensor& x) override { return drop(bn(fc(x))); }
};

TEST(Compile, TrainingModeBatchNormAndDropoutMatchEagerCallForCall) {
  manual_seed(7);
  auto eager = std::make_shared<Net2>();
  auto twin = std::make_shared<Net2>();
  twin->load_state_dict(eager->state_dict());
  auto compiled = compile(twin);
  std::vector<Tensor> xs;
  for (int i = 0; i < 4; ++i) xs.push_back(randn({5, 4}));
  // Same generator positions for both runs: reset the seed between them.
  manual_seed(11);
  std::vector<Tensor> eager_out;
  for (const Tensor& x : xs) eager_out.push_back((*eager)(x));
  manual_seed(11);
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_TRUE(same(compiled(xs[i]), eager_out[i])) << "call " << i;
  EXPECT_TRUE(same(twin->bn->running_mean, eager->bn->running_mean));
  EXPECT_TRUE(same(twin->bn->running_var, eager->bn->running_var));
  EXPECT_EQ(twin->bn->num_batches_tracked.item<int64_t>(), 4);
  EXPECT_EQ(explain(compiled).graph_count(), 1u);
}

TEST(Compile, TheCacheLimitWarnsOnceThenRunsEagerly) {
  auto model = std::make_shared<Mlp>();
  auto compiled = compile(model, {.cache_limit = 2, .dynamic = CompileOptions::Dynamic::Off});
  LogCapture log;
  for (int64_t b : {1, 2, 3, 4}) {
    Tensor x = randn({b, 6});
    EXPECT_TRUE(same(compiled(x), (*model)(x)));
  }
  auto warnings = log.of("warning");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cache limit (2) reached for Mlp: input x dim 0"), std::string::npos)
      << warnings[0];
  auto strict = compile(model, {.fullgraph = true, .cache_limit = 1});
  strict(randn({1, 6}));
  expect_error(
      [&] {
        strict(randn({2, 6}));
      },
      {"reached its cache limit (1 graphs)", "input x dim 0: 1 -> 2", "cache_limit"});
}

struct UsesConstant : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  Tensor offset = Tensor::from_vector<float>({1, 2, 3});
  Tensor trainable = Tensor::from_vector<float>({1, 1, 1}).requires_grad_();
  Tensor forward(const Tensor& x) override { return fc(x) + offset * trainable; }
};

TEST(Compile, CapturedConstantsAreListedAndTrainableOnesWarn) {
  auto model = std::make_shared<UsesConstant>();
  auto compiled = compile(model);
  LogCapture log;
  Tensor x = randn({2, 3});
  EXPECT_TRUE(same(compiled(x), (*model)(x)));
  ExplainReport r = explain(compiled);
  ASSERT_EQ(r.entries.size(), 1u);
  ASSERT_EQ(r.entries[0].captured.size(), 2u);
  EXPECT_NE(r.entries[0].captured[0].find("float32[3] read by mul in the root module"),
            std::string::npos)
      << r.entries[0].captured[0];
  auto warnings = log.of("warning");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("requires grad but is not a registered parameter"), std::string::npos);
  EXPECT_NE(r.str().find("captured constants"), std::string::npos);
}

struct WritesMember : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  Tensor count = zeros({1});
  Tensor forward(const Tensor& x) override {
    count.add_(1);
    return fc(x);
  }
};

TEST(Compile, InPlaceWritesIntoUnregisteredTensorsAreRefused) {
  auto model = std::make_shared<WritesMember>();
  expect_error(
      [&] {
        trace(*model, randn({2, 3}));
      },
      {"add_ in the root module writes in place into a tensor that is not a registered "
       "buffer",
       "register_buffer"});
}

TEST(Compile, BoolOfATensorFollowsPyTorch) {
  EXPECT_TRUE(static_cast<bool>(Tensor::from_vector<float>({2}) > 1));
  EXPECT_FALSE(static_cast<bool>(Tensor::from_vector<float>({0})));
  expect_error([] { (void)static_cast<bool>(zeros({2})); },
               {"truth value of a tensor with 2 elements is ambiguous"});
  expect_error([] { (void)static_cast<bool>(Tensor()); }, {"t.defined()"});
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

struct Flattener : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(12, 2));
  Tensor forward(const Tensor& x) override { return fc(x.reshape({x.size(0), -1})); }
};

TEST(CompileDynamic, AutoMakesAChangedDimSymbolicAfterOneRecompile) {
  auto model = std::make_shared<Flattener>();
  auto compiled = compile(model);
  LogCapture log;
  for (int64_t b : {2, 4, 8, 3, 16}) {
    Tensor x = randn({b, 3, 4});
    EXPECT_TRUE(same(compiled(x), (*model)(x))) << "batch " << b;
  }
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("input x dim 0: 2 -> 4 (compiled as a dynamic dim from now on; "
                          "kiln::mark_dynamic(x, 0) does so from the first call)"),
            std::string::npos)
      << lines[0];
  ExplainReport r = explain(compiled);
  ASSERT_EQ(r.graph_count(), 2u);
  EXPECT_NE(r.entries[1].graph_text.find("float32[s0, 3, 4]"), std::string::npos)
      << r.entries[1].graph_text;
  // reshape resolved -1 before dispatch: the view's attribute holds the symbol.
  EXPECT_NE(r.entries[1].graph_text.find("view(%0) {shape=[s0, 12]}"), std::string::npos)
      << r.entries[1].graph_text;
  EXPECT_EQ(r.entries[1].calls, 4u);
}

TEST(CompileDynamic, MarkDynamicCompilesOneGraphForEverySizeAboveOne) {
  auto model = std::make_shared<Flattener>();
  auto compiled = compile(model);
  LogCapture log;
  for (int64_t b : {3, 5, 7}) {
    Tensor x = mark_dynamic(randn({b, 3, 4}), 0);
    EXPECT_TRUE(same(compiled(x), (*model)(x)));
  }
  EXPECT_TRUE(log.of("recompiles").empty());
  Tensor one = mark_dynamic(randn({1, 3, 4}), 0);
  EXPECT_TRUE(same(compiled(one), (*model)(one)));
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("input x dim 0 (s0): 1 (a dynamic dim covers sizes >= 2"),
            std::string::npos)
      << lines[0];
  expect_error([] { mark_dynamic(zeros({2}), 3); }, {"mark_dynamic"});
}

TEST(CompileDynamic, OffRecompilesForEverySize) {
  auto model = std::make_shared<Flattener>();
  auto compiled = compile(model, {.dynamic = CompileOptions::Dynamic::Off});
  LogCapture log;
  for (int64_t b : {2, 3, 4}) compiled(mark_dynamic(randn({b, 3, 4}), 0));
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("dynamic=Off: each size compiles its own graph"), std::string::npos)
      << lines[1];
}

struct Pairwise : nn::Module {
  Tensor forward(const Tensor& a, const Tensor& b) { return a * 2 + b; }
};

TEST(CompileDynamic, EqualSizesShareASymbolAndAreGuardedTogether) {
  auto model = std::make_shared<Pairwise>();
  auto compiled = compile(model, {.dynamic = CompileOptions::Dynamic::On});
  LogCapture log;
  Tensor a = randn({3, 5}), b = randn({3, 5});
  EXPECT_TRUE(same(compiled(a, b), nn::call(*model, a, b)));
  Tensor c = randn({4, 6}), d = randn({4, 6});
  EXPECT_TRUE(same(compiled(c, d), nn::call(*model, c, d)));
  EXPECT_TRUE(log.of("recompiles").empty());
  ExplainReport r = explain(compiled);
  EXPECT_NE(r.entries[0].graph_text.find("float32[s0, s1]"), std::string::npos)
      << r.entries[0].graph_text;
}

TEST(CompileDynamic, OnKeepsTheBatchDynamicWhenALayerNeedsTheFeatureSize) {
  auto model = std::make_shared<Mlp>();
  auto compiled = compile(model, {.dynamic = CompileOptions::Dynamic::On});
  LogCapture log;
  for (int64_t b : {2, 3, 5}) {
    Tensor x = randn({b, 6});
    EXPECT_TRUE(same(compiled(x), (*model)(x)));
  }
  EXPECT_EQ(explain(compiled).graph_count(), 1u);
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("dims after the leading one compiled as static sizes: tracing with "
                          "symbolic sizes failed in [Linear]"),
            std::string::npos)
      << lines[0];
}

struct HalvesTheBatch : nn::Module {
  Tensor forward(const Tensor& x) override { return x.reshape({x.size(0) / 2, -1}); }
};

struct CountsPlusOne : nn::Module {
  Tensor forward(const Tensor& x) override { return zeros({x.size(0) + 1}); }
};

TEST(CompileDynamic, ASizeComputedOnTheHostFallsBackToStaticAndSaysWhy) {
  LogCapture log;
  // x.size(0) + 1 traces fine but differs between the two sentinel traces.
  auto plus = compile(std::make_shared<CountsPlusOne>(), {.dynamic = CompileOptions::Dynamic::On});
  EXPECT_EQ(plus(randn({4, 3})).size(0), 5);
  EXPECT_EQ(plus(randn({6, 3})).size(0), 7);
  auto lines = log.of("recompiles");
  // Dim 1 first goes static alone (the leading dim stays dynamic), then dim 0 too (and
  // again for the second size, which the static graph does not cover).
  ASSERT_GE(lines.size(), 2u);
  EXPECT_NE(lines[0].find("dims after the leading one compiled as static sizes: full at "
                          "tests/frontend/compile_test.cpp"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("dynamic dims compiled as static sizes: full at "
                          "tests/frontend/compile_test.cpp"),
            std::string::npos)
      << lines[1];
  // x.size(0) / 2 makes reshape's own check fail while tracing with a symbolic size.
  auto model = std::make_shared<HalvesTheBatch>();
  auto halves = compile(model, {.dynamic = CompileOptions::Dynamic::On});
  Tensor x = randn({4, 3});
  EXPECT_TRUE(same(halves(x), (*model)(x)));
  lines = log.of("recompiles");
  EXPECT_NE(lines.back().find("tracing with symbolic sizes failed in [reshape]"), std::string::npos)
      << lines.back();
}

TEST(CompileDynamic, ADimThatCouldNotStaySymbolicIsNotPromisedToBecomeDynamic) {
  LogCapture log;
  auto plus = compile(std::make_shared<CountsPlusOne>());  // dynamic = Auto
  for (int64_t n : {4, 6, 9}) EXPECT_EQ(plus(randn({n})).size(0), n + 1);
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 3u) << joined(lines);
  EXPECT_NE(lines[0].find("input x dim 0: 4 -> 6 (compiled as a dynamic dim from now on"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("dynamic dims compiled as static sizes"), std::string::npos) << lines[1];
  // The third size recompiles: the log says the dim stays static rather than promise again.
  EXPECT_NE(lines[2].find("input x dim 0: 4 -> 9 (this dim stays static: a trace with it "
                          "symbolic failed"),
            std::string::npos)
      << lines[2];
}

// The Hugging Face position pattern: a table of max_len positions sliced to the input's
// length (`pos[:, :x.size(1)]`). The slice keeps the length symbolic, bounded by the table.
struct Positions : nn::Module {
  Tensor pos = register_parameter("pos", randn({1, 8, 4}));
  Tensor ids = register_buffer("position_ids", arange(0, 8, 1, TensorOptions(DType::Int64)).unsqueeze(0));
  nn::ModulePtr<nn::Embedding> table =
      register_module("table", std::make_shared<nn::Embedding>(8, 4));
  int slice_line = 0;
  Tensor forward(const Tensor& x) override {
    int64_t t = x.size(1);
    slice_line = __LINE__ + 1;
    Tensor p = slice(pos, 1, 0, t);
    return x + p + table(ids.narrow(1, 0, t));
  }
};

TEST(CompileDynamic, SlicingATableByADynamicLengthStaysSymbolicUpToTheTable) {
  auto model = std::make_shared<Positions>();
  auto compiled = compile(model, {.fullgraph = true});
  LogCapture log;
  for (int64_t t : {3, 5, 8, 2}) {
    Tensor x = mark_dynamic(randn({2, t, 4}), 1);
    EXPECT_TRUE(same(compiled(x), (*model)(x))) << "length " << t;
  }
  EXPECT_TRUE(log.of("recompiles").empty()) << joined(log.of("recompiles"));
  ExplainReport r = explain(compiled);
  ASSERT_EQ(r.graph_count(), 1u);
  const std::string& text = r.entries[0].graph_text;
  EXPECT_NE(text.find(detail::str_cat("assume s0 <= 8 slice loc(\"tests/frontend/compile_test.cpp\":",
                              model->slice_line)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("slice(%"), std::string::npos);
  EXPECT_NE(text.find("{dim=1, start=0, end=s0, step=1}"), std::string::npos) << text;

  // Past the table eager fails on narrow; the compiled call retraces this size with static
  // sizes, says why, and fails the same way.
  Tensor too_long = mark_dynamic(randn({2, 9, 4}), 1);
  expect_error([&] { (*model)(too_long); }, {"[narrow] start 0 and length 9 do not fit in dim 1 of size 8"});
  expect_error([&] { compiled(too_long); }, {"[narrow] start 0 and length 9 do not fit in dim 1 of size 8"});
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 2u) << joined(lines);
  EXPECT_NE(lines[0].find("input x dim 1 (s0): 9 > 8 (the graph's slice at "
                          "tests/frontend/compile_test.cpp:"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("this call compiled with static sizes: slice at"), std::string::npos)
      << lines[1];
  EXPECT_NE(lines[1].find("holds for s0 <= 8 and this call has 9"), std::string::npos) << lines[1];
  // The symbolic graph still serves the lengths it covers.
  Tensor x = mark_dynamic(randn({2, 6, 4}), 1);
  EXPECT_TRUE(same(compiled(x), (*model)(x)));
  EXPECT_EQ(explain(compiled).graph_count(), 1u);
  EXPECT_EQ(log.of("recompiles").size(), 2u);
}

TEST(CompileDynamic, AutoMakesASlicedLengthSymbolicAndTrainsThroughIt) {
  auto model = std::make_shared<Positions>();
  auto compiled = compile(model);
  LogCapture log;
  for (int64_t t : {3, 5, 7, 4}) {
    Tensor x = randn({2, t, 4});
    model->zero_grad();
    Tensor want = (*model)(x);
    (want * want).sum().backward();
    Tensor want_pos = model->pos.grad().clone(), want_table = model->table->weight.grad().clone();
    model->zero_grad();
    Tensor got = compiled(x);
    (got * got).sum().backward();
    EXPECT_TRUE(same(got, want)) << "length " << t;
    EXPECT_TRUE(same(model->pos.grad(), want_pos)) << "length " << t;
    EXPECT_TRUE(same(model->table->weight.grad(), want_table)) << "length " << t;
  }
  // One recompile when the length first changes; the symbolic graph serves the rest.
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 1u) << joined(lines);
  EXPECT_NE(lines[0].find("input x dim 1: 3 -> 5 (compiled as a dynamic dim from now on"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(explain(compiled).graph_count(), 2u);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Each kind of host read names its own line under fullgraph.
struct Reads : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(2, 2));
  int kind = 0;
  int line = 0;
  Tensor forward(const Tensor& x) override {
    Tensor y = fc(x);
    switch (kind) {
      case 0:
        line = __LINE__ + 1;
        (void)y.data_ptr<float>();
        break;
      case 1:
        line = __LINE__ + 1;
        (void)y.to_vector<float>();
        break;
      default: {
        std::ostringstream os;
        line = __LINE__ + 1;
        os << y;
        break;
      }
    }
    return y;
  }
};

TEST(Compile, EveryConcretizationKindNamesItsLineAndModule) {
  const char* what[] = {"data_ptr()", "to_vector()", "printing the tensor"};
  for (int kind = 0; kind < 3; ++kind) {
    auto model = std::make_shared<Reads>();
    model->kind = kind;
    auto compiled = compile(model, {.fullgraph = true});
    std::string msg = error_of([&] { compiled(randn({1, 2})); });
    EXPECT_NE(msg.find(what[kind]), std::string::npos) << msg;
    EXPECT_NE(msg.find("tests/frontend/compile_test.cpp:" + std::to_string(model->line)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("in the root module"), std::string::npos) << msg;
    // Without fullgraph: segments, equal to eager.
    auto relaxed = compile(model);
    Tensor x = randn({1, 2});
    EXPECT_TRUE(same(relaxed(x), (*model)(x)));
  }
}

TEST(Compile, ModuleStructureAndParameterIdentityAreGuarded) {
  auto model = std::make_shared<Mlp>();
  auto compiled = compile(model);
  LogCapture log;
  Tensor x = randn({2, 6});
  compiled(x);
  model->register_module("extra", std::make_shared<nn::ReLU>());
  compiled(x);
  auto lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("module extra: added"), std::string::npos) << lines[0];
  // Replacing a registered parameter's tensor (not its data) is another graph.
  *model->fc1->find_parameter("bias") = zeros({8}).requires_grad_();
  compiled(x);
  lines = log.of("recompiles");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("parameter fc1.bias: replaced by another tensor"), std::string::npos)
      << lines[1];
}

TEST(Compile, ExplainReportsTraceTimeByModule) {
  auto model = std::make_shared<Mlp>();
  auto compiled = compile(model);
  compiled(randn({2, 6}));
  ExplainReport r = explain(compiled);
  ASSERT_EQ(r.entries.size(), 1u);
  std::vector<std::string> paths;
  for (const auto& [path, ms] : r.entries[0].trace_ms_by_module) {
    paths.push_back(path);
    EXPECT_GE(ms, 0.0);
  }
  EXPECT_NE(std::find(paths.begin(), paths.end(), "fc1"), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "fc2"), paths.end());
  EXPECT_NE(r.str().find("trace time by module:"), std::string::npos);
}

}  // namespace
}  // namespace kiln
