// The compiled CPU backend (kiln::compile, backend "cpu") against eager execution, the interp
// reference backend and plain baselines, each group in one run. Compiled calls run under
// NoGradGuard (calls that need gradients fall back to interp). Groups:
//   Chain:    relu(x*a + b)*c - d on x, a, b of [4096, 4096] float32 (16M elements) and
//             per-column vectors c, d of [4096] (broadcast over rows), beside a STREAM-triad
//             loop p[i] = q[i] + s*r[i] on 16M floats. Bytes counted: what the fused chain
//             must move (x, a, b, c, d read once, the output written once), and 3 arrays for
//             the triad, so the bandwidth ratio compiled / triad is meaningful.
//   Softmax, LayerNorm: [4096, 1024] over the last dim (single composite kernels eagerly).
//   ResidualMLP (784-256 x 4 blocks-10) at batch 1, 64, 1024, and the products of its Linear
//             layers alone at batch 1 (cblas_sgemv: the floor of a batch-1 call) and 1024
//             (cblas_sgemm), split across threads like kiln's matmul kernel: "FLOP/s" counts
//             the layers' 2*batch*in*out, for both.
//   FashionMLP (eval) at batch 1 and 256; BatchNormCNN (bn_cnn, eval) at batch 1 and 64.
//   Attention: the fused scaled_dot_product_attention op against matmul + softmax + matmul.
//   Transformer (the catalog TransformerClassifier, eval) at batch 1 and 64; a BERT-sized
//             encoder (6 x d384, 12 heads, FFN 1536) on 8 x 41 tokens with a padding mask.
//   Compile: a fresh compile + first call of ResidualMLP, without the on-disk kernel cache
//             (KILN_CACHE_DIR=off) and with a warm one (a temp dir filled by one compile).
// After the runs a Markdown table of within-run ratios and targets is printed (the source of
// docs/perf.md's "Compiled CPU backend" section). The guard-check cost is in bench_compile.
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "kiln/models.h"

