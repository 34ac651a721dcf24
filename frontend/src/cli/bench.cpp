// `kiln bench --model NAME [--batch N] [--iters N] [--backend cpu|cuda|interp] [--freeze]
// [--device cpu|cuda[:N]] [--config JSON]`:
// times a catalog model (random weights, eval mode, seed 0, no gradients) eagerly and through
// kiln::compile, and prints µs per call of each, their ratio, the time of the first compiled
// call (trace, passes, code generation) and the backend's compile stats from kiln::explain;
// on a GPU also the kernel launches of one call of each.
// A quick check on one model; bench/bench_compiler.cpp holds the benchmarks with baselines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/fused_kernels.h"
#include "kiln/kiln.h"
#include "kiln/models/registry.h"

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRepeats = 5;  // timed repeats of `iters` calls; the median is reported

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// µs per call of `call`, over `iters` calls; on a GPU until the last call's work is done.
double us_per_call(const std::function<Tensor()>& call, int64_t iters, Device device) {
  Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < iters; ++i) call();
  if (device.is_cuda()) cuda::synchronize(device.index);
  return seconds_since(start) * 1e6 / static_cast<double>(iters);
}

// "12 (4 kernels, 8 library calls)", "3 (1 CUDA graph, 2 copies)": what one call queues on
// the GPU, the kinds it queued none of left out.
std::string launches_of(const std::function<Tensor()>& call) {
  const cuda::LaunchCounts before = cuda::launches_on_this_thread();
  call();
  const cuda::LaunchCounts after = cuda::launches_on_this_thread();
  const struct {
    uint64_t count;
    const char *one, *many;
  } kinds[] = {{after.kernels - before.kernels, "kernel", "kernels"},
               {after.library_calls - before.library_calls, "library call", "library calls"},
               {after.graphs - before.graphs, "CUDA graph", "CUDA graphs"},
               {after.copies - before.copies, "copy", "copies"}};
  uint64_t total = 0;
  std::string parts;
  for (const auto& kind : kinds) {
    if (kind.count == 0) continue;
    total += kind.count;
    parts += (parts.empty() ? "" : ", ") + std::to_string(kind.count) + " " +
             (kind.count == 1 ? kind.one : kind.many);
  }
  return std::to_string(total) + (parts.empty() ? "" : " (" + parts + ")");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string scientific(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

// "  eager            123.45 µs/call": the table's label column padded to one width.
std::string row(const std::string& label, const std::string& value) {
  std::string out = "  " + label;
  out.resize(std::max<size_t>(out.size() + 1, 26), ' ');
  return out + value + "\n";
}

}  // namespace

int run_bench(const std::vector<std::string>& raw) {
  Args args(command_spec("bench"), raw);
  const std::string name = model_option(args);
  const json::Value config = resolved_config(name, args);
  const int64_t batch = args.integer("batch", 1);
  const int64_t iters = args.integer("iters", 100);
  const Device device = device_option(args);
  const std::string backend = args.str("backend", device.is_cuda() ? "cuda" : "cpu");

  manual_seed(0);
  std::shared_ptr<nn::Module> model = models::build_model(name, config);
  model->eval();
  model->to(device);
  // Every catalog model reads Fashion-MNIST images (as `kiln summary` assumes).
  Tensor x = randn({batch, 1, 28, 28}).to(device);
  NoGradGuard no_grad;  // inference: the cpu backend runs its generated kernels
  // The first eager call also initializes lazy modules, before compile() reads the state.
  Tensor want = (*model)(x);

  CompileOptions options;
  options.backend = backend;
  options.freeze = args.has("freeze");
  auto compiled = compile(model, options);
  Clock::time_point start = Clock::now();
  Tensor got = compiled(x);
  const double compile_ms = seconds_since(start) * 1e3;
  const double difference = (got - want).abs().max().item<double>();

  std::function<Tensor()> eager_call = [&] { return (*model)(x); };
  std::function<Tensor()> compiled_call = [&] { return compiled(x); };
  const int64_t warmup = std::min<int64_t>(iters, 3);
  us_per_call(eager_call, warmup, device);
  us_per_call(compiled_call, warmup, device);
  // Interleaved, so that a change in machine load moves both columns alike.
  std::vector<double> eager_us, compiled_us;
  for (int r = 0; r < kRepeats; ++r) {
    eager_us.push_back(us_per_call(eager_call, iters, device));
    compiled_us.push_back(us_per_call(compiled_call, iters, device));
  }
  const double eager = median(eager_us), fast = median(compiled_us);

  ExplainReport report = explain(compiled);
  const std::string ran_on =
      device.is_cuda()
          ? "on " + device.str() + " (" + cuda::get_device_properties(device.index).name + ")"
          : std::to_string(num_threads()) + " thread" + (num_threads() == 1 ? "" : "s");
  std::cout << "model " << name << " " << json::dump(config) << "\n"
            << "input x " << x.type_str() << " (random; weights random, seed 0, eval mode, "
            << "no gradients), " << ran_on << "\n"
            << "median of " << kRepeats << " repeats of " << iters << " calls\n\n"
            << row("eager", fixed(eager, 2) + " µs/call")
            << row("compiled", fixed(fast, 2) + " µs/call (backend " + backend + ")")
            << row("ratio", fixed(eager / fast, 2) + "x (eager / compiled)")
            << row("compile", fixed(compile_ms, 1) +
                                  " ms (the first compiled call: trace, passes, codegen, run)")
            << row("max |compiled - eager|", scientific(difference));
  if (device.is_cuda())
    std::cout << row("launches per call", "eager " + launches_of(eager_call) + ", compiled " +
                                              launches_of(compiled_call));
  std::cout << "\n";
  std::string note = report.entries.empty() ? "" : report.entries[0].backend;
  if (note.empty() && report.graph_break_count() > 0) {
    note = backend +
           ": the forward graph-breaks and runs in segments, on interp (see `kiln "
           "explain --model " +
           name + "`)";
  } else if (note.empty()) {
    note = backend + " (the reference executor)";
  }
  std::cout << "backend: " << note << "\n";
  if (report.eager_calls > 0)
    std::cout << "note: " << report.eager_calls << " compiled calls ran eagerly\n";
  return 0;
}

}  // namespace kiln::cli
