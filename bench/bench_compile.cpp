// The cost of kiln::compile's guard check on a cache hit: a compiled FashionMLP call beside
// the eager call and beside the interp executable running the same graph alone, so that
//   guard overhead ~= compiled hit - interp alone   (the compiled call runs exactly that graph)
// and compiled hit - eager is what a user pays (or saves) for compiling with interp. Inputs
// are batch 1. Arg "tiny" = 1 shrinks every layer to width 1: the same module tree (so the
// same guards) with next to no arithmetic, which makes the fixed per-call costs visible.
// BM_CompiledHitEntries finds the last of 4 cached graphs (dynamic=Off, one per batch size)
// vs the only one. BM_CompiledConcurrentCallers: one compiled module called from 1 and 2
// threads at once.
#include <map>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kiln/interp/interp.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/residual_mlp.h"

namespace kiln::bench {
namespace {

std::shared_ptr<models::FashionMLP> fashion_mlp(bool tiny) {
  manual_seed(0);
  models::FashionMLPConfig config;
  if (tiny) config = {.d_in = 1, .d_hidden = 1, .d_out = 1};
  auto model = models::build(config);
  model->eval();
  return model;
}

Tensor input(bool tiny, int64_t batch = 1) {
  return filled({batch, tiny ? 1 : 784}, 1);
}

void tiny_or_not(benchmark::internal::Benchmark* b) {
  b->ArgName("tiny")->Arg(0)->Arg(1)->Unit(benchmark::kNanosecond);
}

void BM_EagerCall(benchmark::State& state) {
  ThreadsScope threads(1);
  const bool tiny = state.range(0) != 0;
  auto model = fashion_mlp(tiny);
  Tensor x = input(tiny);
  NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize((*model)(x));
}
BENCHMARK(BM_EagerCall)->Apply(tiny_or_not);

// The graph the compiled call runs, executed directly with its inputs already resolved.
void BM_InterpRunAlone(benchmark::State& state) {
  ThreadsScope threads(1);
  const bool tiny = state.range(0) != 0;
  auto model = fashion_mlp(tiny);
  Tensor x = input(tiny);
  NoGradGuard no_grad;
  std::shared_ptr<const ir::Graph> graph = trace(*model, x);
  std::map<std::string, Tensor> params;
  for (const auto& [path, t] : model->named_parameters()) params[path] = t;
  std::vector<Tensor> args;
  for (const ir::GraphInput& in : graph->inputs())
    args.push_back(in.kind == ir::InputKind::Input ? x : params.at(in.name));
  interp::Executable executable(graph);
  for (auto _ : state) benchmark::DoNotOptimize(executable.run(args));
}
BENCHMARK(BM_InterpRunAlone)->Apply(tiny_or_not);

void BM_CompiledHit(benchmark::State& state) {
  ThreadsScope threads(1);
  const bool tiny = state.range(0) != 0;
  auto model = fashion_mlp(tiny);
  Tensor x = input(tiny);
  NoGradGuard no_grad;
  auto compiled = compile(model, {.backend = "interp"});
  compiled(x);  // traces: every timed call is a cache hit
  for (auto _ : state) benchmark::DoNotOptimize(compiled(x));
  if (explain(compiled).graph_count() != 1) state.SkipWithError("expected one cached graph");
}
BENCHMARK(BM_CompiledHit)->Apply(tiny_or_not);

// Args: cached entries (1 or 4), tiny. Every call hits the batch-4 graph, cached last.
void BM_CompiledHitEntries(benchmark::State& state) {
  ThreadsScope threads(1);
  const int64_t entries = state.range(0);
  const bool tiny = state.range(1) != 0;
  auto model = fashion_mlp(tiny);
  NoGradGuard no_grad;
  auto compiled = compile(model, {.backend = "interp", .dynamic = CompileOptions::Dynamic::Off});
  for (int64_t batch = 5 - entries; batch <= 4; ++batch) compiled(input(tiny, batch));
  Tensor x = input(tiny, 4);
  for (auto _ : state) benchmark::DoNotOptimize(compiled(x));
  if (static_cast<int64_t>(explain(compiled).graph_count()) != entries)
    state.SkipWithError("unexpected number of cached graphs");
}
BENCHMARK(BM_CompiledHitEntries)
    ->ArgNames({"entries", "tiny"})
    ->ArgsProduct({{1, 4}, {0, 1}})
    ->Unit(benchmark::kNanosecond);

// Throughput of one compiled module (the cpu backend, ResidualMLP at batch 64, kiln's pool
// at one thread) called from 1 and 2 threads at once: items_per_second is calls per second
// over all callers, so 2 threads / 1 thread is the scaling (target >= 1.8).
void BM_CompiledConcurrentCallers(benchmark::State& state) {
  static auto compiled = [] {
    set_num_threads(1);
    manual_seed(0);
    auto model = models::build(models::MLPConfig{});
    model->eval();
    NoGradGuard no_grad;
    auto c = compile(model);
    c(filled({64, 784}, 1));
    return c;
  }();
  NoGradGuard no_grad;
  Tensor x = filled({64, 784}, 2 + static_cast<uint32_t>(state.thread_index()));
  for (auto _ : state) benchmark::DoNotOptimize(compiled(x));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CompiledConcurrentCallers)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  kiln::bench::add_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