namespace kiln::bench {
namespace {

namespace F = kiln::nn::functional;

constexpr int64_t kSide = 4096;  // the chain's [4096, 4096] = 16M elements
constexpr int64_t k16M = kSide * kSide;

int all_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<int64_t> thread_counts() {
  std::vector<int64_t> out = {1};
  if (all_threads() > 1) out.push_back(all_threads());
  return out;
}

void by_threads(benchmark::internal::Benchmark* b) {
  b->ArgName("threads");
  for (int64_t t : thread_counts()) b->Arg(t);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

enum class Mode { Eager, Compiled, Interp };

// Fails the benchmark when the compiled result is not the eager one (within float rounding:
// generated math and evaluation order may differ in the last bits).
bool same_result(benchmark::State& state, const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes()) {
    state.SkipWithError("compiled output shape differs from eager");
    return false;
  }
  const double scale = 1 + want.abs().max().item<double>();
  const double worst = (got - want).abs().max().item<double>();
  if (worst <= 1e-4 * scale) return true;
  state.SkipWithError(("compiled differs from eager by " + std::to_string(worst)).c_str());
  return false;
}

// "1 kernels (5 ops), 2 other nodes" out of the cpu backend's note in explain.
std::string kernel_summary(const std::string& note) {
  size_t end = note.find(" other nodes");
  size_t begin = note.rfind("; ", end);
  if (end == std::string::npos || begin == std::string::npos) return note.substr(0, 60);
  return note.substr(begin + 2, end + 12 - begin - 2);
}

// Times calls of `model` on `inputs`: eagerly, or through a compiled module whose one graph
// every timed call hits. The first calls (outside the timing) warm the caching allocator,
// and the compiled result is checked against the eager one.
template <class M, class... In>
void time_calls(benchmark::State& state, const std::shared_ptr<M>& model, Mode mode,
                const In&... inputs) {
  NoGradGuard no_grad;
  Tensor want = nn::call(*model, inputs...);
  if (mode == Mode::Eager) {
    benchmark::DoNotOptimize(nn::call(*model, inputs...));
    for (auto _ : state) benchmark::DoNotOptimize(nn::call(*model, inputs...));
    return;
  }
  CompileOptions options;
  options.backend = mode == Mode::Compiled ? "cpu" : "interp";
  auto compiled = compile(model, options);
  if (!same_result(state, compiled(inputs...), want)) return;
  benchmark::DoNotOptimize(compiled(inputs...));
  for (auto _ : state) benchmark::DoNotOptimize(compiled(inputs...));
  ExplainReport report = explain(compiled);
  if (report.graph_count() != 1 || report.eager_calls != 0 || report.entries.size() != 1) {
    state.SkipWithError("expected every call to hit one compiled graph");
    return;
  }
  if (mode == Mode::Compiled) state.SetLabel(kernel_summary(report.entries[0].backend));
}

// ---- the elementwise chain ----

struct Chain : nn::Module {
  Tensor forward(const Tensor& x, const Tensor& a, const Tensor& b, const Tensor& c,
                 const Tensor& d) {
    return relu(x * a + b) * c - d;
  }
};

void chain(benchmark::State& state, Mode mode) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  Tensor x = filled({kSide, kSide}, 1), a = filled({kSide, kSide}, 2),
         b = filled({kSide, kSide}, 3), c = filled({kSide}, 4), d = filled({kSide}, 5);
  time_calls(state, std::make_shared<Chain>(), mode, x, a, b, c, d);
  state.SetBytesProcessed(state.iterations() * (4 * k16M + 2 * kSide) * 4);
}

void BM_Chain_Eager(benchmark::State& state) {
  chain(state, Mode::Eager);
}
void BM_Chain_Compiled(benchmark::State& state) {
  chain(state, Mode::Compiled);
}
void BM_Chain_Interp(benchmark::State& state) {
  chain(state, Mode::Interp);
}
BENCHMARK(BM_Chain_Eager)->Apply(by_threads);
BENCHMARK(BM_Chain_Compiled)->Apply(by_threads);
BENCHMARK(BM_Chain_Interp)->Apply(by_threads);

// The bandwidth reference: p = q + s*r over preallocated buffers, split like kiln's kernels.
void BM_Triad_Baseline(benchmark::State& state) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  HostBuffer p(k16M), q(k16M), r(k16M);
  fill(q.data(), k16M, 1);
  fill(r.data(), k16M, 2);
  float *pp = p.data(), *pq = q.data(), *pr = r.data();
  const float s = 0.5f;
  for (auto _ : state) {
    parallel_for(0, k16M, kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) pp[i] = pq[i] + s * pr[i];
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * k16M * 4);
}
BENCHMARK(BM_Triad_Baseline)->Apply(by_threads);

// ---- row-wise composites over [4096, 1024]: softmax, layer_norm, attention's masked
// softmax and cross-entropy (each one row kernel when compiled) ----

struct SoftmaxRows : nn::Module {
  Tensor forward(const Tensor& x) override { return F::softmax(x, -1); }
};

// Attention's softmax(scores * scale + mask): eagerly three kernels and two temporaries.
struct MaskedSoftmaxRows : nn::Module {
  MaskedSoftmaxRows() { mask = register_buffer("mask", filled({1024}, 3)); }
  Tensor forward(const Tensor& x) override { return F::softmax(x * 0.125 + mask, -1); }
  Tensor mask;
};

// cross_entropy(logits, targets): log_softmax as one row kernel, then nll_loss.
struct CrossEntropyRows : nn::Module {
  CrossEntropyRows() {
    std::vector<int64_t> t(4096);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int64_t>((i * 37) % 1024);
    targets = register_buffer("targets", Tensor::from_vector(t, {4096}));
  }
  Tensor forward(const Tensor& x) override { return F::cross_entropy(x, targets); }
  Tensor targets;
};

enum class Rows { Softmax, LayerNorm, MaskedSoftmax, CrossEntropy };

void rows(benchmark::State& state, Mode mode, Rows which) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  Tensor x = filled({4096, 1024}, 1);
  manual_seed(0);
  switch (which) {
    case Rows::Softmax:
      time_calls(state, std::make_shared<SoftmaxRows>(), mode, x);
      break;
    case Rows::LayerNorm:
      time_calls(state, std::make_shared<nn::LayerNorm>(1024), mode, x);
      break;
    case Rows::MaskedSoftmax:
      time_calls(state, std::make_shared<MaskedSoftmaxRows>(), mode, x);
      break;
    case Rows::CrossEntropy:
      time_calls(state, std::make_shared<CrossEntropyRows>(), mode, x);
      break;
  }
  // Read once and (except the loss) written once.
  const int arrays = which == Rows::CrossEntropy ? 1 : 2;
  state.SetBytesProcessed(state.iterations() * arrays * 4096 * 1024 * 4);
}

