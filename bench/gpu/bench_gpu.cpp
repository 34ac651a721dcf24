// The GPU benchmarks behind the CUDA targets (docs/perf.md), measured by
// tests/gpu/device_check.sh on a GPU machine, where tests/gpu/torch_peers.py times PyTorch on
// the same work and tests/gpu/gpu_targets.py turns both into ratios. The GPU machine has no
// code generator: compiled work reaches it as GPU artifacts exported on the build machine
// (tests/gpu/prepare.sh, KILN_GPU_BENCH_ARTIFACTS and KILN_GPU_ARTIFACTS name their folders),
// run through kiln_rt on device buffers (kiln_rt_run_on_device); eager work runs through kiln.
//
// Bandwidth and GEMM figures are GPU time between two events per iteration (manual time);
// batch-1 calls are wall-clock per call, waiting for the result, as a caller sees them. Each
// benchmark skips with the reason where there is no GPU or no artifact. KILN_GPU_BENCH_SMALL=1
// shrinks every size (to run the code paths on the fake driver, where times mean nothing).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/cuda/device.h"
#include "kiln/cuda/nccl.h"
#include "kiln/distributed.h"
#include "kiln/cuda/gemm.h"
#include "kiln/cuda/stream.h"
#include "kiln/kiln.h"
#include "kiln/models/residual_mlp.h"
#include "kiln/nn/layers/transformer.h"
#include "kiln_rt.h"

