// The rules of compiled forwards: kiln::trace and kiln::compile, the IR text, graph breaks and
// segmented mode, tensor control flow, side effects, guards and recompiles, dynamic dims,
// explain and the logs. docs/compile.md quotes this program and its output.
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "example_checks.h"
#include "kiln/kiln.h"

namespace nn = kiln::nn;
using kiln::Tensor;
using kiln::TensorList;

// [example: mlp]
struct Mlp : nn::Module {
  nn::ModulePtr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 8));
  nn::ModulePtr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
  Tensor forward(const Tensor& x) override { return fc2(fc1(x).relu()); }
};
// [end]

// [example: static-loop]
// x + fc(x).relu(), twice: a C++ loop over the module tree is static (the same on every
// call), so the trace simply unrolls it.
struct Block : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  Tensor forward(const Tensor& x) override { return x + fc(x).relu(); }
};
struct Stack : nn::Module {
  nn::ModulePtr<nn::ModuleList> blocks = register_module(
      "blocks",
      std::make_shared<nn::ModuleList>(std::make_shared<Block>(), std::make_shared<Block>()));
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const auto& block : *blocks) h = (*block)(h);
    return h;
  }
};
// [end]

// [example: halving]
// A loop whose trip count depends on the data: every test of the condition reads a tensor
// value on the host (explicit operator bool).
struct HalvingMLP : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  Tensor forward(const Tensor& x) override {
    Tensor X = fc(x);
    while (X.abs().sum() > 1) X = X / 2;
    return X;
  }
};

// The same loop as a tensor while_loop: one graph, no break.
struct HalvingWhile : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  Tensor forward(const Tensor& x) override {
    Tensor X = fc(x);
    return kiln::while_loop([](const TensorList& c) { return c[0].abs().sum() > 1; },
                            [](const TensorList& c) { return TensorList{c[0] / 2}; }, {X})[0];
  }
};
// [end]

// [example: cond]
struct Branchy : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  Tensor forward(const Tensor& x) override {
    Tensor h = fc(x);
    // The false branch reads a parameter and the outer tensor x: both become captures.
    return kiln::cond(
        h.sum() > 0, [](const TensorList& o) { return TensorList{o[0].relu() * 2}; },
        [&](const TensorList& o) { return TensorList{o[0] * fc->weight.sum() + x}; }, {h})[0];
  }
};
// [end]

// [example: fori-scan]
// sum over i in [0, 4) of x * i, i.e. 6 * x.
struct PowerSum : nn::Module {
  Tensor forward(const Tensor& x) override {
    return kiln::fori_loop(0, 4,
                           [&](const Tensor& i, const TensorList& c) {
                             return TensorList{c[0] + x * i.to(kiln::kFloat32)};
                           },
                           {kiln::zeros_like(x)})[0];
  }
};

// An RNN over dim 0 of xs: the carry is the hidden state, the y slices stack into ys.
struct Rnn : nn::Module {
  nn::ModulePtr<nn::Linear> cell = register_module("cell", std::make_shared<nn::Linear>(4, 4));
  Tensor forward(const Tensor& xs) override {
    auto [carry, ys] = kiln::scan(
        [&](const TensorList& h, const TensorList& x) {
          Tensor next = kiln::tanh(cell(h[0]) + x[0]);
          return std::pair<TensorList, TensorList>{{next}, {next * 2}};
        },
        {kiln::zeros({2, 4})}, {xs});
    return ys[0].sum({0}) + carry[0];
  }
};
// [end]

// [example: body-mistakes]
// The branches disagree on the output type.
struct Mismatched : nn::Module {
  Tensor forward(const Tensor& x) override {
    return kiln::cond(
        x.sum() > 0, [](const TensorList& o) { return TensorList{o[0]}; },
        [](const TensorList& o) { return TensorList{o[0].sum({0})}; }, {x})[0];
  }
};

// A body writes into a tensor from outside it instead of returning the new value.
struct WritesOuter : nn::Module {
  Tensor forward(const Tensor& x) override {
    Tensor total = x * 1;
    kiln::fori_loop(0, 3,
                    [&](const Tensor&, const TensorList& c) {
                      total.add_(c[0]);
                      return c;
                    },
                    {x});
    return total;
  }
};