void BM_Softmax_Eager(benchmark::State& state) {
  rows(state, Mode::Eager, Rows::Softmax);
}
void BM_Softmax_Compiled(benchmark::State& state) {
  rows(state, Mode::Compiled, Rows::Softmax);
}
void BM_LayerNorm_Eager(benchmark::State& state) {
  rows(state, Mode::Eager, Rows::LayerNorm);
}
void BM_LayerNorm_Compiled(benchmark::State& state) {
  rows(state, Mode::Compiled, Rows::LayerNorm);
}
void BM_MaskedSoftmax_Eager(benchmark::State& state) {
  rows(state, Mode::Eager, Rows::MaskedSoftmax);
}
void BM_MaskedSoftmax_Compiled(benchmark::State& state) {
  rows(state, Mode::Compiled, Rows::MaskedSoftmax);
}
void BM_CrossEntropy_Eager(benchmark::State& state) {
  rows(state, Mode::Eager, Rows::CrossEntropy);
}
void BM_CrossEntropy_Compiled(benchmark::State& state) {
  rows(state, Mode::Compiled, Rows::CrossEntropy);
}
BENCHMARK(BM_Softmax_Eager)->Apply(by_threads);
BENCHMARK(BM_Softmax_Compiled)->Apply(by_threads);
BENCHMARK(BM_LayerNorm_Eager)->Apply(by_threads);
BENCHMARK(BM_LayerNorm_Compiled)->Apply(by_threads);
BENCHMARK(BM_MaskedSoftmax_Eager)->Apply(by_threads);
BENCHMARK(BM_MaskedSoftmax_Compiled)->Apply(by_threads);
BENCHMARK(BM_CrossEntropy_Eager)->Apply(by_threads);
BENCHMARK(BM_CrossEntropy_Compiled)->Apply(by_threads);

// ---- models ----

// 2 * batch * in * out summed over the model's weight matrices (Linear layers).
double linear_flops(const nn::Module& model, int64_t batch) {
  double flops = 0;
  for (const auto& [path, w] : model.named_parameters())
    if (w.dim() == 2) flops += 2.0 * static_cast<double>(batch) * static_cast<double>(w.numel());
  return flops;
}

void set_flops(benchmark::State& state, double flops_per_call) {
  state.counters["FLOP/s"] =
      benchmark::Counter(flops_per_call, benchmark::Counter::kIsIterationInvariantRate);
}

std::shared_ptr<models::ResidualMLP> residual_mlp() {
  manual_seed(0);
  auto model = models::build(models::MLPConfig{});
  model->eval();
  return model;
}

// Args: batch, threads.
void batch_by_threads(benchmark::internal::Benchmark* b, std::vector<int64_t> batches) {
  b->ArgNames({"batch", "threads"})->ArgsProduct({std::move(batches), thread_counts()});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

void residual(benchmark::State& state, Mode mode) {
  const int64_t batch = state.range(0);
  ThreadsScope threads(static_cast<int>(state.range(1)));
  auto model = residual_mlp();
  time_calls(state, model, mode, filled({batch, 784}, 1));
  set_flops(state, linear_flops(*model, batch));
}

void BM_ResidualMLP_Eager(benchmark::State& state) {
  residual(state, Mode::Eager);
}
void BM_ResidualMLP_Compiled(benchmark::State& state) {
  residual(state, Mode::Compiled);
}
void BM_ResidualMLP_Interp(benchmark::State& state) {
  residual(state, Mode::Interp);
}
void residual_args(benchmark::internal::Benchmark* b) {
  batch_by_threads(b, {1, 64, 1024});
}
BENCHMARK(BM_ResidualMLP_Eager)->Apply(residual_args);
BENCHMARK(BM_ResidualMLP_Compiled)->Apply(residual_args);
BENCHMARK(BM_ResidualMLP_Interp)->Apply(residual_args);

// C[m, n] = A[m, k] * W[n, k]^T, cut across threads as backends/cpu/kernels/linalg.cpp cuts
// one product (rows of C, or columns when there are few rows; a gemv for one row).
void gemm_like_kiln(int64_t m, int64_t n, int64_t k, const float* a, const float* w, float* c) {
  auto part = [&](int64_t rows, int64_t cols, const float* pa, const float* pw, float* pc) {
    if (rows == 1) {  // kiln's kernel takes a gemv for one row
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(cols), static_cast<int>(k), 1.0f,
                  pw, static_cast<int>(k), pa, 1, 0.0f, pc, 1);
      return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
                static_cast<int>(cols), static_cast<int>(k), 1.0f, pa, static_cast<int>(k), pw,
                static_cast<int>(k), 0.0f, pc, static_cast<int>(n));
  };
  const int64_t flops = m * n * k;
  if (m >= 2 * num_threads() && flops >= (int64_t{1} << 18)) {
    parallel_for(0, m, std::max<int64_t>(8, (int64_t{1} << 17) / std::max<int64_t>(n * k, 1)),
                 [&](int64_t lo, int64_t hi) { part(hi - lo, n, a + lo * k, w, c + lo * n); });
  } else if (flops >= (int64_t{1} << 18) && n >= 64) {
    parallel_for(0, n, 32,
                 [&](int64_t lo, int64_t hi) { part(m, hi - lo, a, w + lo * k, c + lo); });
  } else {
    part(m, n, a, w, c);
  }
}