namespace kiln {
namespace {

// `full`, or a small size under KILN_GPU_BENCH_SMALL.
int64_t size(int64_t full, int64_t small) {
  static const bool shrink = std::getenv("KILN_GPU_BENCH_SMALL") != nullptr;
  return shrink ? small : full;
}

bool have_gpu(benchmark::State& state) {
  if (cuda::is_available()) return true;
  state.SkipWithError(("no CUDA device: " + cuda::unavailable_reason()).c_str());
  return false;
}

// Runs `work` once, untimed; a kiln::Error skips the benchmark with its message instead of
// ending the program, so that one broken benchmark leaves the others their figures.
bool first_call_works(benchmark::State& state, const std::function<void()>& work) {
  try {
    work();
    return true;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return false;
  }
}

// Times `work` by events on the current stream: the GPU's time only. One untimed call first
// loads kernels, captures CUDA graphs and fills the allocator's cache.
void time_on_gpu(benchmark::State& state, const std::function<void()>& work) {
  const cuda::Stream stream = cuda::current_stream();
  if (!first_call_works(state, work)) return;
  work();
  cuda::synchronize();
  for (auto _ : state) {
    cuda::Event start(true), end(true);
    start.record(stream);
    work();
    end.record(stream);
    end.synchronize();
    state.SetIterationTime(start.elapsed_ms(end) / 1e3);
  }
}

// Bytes read and written per iteration, reported as a rate.
void count_bytes(benchmark::State& state, double bytes) {
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

void count_flops(benchmark::State& state, double flops) {
  state.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// An exported model loaded through kiln_rt, run on tensors already on GPU 0.
class Artifact {
 public:
  // `folder_env` names the folder holding NAME.kiln; null model when it is not there.
  Artifact(const char* folder_env, const std::string& name) {
    const char* folder = std::getenv(folder_env);
    if (!folder) {
      why_ = std::string(folder_env) + " is not set (tests/gpu/device_check.sh sets it)";
      return;
    }
    const std::string path = std::string(folder) + "/" + name + ".kiln";
    model_ = kiln_rt_load(path.c_str());
    if (!model_) why_ = kiln_rt_last_error();
  }
  ~Artifact() { kiln_rt_free(model_); }
  Artifact(const Artifact&) = delete;
  Artifact& operator=(const Artifact&) = delete;

  bool ready(benchmark::State& state) const {
    if (model_) return true;
    state.SkipWithError(why_.c_str());
    return false;
  }
  // Queues one call on the current stream; the outputs are let go of at once (in stream order).
  void run(const Tensor& x) const {
    const std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    const kiln_rt_tensor in = {x.raw_data(), static_cast<int32_t>(x.dtype()),
                               static_cast<int32_t>(shape.size()), shape.data()};
    kiln_rt_outputs* out =
        kiln_rt_run_on_device(model_, &in, 1, cuda::current_stream().handle());
    KILN_CHECK(out != nullptr, kiln_rt_last_error());
    kiln_rt_outputs_free(out);
  }

 private:
  kiln_rt_model* model_ = nullptr;
  std::string why_;
};

// ---- Memory-bound work: a copy, an elementwise chain, the row kernels ----

const int64_t kChainRows = size(262144, 64), kChainCols = 1024;  // 256M float32 (1 GiB)
const int64_t kRows = size(16384, 16), kRowWidth = 4096;

Tensor on_gpu(Shape shape) { return randn(shape).to(kCUDA); }

void BM_CopyOnDevice(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const Tensor x = on_gpu({kChainRows, kChainCols});
  Tensor y = Tensor::empty(x.sizes(), kFloat32, kCUDA);
  time_on_gpu(state, [&] { y.copy_(x); });
  count_bytes(state, 2.0 * static_cast<double>(x.nbytes()));
}
BENCHMARK(BM_CopyOnDevice)->UseManualTime()->Unit(benchmark::kMillisecond);

// relu(x * a + b) * c - d, one kernel per op.
void BM_ChainEager(benchmark::State& state) {
  if (!have_gpu(state)) return;
  NoGradGuard no_grad;
  const Tensor x = on_gpu({kChainRows, kChainCols});
  time_on_gpu(state, [&] { relu(x * 1.5 + 0.25) * 2.0 - 0.5; });
  count_bytes(state, 2.0 * static_cast<double>(x.nbytes()));  // what one fused pass moves
}
BENCHMARK(BM_ChainEager)->UseManualTime()->Unit(benchmark::kMillisecond);

// The same chain compiled into one generated kernel (the artifact "chain").
void BM_ChainCompiled(benchmark::State& state) {
  static Artifact chain("KILN_GPU_BENCH_ARTIFACTS", "chain");
  if (!have_gpu(state) || !chain.ready(state)) return;
  const Tensor x = on_gpu({kChainRows, kChainCols});
  time_on_gpu(state, [&] { chain.run(x); });
  count_bytes(state, 2.0 * static_cast<double>(x.nbytes()));
}
BENCHMARK(BM_ChainCompiled)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_SoftmaxEager(benchmark::State& state) {
  if (!have_gpu(state)) return;
  NoGradGuard no_grad;
  const Tensor x = on_gpu({kRows, kRowWidth});
  time_on_gpu(state, [&] { nn::functional::softmax(x, -1); });
  count_bytes(state, 2.0 * static_cast<double>(x.nbytes()));
}
BENCHMARK(BM_SoftmaxEager)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_SoftmaxCompiled(benchmark::State& state) {
  static Artifact softmax("KILN_GPU_BENCH_ARTIFACTS", "softmax");
  if (!have_gpu(state) || !softmax.ready(state)) return;
  const Tensor x = on_gpu({kRows, kRowWidth});
  time_on_gpu(state, [&] { softmax.run(x); });
  count_bytes(state, 2.0 * static_cast<double>(x.nbytes()));
}
BENCHMARK(BM_SoftmaxCompiled)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_LayerNormEager(benchmark::State& state) {
  if (!have_gpu(state)) return;
  NoGradGuard no_grad;
  nn::LayerNorm norm(kRowWidth);
  norm.to(kCUDA);
  const Tensor x = on_gpu({kRows, kRowWidth});
  time_on_gpu(state, [&] { norm(x); });
  count_bytes(state, 2.0 * static_cast<double>(x.nbytes()));
}
BENCHMARK(BM_LayerNormEager)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_LayerNormCompiled(benchmark::State& state) {
  static Artifact layer_norm("KILN_GPU_BENCH_ARTIFACTS", "layer_norm");
  if (!have_gpu(state) || !layer_norm.ready(state)) return;
  const Tensor x = on_gpu({kRows, kRowWidth});
  time_on_gpu(state, [&] { layer_norm.run(x); });
  count_bytes(state, 2.0 * static_cast<double>(x.nbytes()));
}
BENCHMARK(BM_LayerNormCompiled)->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- GEMMs: 4096³ through kiln's matmul (cuBLASLt's heuristic choice) ----

void gemm(benchmark::State& state, DType dtype, bool tf32) {
  if (!have_gpu(state)) return;
  NoGradGuard no_grad;
  const int64_t n = size(4096, 64);
  const Tensor a = on_gpu({n, n}).to(dtype), b = on_gpu({n, n}).to(dtype);
  cuda::set_allow_tf32(tf32);
  time_on_gpu(state, [&] { matmul(a, b); });
  cuda::set_allow_tf32(false);
  count_flops(state, 2.0 * static_cast<double>(n * n * n));
}
void BM_GemmFloat32Tf32(benchmark::State& state) { gemm(state, kFloat32, true); }
void BM_GemmBFloat16(benchmark::State& state) { gemm(state, kBFloat16, false); }
BENCHMARK(BM_GemmFloat32Tf32)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GemmBFloat16)->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- ResidualMLP (the seed config, artifact residual_mlp from tests/gpu/prepare.sh) ----

// Batch 1, the input on the GPU and the result waited for: the latency a caller sees, with
// the call replayed as a CUDA graph (the default) or not (KILN_CUDA_GRAPHS=0 when loading).
void residual_mlp_batch1(benchmark::State& state, bool graphs) {
  if (!graphs) setenv("KILN_CUDA_GRAPHS", "0", 1);
  Artifact mlp("KILN_GPU_ARTIFACTS", "residual_mlp");
  unsetenv("KILN_CUDA_GRAPHS");
  if (!have_gpu(state) || !mlp.ready(state)) return;
  const Tensor x = on_gpu({1, 1, 28, 28});
  const cuda::Stream stream = cuda::current_stream();
  if (!first_call_works(state, [&] { mlp.run(x); })) return;
  for (int i = 0; i < 20; ++i) mlp.run(x);
  stream.synchronize();
  for (auto _ : state) {
    mlp.run(x);
    stream.synchronize();
  }
}
void BM_ResidualMlpBatch1Replayed(benchmark::State& state) { residual_mlp_batch1(state, true); }
void BM_ResidualMlpBatch1Uncaptured(benchmark::State& state) { residual_mlp_batch1(state, false); }
BENCHMARK(BM_ResidualMlpBatch1Replayed)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ResidualMlpBatch1Uncaptured)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Batch 4096: the rate of its GEMMs (stem, two per block, head), to set beside cuBLAS's.
void BM_ResidualMlpBatch4096(benchmark::State& state) {
  static Artifact mlp("KILN_GPU_ARTIFACTS", "residual_mlp");
  if (!have_gpu(state) || !mlp.ready(state)) return;
  const models::MLPConfig c;
  const int64_t batch = size(4096, 8);
  const Tensor x = on_gpu({batch, 1, 28, 28});
  time_on_gpu(state, [&] { mlp.run(x); });
  const double macs = static_cast<double>(c.d_in * c.d_hidden + 2 * c.num_blocks * c.d_hidden * c.d_hidden +
                                          c.d_hidden * c.d_out);
  count_flops(state, 2.0 * static_cast<double>(batch) * macs);
}
BENCHMARK(BM_ResidualMlpBatch4096)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- A BERT-sized encoder: 6 layers of d384, 12 heads, FFN 1536, batch 32 x 128 tokens ----

std::shared_ptr<nn::TransformerEncoder> bert_sized_encoder() {
  nn::TransformerEncoderLayerOptions o;
  o.dim_feedforward = 1536;
  o.dropout = 0;
  o.batch_first = true;
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(384, 12, o);
  auto encoder = std::make_shared<nn::TransformerEncoder>(layer, 6);
  encoder->eval();
  return encoder;
}

void BM_EncoderEager(benchmark::State& state) {
  if (!have_gpu(state)) return;
  NoGradGuard no_grad;
  auto encoder = bert_sized_encoder();
  encoder->to(kCUDA);
  const Tensor x = on_gpu({size(32, 1), size(128, 8), 384});
  time_on_gpu(state, [&] { (*encoder)(x); });
}
BENCHMARK(BM_EncoderEager)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_EncoderCompiled(benchmark::State& state) {
  static Artifact encoder("KILN_GPU_BENCH_ARTIFACTS", "encoder");
  if (!have_gpu(state) || !encoder.ready(state)) return;
  const Tensor x = on_gpu({size(32, 1), size(128, 8), 384});
  time_on_gpu(state, [&] { encoder.run(x); });
}
BENCHMARK(BM_EncoderCompiled)->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- The nccl process group on one GPU (one rank: a machine with one GPU holds one) ----

// A one-rank nccl group, made once; null (with the reason) without a GPU or NCCL.
distributed::ProcessGroup* one_rank_group(benchmark::State& state) {
  if (!have_gpu(state)) return nullptr;
  if (!cuda::nccl::available()) {
    state.SkipWithError(("no NCCL: " + cuda::nccl::unavailable_reason()).c_str());
    return nullptr;
  }
  // Never destroyed: the communicator would outlive the driver in the exit's destructors.
  static std::string failure;
  static distributed::ProcessGroup* group = []() -> distributed::ProcessGroup* {
    try {
      auto store = std::make_shared<distributed::TcpStore>(
          distributed::TcpStoreOptions{.host = "127.0.0.1", .port = 0, .is_server = true});
      return distributed::new_group("nccl", 0, 1, store, std::chrono::seconds(60)).release();
    } catch (const std::exception& e) {
      failure = e.what();
      return nullptr;
    }
  }();
  if (!group) state.SkipWithError(failure.c_str());
  return group;
}

// An all-reduce as a caller sees it: issued, then waited for (wall clock per call).
void nccl_all_reduce(benchmark::State& state, int64_t bytes) {
  distributed::ProcessGroup* group = one_rank_group(state);
  if (!group) return;
  Tensor t = zeros({size(bytes, 4096) / 4}, TensorOptions(kFloat32).with_device(kCUDA));
  if (!first_call_works(state, [&] { group->all_reduce(t); })) return;
  for (int i = 0; i < 10; ++i) group->all_reduce(t);
  for (auto _ : state) group->all_reduce(t);
  count_bytes(state, static_cast<double>(t.nbytes()));
}
void BM_NcclAllReduce1MiB(benchmark::State& state) { nccl_all_reduce(state, int64_t{1} << 20); }
void BM_NcclAllReduce64MiB(benchmark::State& state) { nccl_all_reduce(state, int64_t{64} << 20); }
BENCHMARK(BM_NcclAllReduce1MiB)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NcclAllReduce64MiB)->UseRealTime()->Unit(benchmark::kMicrosecond);