// A tensor made inside a body is used after it.
struct Leaky : nn::Module {
  Tensor forward(const Tensor& x) override {
    Tensor inside;
    kiln::cond(
        x.sum() > 0,
        [&](const TensorList& o) {
          inside = o[0] * 2;
          return o;
        },
        [](const TensorList& o) { return o; }, {x});
    return inside + 1;
  }
};
// [end]

// [example: side-effects]
// Host code in forward runs when the forward is traced, not on every call.
struct Counted : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  int forward_runs = 0;
  Tensor forward(const Tensor& x) override {
    ++forward_runs;
    std::cout << "Counted::forward's C++ body runs\n";
    return fc(x);
  }
};

// [end]

// [example: counted-break]
// The same, with a graph break after the counter.
struct CountedBreak : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  int forward_runs = 0;
  Tensor forward(const Tensor& x) override {
    ++forward_runs;
    Tensor h = fc(x);
    return h.sum() > 0 ? h : -h;  // a host read: the forward runs in segments
  }
};

// [end]

// [example: bn-model]
// Training-mode BatchNorm updates its buffers in place; dropout draws from the generator.
struct BnDrop : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  nn::ModulePtr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
  nn::ModulePtr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
  Tensor forward(const Tensor& x) override { return drop(bn(fc(x))); }
};

// [end]

// [example: member-write-model]
// A counter kept as a plain member and updated in place: not state the graph can carry.
struct WritesMember : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  Tensor count = kiln::zeros({1});
  Tensor forward(const Tensor& x) override {
    count.add_(1);
    return fc(x);
  }
};

// [end]

// [example: constant-model]
// Tensors kept as plain members are read as captured constants.
struct UsesConstant : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  Tensor offset = Tensor::from_vector<float>({1, 2, 3});
  Tensor trainable = Tensor::from_vector<float>({1, 1, 1}).requires_grad_();
  Tensor forward(const Tensor& x) override { return fc(x) + offset * trainable; }
};
// [end]

// [example: static-arg]
// A non-tensor argument is a guard: its value is baked into the graph.
struct Scaled : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  Tensor forward(const Tensor& x, double scale) { return fc(x) * scale; }
};
// [end]

// [example: flattener]
struct Flattener : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(12, 2));
  Tensor forward(const Tensor& x) override { return fc(x.reshape({x.size(0), -1})).reshape({-1}); }
};

// [end]

// [example: concat]
struct Concat : nn::Module {
  Tensor forward(const Tensor& a, const Tensor& b) { return kiln::cat({a, b}, 0) * 2; }
};

// [end]

// [example: plus-one]
// Host arithmetic on a size: x.size(0) + 1 is a sum of sizes.
struct CountsPlusOne : nn::Module {
  Tensor forward(const Tensor& x) override { return kiln::zeros({x.size(0) + 1}); }
};

// [end]

// [example: size-branch-model]
// A host branch on a size: the symbolic trace sees a placeholder (a prime above 100000).
struct BranchOnSize : nn::Module {
  Tensor forward(const Tensor& x) override {
    if (x.size(0) > 4) return x * 2;
    return x;
  }
};
// [end]

// [example: affine]
// A Linear plus a shift kept as a plain member (a captured constant).
struct Affine : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 2));
  Tensor shift = kiln::full({2}, 0.5);
  Tensor forward(const Tensor& x) override { return fc(x) + shift; }
};
// [end]

// [example: cumulative-bn-model]
// momentum = nullopt (a cumulative average) reads num_batches_tracked on the host.
struct CumulativeBN : nn::Module {
  nn::ModulePtr<nn::BatchNorm1d> bn = register_module(
      "bn", std::make_shared<nn::BatchNorm1d>(3, nn::BatchNormOptions{.momentum = std::nullopt}));
  Tensor forward(const Tensor& x) override { return bn(x); }
};

// [end]

// [example: own-generator-model]
// Dropout from a Generator of its own.
struct OwnGenerator : nn::Module {
  kiln::Generator gen{42};
  Tensor forward(const Tensor& x) override {
    return nn::functional::dropout(x, 0.5, is_training(), &gen);
  }
};

// [end]