// The GEMMs of ResidualMLP's Linear layers alone (no bias, activation or residual add), on
// preallocated buffers: the rate the compiled model's matmuls could reach at best.
void BM_ResidualMLP_GemmBaseline(benchmark::State& state) {
  const int64_t batch = state.range(0);
  ThreadsScope threads(static_cast<int>(state.range(1)));
  auto model = residual_mlp();
  std::vector<Tensor> weights;
  int64_t widest = 0;
  for (const auto& [path, w] : model->named_parameters()) {
    if (w.dim() != 2) continue;
    weights.push_back(w);
    widest = std::max({widest, w.size(0), w.size(1)});
  }
  HostBuffer x(static_cast<size_t>(batch * widest)), y(static_cast<size_t>(batch * widest));
  fill(x.data(), x.size(), 1);
  for (auto _ : state) {
    float *in = x.data(), *out = y.data();
    for (const Tensor& w : weights) {
      gemm_like_kiln(batch, w.size(0), w.size(1), in, w.data_ptr<float>(), out);
      std::swap(in, out);
    }
    benchmark::ClobberMemory();
  }
  set_flops(state, linear_flops(*model, batch));
}
BENCHMARK(BM_ResidualMLP_GemmBaseline)->Apply([](benchmark::internal::Benchmark* b) {
  batch_by_threads(b, {1, 1024});
});

void fashion(benchmark::State& state, Mode mode) {
  const int64_t batch = state.range(0);
  ThreadsScope threads(static_cast<int>(state.range(1)));
  manual_seed(0);
  auto model = models::build(models::FashionMLPConfig{});
  model->eval();
  time_calls(state, model, mode, filled({batch, 784}, 1));
  set_flops(state, linear_flops(*model, batch));
}

void BM_FashionMLP_Eager(benchmark::State& state) {
  fashion(state, Mode::Eager);
}
void BM_FashionMLP_Compiled(benchmark::State& state) {
  fashion(state, Mode::Compiled);
}
void BM_FashionMLP_Interp(benchmark::State& state) {
  fashion(state, Mode::Interp);
}
void fashion_args(benchmark::internal::Benchmark* b) {
  batch_by_threads(b, {1, 256});
}
BENCHMARK(BM_FashionMLP_Eager)->Apply(fashion_args);
BENCHMARK(BM_FashionMLP_Compiled)->Apply(fashion_args);
BENCHMARK(BM_FashionMLP_Interp)->Apply(fashion_args);

void bn_cnn(benchmark::State& state, Mode mode) {
  const int64_t batch = state.range(0);
  ThreadsScope threads(static_cast<int>(state.range(1)));
  manual_seed(0);
  auto model = models::build(models::BatchNormCNNConfig{});
  model->eval();
  time_calls(state, model, mode, filled({batch, 1, 28, 28}, 1));
}

