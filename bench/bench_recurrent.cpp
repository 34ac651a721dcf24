// nn::LSTM at the size of a typical sequence model (batch 64, sequence 128, input and hidden
// 512, one layer): the forward alone (no gradients) and forward + backward, eagerly and
// through kiln::compile, at 1 and 2 threads. A small shape (batch 8, sequence 32, width 64)
// shows the per-step overhead. bench/torch_lstm.py measures PyTorch eager on the same shapes;
// docs/perf.md reports the ratios from one machine. Both warm up with one untimed call.
#include <memory>

#include "bench_util.h"

namespace kiln::bench {
namespace {

// compiled, backward, threads, batch, seq, width.
void lstm_grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"compiled", "backward", "threads", "batch", "seq", "width"});
  for (int64_t compiled : {0, 1})
    for (int64_t backward : {0, 1})
      for (int64_t threads : {1, 2}) {
        b->Args({compiled, backward, threads, 64, 128, 512});
        b->Args({compiled, backward, threads, 8, 32, 64});
      }
  b->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

void BM_LSTM(benchmark::State& state) {
  const bool compiled = state.range(0) != 0, backward = state.range(1) != 0;
  ThreadsScope threads(static_cast<int>(state.range(2)));
  const int64_t batch = state.range(3), seq = state.range(4), width = state.range(5);
  manual_seed(0);
  auto lstm = std::make_shared<nn::LSTM>(width, width);
  auto graph = kiln::compile(lstm);
  Tensor x = randn({seq, batch, width});
  auto run = [&] { return compiled ? graph(x) : (*lstm)(x); };
  auto step = [&] {
    if (backward) {
      lstm->zero_grad();
      run().sum().backward();
    } else {
      NoGradGuard no_grad;
      Tensor y = run();
      benchmark::DoNotOptimize(y.data_ptr<float>());
    }
  };
  // One untimed call first, as bench/torch_lstm.py makes: the compile, and the allocator's
  // first growth (fresh pages cost a page fault each), stay out of the figure. A large
  // shape's call takes over MinTime, so the benchmark times only one more.
  step();
  for (auto _ : state) step();
}
BENCHMARK(BM_LSTM)->Apply(lstm_grid);

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  kiln::init();
  kiln::bench::add_context();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