// [example: drop-then-item-model]
// Dropout before a graph break.
struct DropThenItem : nn::Module {
  nn::ModulePtr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
  Tensor forward(const Tensor& x) override {
    Tensor h = drop(x);
    return h / (h.abs().max().item<double>() + 1);
  }
};
// [end]

// [example: position-table-model]
// A table of 16 learned positions sliced to the input's length (`pos[:, :x.size(1)]`).
struct PositionTable : nn::Module {
  Tensor pos = register_parameter("pos", kiln::randn({1, 16, 4}));
  Tensor forward(const Tensor& x) override { return x + kiln::slice(pos, 1, 0, x.size(1)); }
};
// [end]

namespace {

// Bitwise equality of shape and values.
bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         a.to_vector<double>() == b.to_vector<double>();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the kiln::Error `fn` throws ("" when it does not throw).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "";
}

// The first `n` lines of `text`.
std::string head(const std::string& text, int n) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; n-- > 0 && std::getline(in, line);) out += line + "\n";
  return out;
}

}  // namespace

// [example: log-sink]
// Collects kiln's log lines (and warnings) instead of printing them to stderr.
struct LogLines {
  std::vector<std::pair<std::string, std::string>> lines;  // (channel, line)
  explicit LogLines(const char* channels) {
    kiln::set_log_channels(channels);
    kiln::set_log_sink([this](std::string_view channel, std::string_view line) {
      lines.emplace_back(std::string(channel), std::string(line));
    });
  }
  ~LogLines() {
    kiln::set_log_sink({});
    kiln::set_log_channels("");
  }
  std::vector<std::string> of(const std::string& channel) const {
    std::vector<std::string> out;
    for (const auto& [c, line] : lines)
      if (c == channel) out.push_back(line);
    return out;
  }
  void print(const std::string& channel) const {
    for (const std::string& line : of(channel))
      std::cout << "[kiln " << channel << "] " << line << "\n";
  }
};
// [end]