void BM_BatchNormCNN_Eager(benchmark::State& state) {
  bn_cnn(state, Mode::Eager);
}
void BM_BatchNormCNN_Compiled(benchmark::State& state) {
  bn_cnn(state, Mode::Compiled);
}
void BM_BatchNormCNN_Interp(benchmark::State& state) {
  bn_cnn(state, Mode::Interp);
}
void bn_cnn_args(benchmark::internal::Benchmark* b) {
  batch_by_threads(b, {1, 64});
}
BENCHMARK(BM_BatchNormCNN_Eager)->Apply(bn_cnn_args);
BENCHMARK(BM_BatchNormCNN_Compiled)->Apply(bn_cnn_args);
BENCHMARK(BM_BatchNormCNN_Interp)->Apply(bn_cnn_args);

// ---- attention ----

// softmax(q kᵀ / sqrt(D) + mask) v on [heads, L, D] float32: the fused op against the
// composition it replaced (matmul, masked softmax, matmul; PyTorch's math path), eagerly.
// Shapes: the catalog transformer's (64 images x 4 heads, 28 tokens, D 16), the BERT-sized
// encoder's (8 x 12 heads, 41 tokens, D 32, key-padding mask) and a long causal one
// (8 heads, 1024 tokens, D 64). "FLOP/s" counts the two products, 4 L S D per head.
struct AttentionShape {
  int64_t heads, tokens, depth;
  bool padding, causal;
};
constexpr AttentionShape kAttentionShapes[] = {
    {256, 28, 16, false, false}, {96, 41, 32, true, false}, {8, 1024, 64, false, true}};

void attention(benchmark::State& state, bool fused) {
  const AttentionShape& s = kAttentionShapes[state.range(0)];
  ThreadsScope threads(static_cast<int>(state.range(1)));
  NoGradGuard no_grad;
  Tensor q = filled({s.heads, s.tokens, s.depth}, 1), k = filled({s.heads, s.tokens, s.depth}, 2),
         v = filled({s.heads, s.tokens, s.depth}, 3);
  Tensor mask;  // bool, true = may attend: the first 3/4 of the keys, or the causal triangle
  if (s.padding) mask = (arange(s.tokens) < s.tokens * 3 / 4).view({1, 1, s.tokens});
  if (s.causal) mask = arange(s.tokens).unsqueeze(0) <= arange(s.tokens).unsqueeze(1);
  const double scale = 1 / std::sqrt(static_cast<double>(s.depth));
  auto call = [&] {
    if (fused)  // the long shape as a user would call it: is_causal skips the future blocks
      return F::scaled_dot_product_attention(q, k, v, s.causal ? Tensor() : mask, 0.0, s.causal,
                                             scale);
    Tensor scores = matmul(q * scale, k.transpose(-2, -1));
    if (mask.defined()) scores = masked_fill(scores, logical_not(mask), -INFINITY);
    return matmul(F::softmax(scores, -1), v);
  };
  benchmark::DoNotOptimize(call());
  for (auto _ : state) benchmark::DoNotOptimize(call());
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * s.heads * s.tokens * s.tokens * s.depth,
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

void BM_Attention_Fused(benchmark::State& state) {
  attention(state, true);
}
void BM_Attention_Composed(benchmark::State& state) {
  attention(state, false);
}
void attention_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "threads"});
  for (int64_t t : thread_counts())
    for (int64_t shape = 0; shape < 3; ++shape) b->Args({shape, t});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_Attention_Fused)->Apply(attention_args);
BENCHMARK(BM_Attention_Composed)->Apply(attention_args);

// ---- attention models ----

void transformer(benchmark::State& state, Mode mode) {
  const int64_t batch = state.range(0);
  ThreadsScope threads(static_cast<int>(state.range(1)));
  manual_seed(0);
  auto model = models::build(models::TransformerClassifierConfig{});
  model->eval();
  time_calls(state, model, mode, filled({batch, 1, 28, 28}, 1));
}

void BM_Transformer_Eager(benchmark::State& state) {
  transformer(state, Mode::Eager);
}
void BM_Transformer_Compiled(benchmark::State& state) {
  transformer(state, Mode::Compiled);
}
void transformer_args(benchmark::internal::Benchmark* b) {
  batch_by_threads(b, {1, 64});
}
BENCHMARK(BM_Transformer_Eager)->Apply(transformer_args);
BENCHMARK(BM_Transformer_Compiled)->Apply(transformer_args);

