// Exported models through kiln_rt beside the same model eager and JIT-compiled (freeze on,
// as export freezes), in one run: what deployment costs or saves per call. The artifact
// is exported once per process to a temporary directory; kiln_rt (libkiln_rt.so, its own
// copy of kiln's runtime and thread pool) runs it with the default thread count, as do the
// eager and compiled calls. Args: model (0 FashionMLP, 1 ResidualMLP), batch.
// BM_KilnRtStatic runs an artifact exported for that batch size only (--batch N): what the
// symbolic sizes of a dynamic-batch artifact cost per call.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "bench_util.h"
#include "kiln/export.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/residual_mlp.h"
#include "kiln_rt.hpp"

namespace kiln::bench {
namespace {

struct Subject {
  std::shared_ptr<nn::Module> model;
  std::string artifact;
};

// The artifacts are removed when the program ends.
struct Subjects : std::map<std::pair<int, int64_t>, Subject> {
  ~Subjects() {
    for (const auto& [key, s] : *this) std::filesystem::remove_all(s.artifact);
  }
};

// Model `which` (eval mode, fixed weights), exported once with a dynamic batch, or for one
// batch size only (`static_batch` > 0).
Subject& subject(int which, int64_t static_batch = 0) {
  static Subjects subjects;
  auto it = subjects.find({which, static_batch});
  if (it != subjects.end()) return it->second;
  manual_seed(0);
  Subject s;
  s.model = which == 0 ? std::shared_ptr<nn::Module>(models::build(models::FashionMLPConfig{}))
                       : std::shared_ptr<nn::Module>(models::build(models::MLPConfig{}));
  s.model->eval();
  s.artifact = (std::filesystem::temp_directory_path() /
                ("kiln-bench-export-" + std::to_string(::getpid()) + "-" + std::to_string(which) +
                 "-" + std::to_string(static_batch)))
                   .string();
  ExportOptions options;
  options.dynamic_batch = static_batch == 0;
  export_model(s.model, {filled({static_batch ? static_batch : 2, 1, 28, 28}, 1)}, s.artifact,
               options);
  return subjects.emplace(std::make_pair(which, static_batch), std::move(s)).first->second;
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"model", "batch"});
  for (int64_t model : {0, 1})
    for (int64_t batch : {1, 256}) b->Args({model, batch});
  b->Unit(benchmark::kMicrosecond);
}

void BM_Eager(benchmark::State& state) {
  Subject& s = subject(static_cast<int>(state.range(0)));
  Tensor x = filled({state.range(1), 1, 28, 28}, 1);
  NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize((*s.model)(x));
}
BENCHMARK(BM_Eager)->Apply(args);

void BM_Compiled(benchmark::State& state) {
  Subject& s = subject(static_cast<int>(state.range(0)));
  Tensor x = filled({state.range(1), 1, 28, 28}, 1);
  NoGradGuard no_grad;
  auto compiled = compile(s.model, {.freeze = true});
  compiled(x);
  for (auto _ : state) benchmark::DoNotOptimize(compiled(x));
}
BENCHMARK(BM_Compiled)->Apply(args);

void run_kiln_rt(benchmark::State& state, const Subject& s) {
  Tensor x = filled({state.range(1), 1, 28, 28}, 1);
  kiln_rt::Model model(s.artifact);
  const float* data = x.data_ptr<float>();
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  model.run({kiln_rt::Model::input(data, shape)});
  for (auto _ : state) benchmark::DoNotOptimize(model.run({kiln_rt::Model::input(data, shape)}));
}

void BM_KilnRt(benchmark::State& state) {
  run_kiln_rt(state, subject(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_KilnRt)->Apply(args);

void BM_KilnRtStatic(benchmark::State& state) {
  run_kiln_rt(state, subject(static_cast<int>(state.range(0)), state.range(1)));
}
BENCHMARK(BM_KilnRtStatic)->Apply(args);

// Loading an artifact: manifest, digests, weights, graph parse, dlopen, first plan.
void BM_KilnRtLoad(benchmark::State& state) {
  Subject& s = subject(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(kiln_rt::Model(s.artifact));
}
BENCHMARK(BM_KilnRtLoad)->ArgName("model")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