// A training step of an MLP 784-2048-2048-10 at batch 256 (SGD), plain or under DDP on the
// one-rank group: the difference is what DDP's buckets, copies and all-reduces cost on a GPU
// (tests/gpu/torch_peers.py times PyTorch's DDP on NCCL on the same step).
void mlp_step(benchmark::State& state, bool ddp) {
  distributed::ProcessGroup* group = one_rank_group(state);
  if (!group) return;
  manual_seed(0);
  const int64_t width = size(2048, 64);
  auto mlp = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(784, width), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(width, width), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(width, 10));
  mlp->to(kCUDA);
  std::shared_ptr<nn::Module> model = mlp;
  if (ddp) {
    model = std::make_shared<distributed::DistributedDataParallel>(
        mlp, distributed::DistributedDataParallelOptions{.group = group});
  }
  optim::SGD opt(mlp->parameters(), {.lr = 0.01});
  const Tensor x = on_gpu({size(256, 8), 784});
  const Tensor y = randint(0, 10, {size(256, 8)}).to(kCUDA);
  auto step = [&] {
    opt.zero_grad();
    nn::functional::cross_entropy((*model)(x), y).backward();
    opt.step();
    cuda::synchronize();
  };
  if (!first_call_works(state, step)) return;
  for (int i = 0; i < 5; ++i) step();
  for (auto _ : state) step();
}
void BM_MlpStepPlain(benchmark::State& state) { mlp_step(state, false); }
void BM_MlpStepDdp(benchmark::State& state) { mlp_step(state, true); }
BENCHMARK(BM_MlpStepPlain)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MlpStepDdp)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  kiln::init();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