// A BERT-sized encoder (6 pre-norm layers, d_model 384, 12 heads, FFN 1536, GELU) on 8
// sequences of 41 tokens with a key-padding mask (lengths 41, 37, 33, ...), as
// bench/compare_peers.py's bert_encoder_masked.
struct BertEncoder : nn::Module {
  BertEncoder() {
    auto layer = std::make_shared<nn::TransformerEncoderLayer>(
        384, 12,
        nn::TransformerEncoderLayerOptions{.dim_feedforward = 1536,
                                           .activation = nn::TransformerActivation::GELU,
                                           .batch_first = true,
                                           .norm_first = true});
    encoder = register_module("encoder", std::make_shared<nn::TransformerEncoder>(
                                             layer, 6, std::make_shared<nn::LayerNorm>(384)));
  }
  Tensor forward(const Tensor& x, const Tensor& padding) { return encoder(x, Tensor(), padding); }
  nn::ModulePtr<nn::TransformerEncoder> encoder;
};

constexpr int64_t kBertBatch = 8, kBertTokens = 41;

Tensor bert_padding_mask() {
  Tensor mask = Tensor::empty({kBertBatch, kBertTokens}, kBool);
  bool* p = mask.data_ptr<bool>();
  for (int64_t n = 0; n < kBertBatch; ++n) {
    const int64_t length = kBertTokens - (4 * n) % (kBertTokens / 2);
    for (int64_t s = 0; s < kBertTokens; ++s) p[n * kBertTokens + s] = s >= length;
  }
  return mask;
}

void bert(benchmark::State& state, Mode mode) {
  ThreadsScope threads(static_cast<int>(state.range(0)));
  manual_seed(0);
  auto model = std::make_shared<BertEncoder>();
  model->eval();
  time_calls(state, model, mode, filled({kBertBatch, kBertTokens, 384}, 1), bert_padding_mask());
}

void BM_BertEncoderMasked_Eager(benchmark::State& state) {
  bert(state, Mode::Eager);
}
void BM_BertEncoderMasked_Compiled(benchmark::State& state) {
  bert(state, Mode::Compiled);
}
BENCHMARK(BM_BertEncoderMasked_Eager)->Apply(by_threads);
BENCHMARK(BM_BertEncoderMasked_Compiled)->Apply(by_threads);

// ---- compile time ----

