// Data-parallel figures (docs/distributed.md). Run as the ranks of a job:
//
//   kiln launch --nproc 2 -- build/bench/bench_distributed      # every rank runs the same
//   build/bench/bench_distributed                                 # one process: the baseline
//
// BM_AllReduce: bus bandwidth of a float32 all-reduce (2 (n-1)/n x bytes / time, NCCL's
// convention) beside BM_Memcpy of the same bytes, the bound of a copy through memory.
// BM_TrainStep: one FashionMLP training step (forward, backward, SGD); under a job it is
// wrapped in DistributedDataParallel, each rank taking batch/world of the global batch.
// bench/ddp_scaling.py runs both setups and PyTorch DDP (gloo) and prints the ratios.
//
// Collectives must be issued the same number of times on every rank, so each benchmark runs
// a fixed number of iterations. With KILN_BENCH_PIN=1 each rank pins itself to the core of its
// local rank.
#include <sched.h>

#include <cstring>

#include "bench_util.h"
#include "kiln/distributed.h"
#include "kiln/models.h"

namespace kiln::bench {
namespace {

namespace dist = kiln::distributed;

void BM_AllReduce(benchmark::State& state) {
  const int64_t n = state.range(0) / 4;
  Tensor t = ones({n});
  if (dist::world_size() == 1) {
    state.SkipWithError("needs a job: kiln launch --nproc 2 -- bench_distributed");
    return;
  }
  dist::barrier();
  for (auto _ : state) dist::all_reduce(t);
  const double world = dist::world_size();
  const double bytes = static_cast<double>(n) * 4;
  state.counters["busbw_GBps"] = benchmark::Counter(2 * (world - 1) / world * bytes * state.iterations() / 1e9,
                                                    benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AllReduce)->Arg(1 << 20)->Arg(4 << 20)->Arg(25 << 20)->Iterations(20)->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0)) / 4;
  HostBuffer a(n), b(n);
  fill(a.data(), n, 1);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n * 4);
    benchmark::ClobberMemory();
  }
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(n) * 4 * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Memcpy)->Arg(25 << 20)->Iterations(20)->Unit(benchmark::kMillisecond)->UseRealTime();

// Global batch state.range(0), split over the ranks.
void BM_TrainStep(benchmark::State& state) {
  const int world = dist::world_size();
  const int64_t global_batch = state.range(0), local = global_batch / world;
  manual_seed(0);
  auto model = models::build(models::FashionMLPConfig{.dropout = 0.0});
  std::shared_ptr<nn::Module> step_model = model;
  if (world > 1) step_model = std::make_shared<dist::DistributedDataParallel>(model);
  optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  Tensor x = randn({local, 784});
  Tensor y = randint(0, 10, {local});
  auto step = [&] {
    Tensor loss = nn::functional::cross_entropy((*step_model)(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 3; ++i) step();  // warm up the allocator and the connections
  if (world > 1) dist::barrier();
  for (auto _ : state) step();
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(global_batch) * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(std::to_string(world) + " rank(s) x " + std::to_string(num_threads()) + " thread(s)");
}
BENCHMARK(BM_TrainStep)->Arg(128)->Arg(512)->Iterations(100)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  const char* world = std::getenv("KILN_WORLD_SIZE");
  if (world && std::atoi(world) > 1) {
    if (const char* pin = std::getenv("KILN_BENCH_PIN"); pin && std::string(pin) == "1") {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(kiln::distributed::local_rank(), &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    kiln::distributed::init();
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  kiln::distributed::destroy();
  return 0;
}