int main() {
  kiln::manual_seed(0);

  std::cout << "==== 1. trace ====\n";
  {
    // [example: trace]
    Mlp model;
    std::unique_ptr<kiln::ir::Graph> graph = kiln::trace(model, kiln::randn({2, 6}));
    std::cout << kiln::ir::print_graph(*graph);
    // [end]
    check(graph->inputs().size() == 5, "x and four parameters are the graph's inputs");
    check(graph->inputs()[1].kind == kiln::ir::InputKind::Parameter, "parameters are named inputs");
  }

  std::cout << "\n==== 1. compile ====\n";
  {
    LogLines log("recompiles");
    // [example: compile]
    auto model = std::make_shared<Mlp>();
    auto compiled = kiln::compile(model);  // kiln::CompiledModule<Mlp>, callable like the model
    kiln::optim::SGD opt(model->parameters(), kiln::optim::SGDOptions(0.1));
    for (int step = 0; step < 3; ++step) {
      Tensor x = kiln::randn({4, 6});
      Tensor y = compiled(x);  // the first call traces; the others reuse the graph
      check(same(y, (*model)(x)), "compiled == eager, bitwise");
      opt.zero_grad();
      y.sum().backward();  // gradients reach the model's parameters
      opt.step();          // updates them in place: the graph reads them live, no recompile
    }
    kiln::ExplainReport report = kiln::explain(compiled);
    std::cout << report.graph_count() << " graph, " << report.calls << " calls, "
              << report.recompile_reasons.size() << " recompiles\n";
    // [end]
    check(report.graph_count() == 1 && report.calls == 3, "one graph for three calls");
    check(log.of("recompiles").empty(), "optimizer steps need no recompile");
    check(&compiled.module() == model.get(), "module() is the model");
  }

  std::cout << "\n==== 2. reading the IR ====\n";
  {
    // [example: ir]
    Stack model;
    auto graph = kiln::trace(model, kiln::randn({2, 4}));
    std::string text = kiln::ir::print_graph(*graph);
    std::cout << text;
    auto parsed = kiln::ir::parse_graph(text);  // the text form reads back exactly
    kiln::ir::verify(*parsed);                  // throws naming the node if an invariant fails
    std::cout << "round trip: " << (kiln::ir::print_graph(*parsed) == text) << ", same hash: "
              << (kiln::ir::structural_hash(*parsed) == kiln::ir::structural_hash(*graph)) << "\n";
    std::string dot = kiln::ir::to_dot(*graph);  // one cluster per module path
    // [end]
    std::cout << head(dot, 20);
    check(kiln::ir::print_graph(*parsed) == text, "print/parse round trip");
    check(kiln::ir::structural_hash(*parsed) == kiln::ir::structural_hash(*graph),
          "the hash ignores value ids and locations");
    check(contains(text, "@blocks.1.fc"), "nodes carry their module path");
    check(contains(text, "docs/examples/compile_rules.cpp"), "nodes carry the user's line");
    check(contains(dot, "blocks.0.fc"), "DOT clusters by module");
    // A second trace of the same model hashes equally.
    check(kiln::ir::structural_hash(*kiln::trace(model, kiln::randn({2, 4}))) ==
              kiln::ir::structural_hash(*graph),
          "equal graphs hash equally");
  }

  std::cout << "\n==== 3. static loops, graph breaks and segments ====\n";
  {
    // [example: static-loop-run]
    auto model = std::make_shared<Stack>();
    auto compiled = kiln::compile(model, {.fullgraph = true});
    Tensor x = kiln::randn({2, 4});
    check(same(compiled(x), (*model)(x)), "a static loop compiles under fullgraph");
    // [end]
  }
  {
    // [example: fullgraph-error]
    auto model = std::make_shared<HalvingMLP>();
    auto strict = kiln::compile(model, {.fullgraph = true});
    try {
      strict(kiln::randn({2, 4}));
    } catch (const kiln::GraphBreakError& e) {
      std::cout << e.what() << "\n";
    }
    // [end]
    std::string msg = error_of([&] { strict(kiln::randn({2, 4})); });
    check(contains(msg, "graph break in HalvingMLP") && contains(msg, "a conversion to bool") &&
              contains(msg, "docs/examples/compile_rules.cpp:") &&
              contains(msg, "kiln::while_loop"),
          "GraphBreakError names the op, the line and the fix");
  }
  {
    LogLines log("graph_breaks");
    // [example: segments]
    auto model = std::make_shared<HalvingMLP>();
    auto compiled = kiln::compile(model);  // no fullgraph: the forward runs in segments
    for (double scale : {10.0, 10.0, 1000.0}) {
      Tensor x = kiln::randn({2, 4}) * scale;
      check(same(compiled(x), (*model)(x)), "segmented == eager, bitwise");
    }
    kiln::explain(compiled).print(std::cout);
    // [end]
    log.print("graph_breaks");
    kiln::ExplainReport r = kiln::explain(compiled);
    check(r.graph_break_count() == 1, "one entry, marked as a graph break");
    check(log.of("graph_breaks").size() == 1, "the break is logged once, when found");
    check(r.entries.at(0).segment_hits > r.entries.at(0).segment_misses,
          "repeated segments are compiled once");
  }

  std::cout << "\n==== 4. tensor control flow ====\n";
  {
    // [example: while-run]
    auto model = std::make_shared<HalvingWhile>();
    auto compiled = kiln::compile(model, {.fullgraph = true});
    for (double scale : {0.01, 1.0, 100.0}) {
      Tensor x = kiln::randn({2, 4}) * scale;
      check(same(compiled(x), (*model)(x)), "while_loop: compiled == eager");
    }
    // [end]
    check(kiln::explain(compiled).graph_count() == 1, "one graph, no break");
  }
  {
    // [example: cond-run]
    auto model = std::make_shared<Branchy>();
    auto graph = kiln::trace(*model, kiln::randn({2, 3}));
    std::cout << kiln::ir::print_graph(*graph);
    auto compiled = kiln::compile(model, {.fullgraph = true});
    Tensor pos = kiln::full({2, 3}, 5.0), neg = kiln::full({2, 3}, -5.0);
    check(same(compiled(pos), (*model)(pos)) && same(compiled(neg), (*model)(neg)),
          "cond takes either branch in one graph");
    // Gradients: eager, then through the compiled graph.
    Tensor x = kiln::randn({2, 3});
    (*model)(x).sum().backward();
    Tensor eager_grad = model->fc->weight.grad().clone();
    model->zero_grad();
    compiled(x).sum().backward();
    check(same(model->fc->weight.grad(), eager_grad), "cond: compiled gradients == eager");
    // [end]
    check(kiln::explain(compiled).graph_count() == 1, "cond: one graph");
  }
  {
    auto sum = std::make_shared<PowerSum>();
    Tensor x = kiln::randn({3}).requires_grad_();
    Tensor y = (*sum)(x);
    y.sum().backward();
    check(same(y, x * 6), "fori_loop sums x * i");
    check(same(x.grad(), kiln::full({3}, 6.0)), "fori_loop is differentiable eagerly");
    auto compiled_sum = kiln::compile(sum, {.fullgraph = true});
    Tensor x2 = kiln::randn({3});
    check(same(compiled_sum(x2), (*sum)(x2)), "fori_loop: compiled == eager");

    auto rnn = std::make_shared<Rnn>();
    auto compiled_rnn = kiln::compile(rnn, {.fullgraph = true});
    Tensor xs = kiln::randn({5, 2, 4});
    check(same(compiled_rnn(xs), (*rnn)(xs)), "scan: compiled == eager");
    rnn->zero_grad();
    (*rnn)(xs).sum().backward();
    Tensor eager_grad = rnn->cell->weight.grad().clone();
    rnn->zero_grad();
    compiled_rnn(xs).sum().backward();
    check(same(rnn->cell->weight.grad(), eager_grad), "scan: compiled gradients == eager");
  }
  {
    // while_loop gradients: eager and compiled agree.
    auto model = std::make_shared<HalvingWhile>();
    auto compiled = kiln::compile(model);
    Tensor x = kiln::randn({2, 4}) * 10;
    (*model)(x).sum().backward();
    Tensor eager_grad = model->fc->weight.grad().clone();
    model->zero_grad();
    compiled(x).sum().backward();
    check(same(model->fc->weight.grad(), eager_grad), "while_loop: compiled gradients == eager");
  }
  {
    // [example: body-errors]
    Mismatched mismatched;
    std::cout << error_of([&] { kiln::trace(mismatched, kiln::randn({2, 3})); }) << "\n\n";
    WritesOuter writes;
    std::cout << error_of([&] { kiln::trace(writes, kiln::randn({2})); }) << "\n\n";
    Leaky leaky;
    std::cout << error_of([&] { kiln::trace(leaky, kiln::randn({2})); }) << "\n";
    // [end]
    check(contains(error_of([&] {
                     kiln::trace(mismatched, kiln::randn({2, 3}));
                   }),
                   "output 0 is float32[3] in false_fn but float32[2, 3] in true_fn"),
          "a branch type mismatch names the output and both types");
    check(contains(error_of([&] { kiln::trace(writes, kiln::randn({2})); }),
                   "writes in place into a tensor from outside it"),
          "bodies may not write into outer tensors");
    check(contains(error_of([&] { kiln::trace(leaky, kiln::randn({2})); }),
                   "made inside a kiln control-flow body"),
          "tensors made in a body cannot escape");
  }

  std::cout << "\n==== 5. side effects ====\n";
  {
    // [example: host-once]
    auto model = std::make_shared<Counted>();
    auto compiled = kiln::compile(model);
    for (int i = 0; i < 3; ++i) compiled(kiln::randn({2, 3}));
    std::cout << "forward_runs after 3 compiled calls: " << model->forward_runs << "\n";
    compiled(kiln::randn({4, 3}));  // a new batch size: traced twice, with symbolic sizes
    compiled(kiln::randn({8, 3}));  // reuses that graph
    std::cout << "forward_runs after 2 more calls: " << model->forward_runs << "\n";

    auto breaks = std::make_shared<CountedBreak>();
    auto segmented = kiln::compile(breaks);
    for (int i = 0; i < 3; ++i) segmented(kiln::randn({2, 3}));
    std::cout << "CountedBreak forward_runs after 3 compiled calls: " << breaks->forward_runs
              << "\n";
    // [end]
    check(model->forward_runs == 3, "host code runs at trace time only");
    check(breaks->forward_runs == 4, "segmented: the body runs on every call (twice on the first)");
  }
  {
    // [example: bn-dropout]
    kiln::manual_seed(7);
    auto eager = std::make_shared<BnDrop>();
    auto twin = std::make_shared<BnDrop>();
    twin->load_state_dict(eager->state_dict());
    auto compiled = kiln::compile(twin);
    std::vector<Tensor> xs;
    for (int i = 0; i < 4; ++i) xs.push_back(kiln::randn({5, 4}));
    kiln::manual_seed(11);  // the same generator positions for both runs
    std::vector<Tensor> eager_out;
    for (const Tensor& x : xs) eager_out.push_back((*eager)(x));
    kiln::manual_seed(11);
    for (size_t i = 0; i < xs.size(); ++i)
      check(same(compiled(xs[i]), eager_out[i]), "dropout draws match eager call for call");
    check(same(twin->bn->running_mean, eager->bn->running_mean), "running_mean written back");
    check(same(twin->bn->running_var, eager->bn->running_var), "running_var written back");
    std::cout << "num_batches_tracked after 4 compiled calls: "
              << twin->bn->num_batches_tracked.item<int64_t>() << "\n";
    // [end]
    check(twin->bn->num_batches_tracked.item<int64_t>() == 4, "N compiled calls == N eager calls");
    check(kiln::explain(compiled).graph_count() == 1, "BatchNorm and dropout: one graph");
    std::cout << kiln::explain(compiled).entries.at(0).graph_text;
  }
  {
    // [example: unregistered-write]
    WritesMember model;
    std::cout << error_of([&] { kiln::trace(model, kiln::randn({2, 3})); }) << "\n";
    // [end]
    check(contains(error_of([&] {
                     kiln::trace(model, kiln::randn({2, 3}));
                   }),
                   "writes in place into a tensor that is not a registered buffer"),
          "in-place writes into unregistered tensors are refused");
  }
  {
    LogLines log("");
    // [example: captured]
    auto model = std::make_shared<UsesConstant>();
    auto compiled = kiln::compile(model);
    compiled(kiln::randn({2, 3}));
    kiln::ExplainReport report = kiln::explain(compiled);
    for (const std::string& line : report.entries[0].captured) std::cout << line << "\n";
    // [end]
    log.print("warning");
    check(kiln::explain(compiled).entries[0].captured.size() == 2, "two captured constants");
    check(log.of("warning").size() == 1 &&
              contains(log.of("warning")[0], "requires grad but is not a registered parameter"),
          "a trainable constant warns");
  }

  std::cout << "\n==== 6. guards and recompiles ====\n";
  {
    LogLines log("recompiles");
    // [example: guards]
    auto model = std::make_shared<Mlp>();
    auto compiled = kiln::compile(model, {.cache_limit = 16});
    Tensor x = kiln::randn({2, 6});
    compiled(x);
    compiled(x.to(kiln::kFloat64));                  // input dtype
    compiled(kiln::randn({2, 6}).requires_grad_());  // input requires_grad
    compiled(kiln::randn({6, 2}).t());               // input layout (strides)
    {
      kiln::NoGradGuard no_grad;
      compiled(x);  // grad mode
    }
    model->eval();
    compiled(x);  // training flags (every module)
    model->fc1->train();
    compiled(x);  // one module's training flag
    model->fc2->bias.set_requires_grad(false);
    compiled(x);                    // a parameter's requires_grad
    compiled(kiln::randn({4, 6}));  // input shape
    compiled(kiln::randn({8, 6}));  // ... now a dynamic dim: no recompile
    // [end]
    log.print("recompiles");
    check(log.of("recompiles").size() == 8, "eight guards failed, eight recompiles");
    check(kiln::explain(compiled).graph_count() == 9, "nine graphs");
  }
  {
    LogLines log("recompiles");
    // [example: static-arg-run]
    auto model = std::make_shared<Scaled>();
    auto compiled = kiln::compile(model);
    Tensor x = kiln::randn({2, 3});
    check(same(compiled(x, 2.0), nn::call(*model, x, 2.0)), "scale 2");
    check(same(compiled(x, 3.0), nn::call(*model, x, 3.0)), "scale 3: a new graph");
    // [end]
    log.print("recompiles");
    check(log.of("recompiles").size() == 1, "a new argument value recompiles");
  }
  {
    LogLines log("");
    // [example: cache-limit]
    auto model = std::make_shared<Mlp>();
    auto compiled =
        kiln::compile(model, {.cache_limit = 2, .dynamic = kiln::CompileOptions::Dynamic::Off});
    for (int64_t batch : {1, 2, 3, 4}) compiled(kiln::randn({batch, 6}));  // 3 and 4 run eagerly
    auto strict = kiln::compile(model, {.fullgraph = true, .cache_limit = 1});
    strict(kiln::randn({1, 6}));
    std::cout << error_of([&] { strict(kiln::randn({2, 6})); }) << "\n";
    // [end]
    log.print("warning");
    check(log.of("warning").size() == 1, "the cache limit warns once");
    check(kiln::explain(compiled).eager_calls == 2, "past the limit, calls run eagerly");
  }

  std::cout << "\n==== 7. dynamic dims ====\n";
  {
    LogLines log("recompiles");
    // [example: dynamic-auto]
    auto model = std::make_shared<Flattener>();
    auto compiled = kiln::compile(model);  // dynamic = Auto
    for (int64_t batch : {2, 4, 8, 3, 16}) {
      Tensor x = kiln::randn({batch, 3, 4});
      check(same(compiled(x), (*model)(x)), "Auto: compiled == eager for every batch");
    }
    std::cout << kiln::explain(compiled).entries[1].graph_text;
    // [end]
    log.print("recompiles");
    check(log.of("recompiles").size() == 1, "Auto: one recompile, then symbolic");
    check(contains(kiln::explain(compiled).entries[1].graph_text, "float32[s0*2]"),
          "a product of a symbol survives");
  }
  {
    LogLines log("recompiles");
    // [example: mark-dynamic]
    auto model = std::make_shared<Flattener>();
    auto compiled = kiln::compile(model);
    for (int64_t batch : {3, 5, 7}) compiled(kiln::mark_dynamic(kiln::randn({batch, 3, 4}), 0));
    compiled(kiln::mark_dynamic(kiln::randn({1, 3, 4}), 0));  // size 1: its own graph
    // [end]
    log.print("recompiles");
    check(log.of("recompiles").size() == 1, "mark_dynamic: one graph for sizes >= 2");
  }
  {
    LogLines log("recompiles");
    // [example: duck]
    auto model = std::make_shared<Concat>();
    auto compiled = kiln::compile(model, {.dynamic = kiln::CompileOptions::Dynamic::On});
    Tensor a = kiln::randn({3, 4}), b = kiln::randn({3, 4});
    compiled(a, b);  // a and b: [s0, s1] both (equal sizes share a symbol)
    std::cout << kiln::explain(compiled).entries[0].graph_text;
    Tensor c = kiln::randn({5, 4}), d = kiln::randn({6, 4});
    check(same(compiled(c, d), nn::call(*model, c, d)), "unequal sizes: a new graph");
    // [end]
    log.print("recompiles");
    check(log.of("recompiles").size() == 3 &&
              contains(log.of("recompiles")[0], "(both are s0: they were equal when traced)"),
          "a duck-sizing guard fails, then a sum of sizes");
  }
  {
    LogLines log("recompiles");
    // [example: host-arith]
    auto model = std::make_shared<CountsPlusOne>();
    auto compiled = kiln::compile(model, {.dynamic = kiln::CompileOptions::Dynamic::On});
    check(compiled(kiln::randn({4, 3})).size(0) == 5, "x.size(0) + 1, static");
    // [end]
    log.print("recompiles");
    check(log.of("recompiles").size() == 2 &&
              contains(log.of("recompiles")[1], "dynamic dims compiled as static sizes: full at"),
          "a sum of sizes falls back to static, naming the op");
  }
  {
    LogLines log("recompiles");
    // [example: on-with-linear]
    auto model = std::make_shared<Mlp>();
    auto compiled = kiln::compile(model, {.dynamic = kiln::CompileOptions::Dynamic::On});
    compiled(kiln::randn({2, 6}));  // [s0, s1] fails at fc1 (s1 must be 6): [s0, 6] works
    compiled(kiln::randn({4, 6}));  // the batch stayed dynamic: same graph
    // [end]
    log.print("recompiles");
    check(kiln::explain(compiled).graph_count() == 1, "On with a Linear: the batch stays dynamic");
  }
  {
    LogLines log("recompiles");
    // [example: position-table]
    auto model = std::make_shared<PositionTable>();
    auto compiled = kiln::compile(model);
    for (int64_t length : {3, 5, 9, 16, 2}) compiled(kiln::randn({2, length, 4}));
    std::string text = kiln::explain(compiled).entries[1].graph_text;
    std::cout << text.substr(0, text.find("input")) << "...\n";
    // [end]
    log.print("recompiles");
    for (int64_t length : {4, 11}) {
      Tensor x = kiln::randn({2, length, 4});
      check(same(compiled(x), (*model)(x)), "a sliced table: compiled == eager");
    }
    check(kiln::explain(compiled).graph_count() == 2 && log.of("recompiles").size() == 1,
          "a sliced table: one symbolic graph serves every length up to the table's");
  }
  {
    // [example: size-branch]
    auto model = std::make_shared<BranchOnSize>();
    auto compiled = kiln::compile(model, {.dynamic = kiln::CompileOptions::Dynamic::On});
    Tensor x = kiln::ones({3, 2});
    std::cout << "eager: " << (*model)(x).sum().item<double>()
              << ", compiled: " << compiled(x).sum().item<double>() << "\n";
    // [end]
    // The documented limitation (docs/compile.md, section 7). If this check fails, kiln now
    // detects host branches on symbolic sizes: update the guide.
    check(!same(compiled(x), (*model)(x)), "a host branch on a size sees the placeholder");
  }

  std::cout << "\n==== 8. explain and logs ====\n";
  {
    LogLines log("all");
    // [example: explain]
    auto model = std::make_shared<Affine>();
    auto compiled = kiln::compile(model, {.input_names = {"features"}});
    compiled(kiln::randn({2, 4}));
    compiled(kiln::randn({2, 4}));
    compiled(kiln::randn({3, 4}));  // a new batch size: one recompile, symbolic from now on
    kiln::explain(compiled).print(std::cout);
    // [end]
    std::cout << "---- KILN_LOG=all (graphs channel left out) ----\n";
    for (const auto& [channel, line] : log.lines)
      if (channel != "graphs") std::cout << "[kiln " << channel << "] " << line << "\n";
    check(!log.of("guards").empty() && !log.of("graphs").empty() && !log.of("recompiles").empty(),
          "every channel reports");
    check(kiln::explain(compiled).entries.at(1).captured.size() == 1, "shift is captured");
  }

  std::cout << "\n==== 9. limitations ====\n";
  {
    // [example: cumulative-bn]
    auto eager = std::make_shared<CumulativeBN>();
    auto twin = std::make_shared<CumulativeBN>();
    auto compiled = kiln::compile(twin);
    for (int i = 0; i < 3; ++i) {
      Tensor x = kiln::randn({4, 3});
      check(same(compiled(x), (*eager)(x)), "segmented cumulative BatchNorm == eager");
    }
    std::cout << kiln::explain(compiled).entries[0].breaks.at(0) << "\n";
    // [end]
    check(same(twin->bn->running_mean, eager->bn->running_mean), "running_mean matches");
    check(twin->bn->num_batches_tracked.item<int64_t>() == 3, "three batches tracked");
  }
  {
    // [example: own-generator]
    OwnGenerator model;
    std::string text = kiln::ir::print_graph(*kiln::trace(model, kiln::randn({4})));
    std::cout << text;
    // [end]
    check(contains(text, "generator=generator@0x"), "a custom generator prints its address");
  }
  {
    // [example: random-segments]
    auto model = std::make_shared<DropThenItem>();
    auto compiled = kiln::compile(model);
    for (int i = 0; i < 4; ++i) compiled(kiln::randn({3, 4}));
    kiln::ExplainEntry e = kiln::explain(compiled).entries[0];
    std::cout << "segment cache: " << e.segment_misses << " compiled, " << e.segment_hits
              << " reused\n";
    // [end]
    check(e.segment_misses >= 4, "random segments are recompiled on every call");
  }

  return finish("compile_rules");
}
