// Training throughput of the catalog models: one optimizer step (forward, cross-entropy,
// backward, Adam) per iteration on a batch of Fashion-MNIST-shaped data, reported as
// samples/s (items_per_second) at 1 and 2 threads. The data is synthetic (throughput does
// not depend on pixel values), so the benchmark needs no dataset. bench/torch_train.py
// measures PyTorch eager on the same models for the comparison in docs/perf.md.
#include "bench_util.h"
#include "kiln/models/batch_norm_cnn.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/residual_mlp.h"

namespace kiln::bench {
namespace {

void train_steps(benchmark::State& state, nn::Module& model) {
  ThreadsScope threads(static_cast<int>(state.range(1)));
  const int64_t batch = state.range(0);
  manual_seed(0);
  Tensor x = randn({batch, 1, 28, 28});
  Tensor y = randint(0, 10, {batch});
  optim::Adam optimizer(model.parameters(), {.lr = 1e-3});
  model.train();
  auto step = [&] {
    Tensor loss = nn::functional::cross_entropy(model(x), y);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    return loss;
  };
  step();  // warm the allocator and the optimizer state
  for (auto _ : state) benchmark::DoNotOptimize(step());
  state.SetItemsProcessed(state.iterations() * batch);
}

void BM_TrainFashionMLP(benchmark::State& state) {
  auto model = models::build(models::FashionMLPConfig{});
  train_steps(state, *model);
}

void BM_TrainResidualMLP(benchmark::State& state) {
  auto model = models::build(models::MLPConfig{});
  train_steps(state, *model);
}

void BM_TrainBatchNormCNN(benchmark::State& state) {
  auto model = models::build(models::BatchNormCNNConfig{});
  train_steps(state, *model);
}

void grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
  for (int64_t threads : {1, 2}) b->Args({128, threads});
}

BENCHMARK(BM_TrainFashionMLP)->Apply(grid);
BENCHMARK(BM_TrainResidualMLP)->Apply(grid);
BENCHMARK(BM_TrainBatchNormCNN)->Apply(grid);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