// Sets an environment variable for one benchmark and restores it afterwards.
class EnvScope {
 public:
  EnvScope(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~EnvScope() {
    if (saved_) {
      setenv(name_, saved_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

// One iteration: compile() a fresh CompiledModule of ResidualMLP and call it once (batch 1,
// no gradients): tracing, the passes, code generation and one run. A compile before the
// timing pays LLVM's one-time initialization (`kiln bench` reports a process's first
// compile) and fills the kernel cache when there is one.
void compile_residual(benchmark::State& state) {
  ThreadsScope threads(1);
  auto model = residual_mlp();
  Tensor x = filled({1, 784}, 1);
  NoGradGuard no_grad;
  compile(model)(x);
  std::optional<CompiledModule<models::ResidualMLP>> compiled;
  for (auto _ : state) {
    state.PauseTiming();
    compiled.reset();  // tearing the last JIT module down is not part of compiling
    state.ResumeTiming();
    compiled.emplace(compile(model));
    benchmark::DoNotOptimize((*compiled)(x));
  }
  if (compiled) state.SetLabel(explain(*compiled).entries.at(0).backend);
}

void BM_Compile_ResidualMLP_Cold(benchmark::State& state) {
  EnvScope cache("KILN_CACHE_DIR", "off");
  compile_residual(state);
}
BENCHMARK(BM_Compile_ResidualMLP_Cold)->Unit(benchmark::kMillisecond)->UseRealTime();

// With the on-disk kernel cache in a fresh directory that the setup compile fills. (Where
// the cache is not implemented the directory stays empty and this equals the cold case; the
// label says how many files the cache holds.)
void BM_Compile_ResidualMLP_WarmCache(benchmark::State& state) {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "kiln_bench_cache_XXXXXX").string();
  if (!mkdtemp(dir.data())) {
    state.SkipWithError("cannot create a temporary cache directory");
    return;
  }
  {
    EnvScope cache("KILN_CACHE_DIR", dir);
    compile_residual(state);
  }
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) files += entry.is_regular_file();
  state.SetLabel("cache: " + std::to_string(files) + " files");
  fs::remove_all(dir);
}
BENCHMARK(BM_Compile_ResidualMLP_WarmCache)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- the summary: ratios within this run, against the targets ----

// Console output as usual, plus each benchmark's real time and counters kept by name (the
// median aggregate when there are repetitions).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;

  struct Result {
    double seconds = 0;
    std::map<std::string, double> counters;
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      const bool aggregate = run.run_type == Run::RT_Aggregate;
      if (aggregate && run.aggregate_name != "median") continue;
      const std::string name = run.run_name.str();
      if (!aggregate && medians_.count(name)) continue;  // a median of it is already kept
      Result r;
      r.seconds = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      for (const auto& [key, counter] : run.counters) r.counters[key] = counter.value;
      results_[name] = r;
      if (aggregate) medians_.insert(name);
    }
  }

  const Result* find(const std::string& name) const {
    auto it = results_.find(name);
    return it == results_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, Result> results_;
  std::set<std::string> medians_;
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Prints one Markdown row per ratio whose two benchmarks both ran.
void print_ratios(const RatioReporter& rep) {
  struct Row {
    std::string what, num, den;
    std::string metric;  // "time": den time / num time; else num counter / den counter
    double target = 0;   // 0: no target
  };
  std::vector<Row> table;
  for (int64_t t : thread_counts()) {
    const std::string th = "threads:" + std::to_string(t);
    const std::string tt = ", " + std::to_string(t) + "T";
    table.push_back({"chain: compiled / triad bandwidth" + tt, "BM_Chain_Compiled/" + th,
                     "BM_Triad_Baseline/" + th, "bytes_per_second", 0.80});
    table.push_back({"chain: eager / compiled time" + tt, "BM_Chain_Eager/" + th,
                     "BM_Chain_Compiled/" + th, "time", 4.0});
    table.push_back({"chain: interp / compiled time" + tt, "BM_Chain_Interp/" + th,
                     "BM_Chain_Compiled/" + th, "time"});
    table.push_back({"chain: eager / triad bandwidth" + tt, "BM_Chain_Eager/" + th,
                     "BM_Triad_Baseline/" + th, "bytes_per_second"});
    table.push_back({"softmax [4096, 1024]: eager / compiled time" + tt, "BM_Softmax_Eager/" + th,
                     "BM_Softmax_Compiled/" + th, "time"});
    table.push_back({"layer_norm [4096, 1024]: eager / compiled time" + tt,
                     "BM_LayerNorm_Eager/" + th, "BM_LayerNorm_Compiled/" + th, "time"});
    table.push_back({"softmax(x * scale + mask) [4096, 1024]: eager / compiled time" + tt,
                     "BM_MaskedSoftmax_Eager/" + th, "BM_MaskedSoftmax_Compiled/" + th, "time"});
    table.push_back({"cross_entropy [4096, 1024]: eager / compiled time" + tt,
                     "BM_CrossEntropy_Eager/" + th, "BM_CrossEntropy_Compiled/" + th, "time"});
    for (int64_t batch : {1, 64, 1024}) {
      const std::string a = "batch:" + std::to_string(batch) + "/" + th;
      const std::string what = "ResidualMLP batch " + std::to_string(batch);
      table.push_back({what + ": eager / compiled time" + tt, "BM_ResidualMLP_Eager/" + a,
                       "BM_ResidualMLP_Compiled/" + a, "time", batch == 1 ? 3.0 : 0.0});
      table.push_back({what + ": interp / compiled time" + tt, "BM_ResidualMLP_Interp/" + a,
                       "BM_ResidualMLP_Compiled/" + a, "time"});
    }
    table.push_back(
        {"ResidualMLP batch 1: eager time / GEMV-only time (the most compiling can "
         "gain)" +
             tt,
         "BM_ResidualMLP_Eager/batch:1/" + th, "BM_ResidualMLP_GemmBaseline/batch:1/" + th,
         "time"});
    table.push_back({"ResidualMLP batch 1: compiled / GEMV-only FLOP rate" + tt,
                     "BM_ResidualMLP_Compiled/batch:1/" + th,
                     "BM_ResidualMLP_GemmBaseline/batch:1/" + th, "FLOP/s"});
    table.push_back({"ResidualMLP batch 1024: compiled / GEMM-only FLOP rate" + tt,
                     "BM_ResidualMLP_Compiled/batch:1024/" + th,
                     "BM_ResidualMLP_GemmBaseline/batch:1024/" + th, "FLOP/s", 0.85});
    table.push_back({"ResidualMLP batch 1024: eager / GEMM-only FLOP rate" + tt,
                     "BM_ResidualMLP_Eager/batch:1024/" + th,
                     "BM_ResidualMLP_GemmBaseline/batch:1024/" + th, "FLOP/s"});
    for (int64_t batch : {1, 256}) {
      const std::string a = "batch:" + std::to_string(batch) + "/" + th;
      table.push_back({"FashionMLP batch " + std::to_string(batch) + ": eager / compiled time" + tt,
                       "BM_FashionMLP_Eager/" + a, "BM_FashionMLP_Compiled/" + a, "time"});
    }
    const std::string a = "batch:64/" + th;
    table.push_back({"BatchNormCNN batch 64: eager / compiled time" + tt,
                     "BM_BatchNormCNN_Eager/" + a, "BM_BatchNormCNN_Compiled/" + a, "time"});
    for (int64_t shape = 0; shape < 3; ++shape) {
      const char* names[] = {"transformer [256, 28, 16]", "BERT [96, 41, 32] + padding mask",
                             "causal [8, 1024, 64]"};
      const std::string a = "shape:" + std::to_string(shape) + "/" + th;
      table.push_back({std::string("attention ") + names[shape] + ": composed / fused time" + tt,
                       "BM_Attention_Composed/" + a, "BM_Attention_Fused/" + a, "time"});
    }
    for (int64_t batch : {1, 64}) {
      const std::string b = "batch:" + std::to_string(batch) + "/" + th;
      table.push_back(
          {"TransformerClassifier batch " + std::to_string(batch) + ": eager / compiled time" + tt,
           "BM_Transformer_Eager/" + b, "BM_Transformer_Compiled/" + b, "time", 1.3});
    }
    table.push_back({"BERT-sized encoder, 8 x 41 tokens, padding mask: eager / compiled time" + tt,
                     "BM_BertEncoderMasked_Eager/" + th, "BM_BertEncoderMasked_Compiled/" + th,
                     "time", 1.3});
  }

  std::cout << "\n| ratio (within this run) | value | target | verdict |\n|---|---|---|---|\n";
  for (const Row& row : table) {
    const RatioReporter::Result* num = rep.find(row.num + "/real_time");
    const RatioReporter::Result* den = rep.find(row.den + "/real_time");
    if (!num || !den) continue;
    double value = 0;
    if (row.metric == "time") {
      value = den->seconds > 0 ? num->seconds / den->seconds : 0;
    } else {
      auto n = num->counters.find(row.metric), d = den->counters.find(row.metric);
      if (n == num->counters.end() || d == den->counters.end() || d->second == 0) continue;
      value = n->second / d->second;
    }
    std::cout << "| " << row.what << " | " << fixed(value, 2) << " | "
              << (row.target > 0 ? ">= " + fixed(row.target, 2) : "") << " | "
              << (row.target > 0 ? (value >= row.target ? "met" : "missed") : "") << " |\n";
  }
  if (const RatioReporter::Result* cold = rep.find("BM_Compile_ResidualMLP_Cold/real_time")) {
    const double ms = cold->seconds * 1e3;
    std::cout << "| ResidualMLP cold compile + first call (ms) | " << fixed(ms, 1)
              << " | <= 1000 | " << (ms <= 1000 ? "met" : "missed") << " |\n";
  }
  if (const RatioReporter::Result* warm = rep.find("BM_Compile_ResidualMLP_WarmCache/real_time"))
    std::cout << "| ResidualMLP compile + first call, warm kernel cache (ms) | "
              << fixed(warm->seconds * 1e3, 1) << " | | |\n";
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  kiln::init();  // OpenBLAS core selection before any baseline calls cblas_sgemm
  kiln::bench::add_context();
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  kiln::bench::RatioReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_Color
                                                            : benchmark::ConsoleReporter::OO_None);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  kiln::bench::print_ratios(reporter);
  benchmark::Shutdown();
  return 0;
}
