// `kiln demo`: the main job. Builds FashionMLP from its config, prints its tree and summary,
// trains it on Fashion-MNIST, saves a checkpoint, rebuilds the model from that file alone and
// checks that the reloaded model scores exactly the same test accuracy; then compiles it
// (its IR, the compiled accuracy, a recompile reason, the fusion groups, eager vs compiled
// latency) and shows a graph break and its fix.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/models/registry.h"
#include "kiln/models/saved_model.h"
#include "kiln/models/training.h"
#include "kiln/nn/summary.h"
#include "kiln/serialize/durable_files.h"

namespace kiln::cli {

namespace {

// Median microseconds per call of `fn` over `calls` calls, in 5 rounds.
template <class Fn>
double median_us(Fn&& fn, int calls) {
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    rounds.push_back(took.count() / calls);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

// Eager vs compiled latency of the trained model (inference, no gradients).
template <class Compiled>
void show_latency(nn::Module& model, Compiled& compiled, const models::ClassificationData& data) {
  NoGradGuard no_grad;
  std::cout << "latency (median, no gradients):\n";
  for (int64_t batch : {1, 256}) {
    Tensor x = data.test_images.slice(0, 0, batch);
    compiled(x);  // compiles this batch size first
    int calls = batch == 1 ? 2000 : 50;
    double eager = median_us([&] { model(x); }, calls);
    double native = median_us([&] { compiled(x); }, calls);
    std::printf("  batch %4lld: eager %8.1f us, compiled %8.1f us (%.2fx)\n",
                static_cast<long long>(batch), eager, native, eager / native);
  }
}

// Traces the trained model, prints its IR, evaluates it compiled (batches of 256, so the
// last batch of 16 shows a recompile reason), prints its fusion groups and its eager vs
// compiled latency, then shows HalvingMLP's graph break and its while_loop rewrite.
// Returns whether the compiled accuracy matches the eager one (within 0.001).
bool show_compile(const std::shared_ptr<nn::Module>& model,
                  const models::ClassificationData& data, double eager_accuracy) {
  model->eval();
  const int64_t n = data.test_images.size(0), batch = 256;
  std::cout << "\n---- compile ----\nthe traced graph of FashionMLP (one forward, batch "
            << batch << "):\n"
            << ir::print_graph(*trace(*model, data.test_images.slice(0, 0, batch)));
  std::vector<std::string> recompiles;
  set_log_channels("recompiles");
  set_log_sink([&](std::string_view, std::string_view line) { recompiles.emplace_back(line); });
  auto compiled = compile(model);
  int64_t correct = 0;
  {
    NoGradGuard no_grad;
    for (int64_t start = 0; start < n; start += batch) {
      int64_t end = std::min(n, start + batch);
      Tensor logits = compiled(data.test_images.slice(0, start, end));
      correct += (logits.argmax(1) == data.test_labels.slice(0, start, end)).sum().item<int64_t>();
    }
  }
  set_log_sink({});
  set_log_channels("");
  const double accuracy = static_cast<double>(correct) / static_cast<double>(n);
  // Generated kernels may differ from eager in the last bits, which could flip a near-tie.
  const bool same_accuracy = std::abs(accuracy - eager_accuracy) <= 1e-3;
  std::printf("compiled (cpu backend: fused native kernels) test accuracy: %.4f (%s eager)\n",
              accuracy, accuracy == eager_accuracy ? "identical to"
                        : same_accuracy            ? "within 0.001 of"
                                                   : "DIFFERENT from");
  for (const std::string& line : recompiles) std::cout << "KILN_LOG=recompiles: " << line << "\n";
  ExplainReport report = explain(compiled);
  std::cout << "graphs compiled: " << report.graph_count() << "\n"
            << report.entries.at(0).backend << "\nfusion groups (one generated kernel each):\n";
  for (const std::string& g : report.entries.at(0).fusion_groups) std::cout << "  " << g << "\n";
  show_latency(*model, compiled, data);

  // A data-dependent loop: a graph break, pointing at the line; the while_loop rewrite
  // compiles to one graph.
  manual_seed(0);
  auto halving = models::build_model("halving_mlp", models::resolve_config("halving_mlp"));
  Tensor x = randn({4, 1, 28, 28});
  std::cout << "\nHalvingMLP: while (abs(X).sum() > 1) X = X / 2;\n";
  try {
    compile(halving, {.fullgraph = true})(x);
  } catch (const GraphBreakError& e) {
    std::cout << "  compile(fullgraph): " << e.what() << "\n";
  }
  auto segmented = compile(halving);
  bool same_segmented = (segmented(x) == (*halving)(x)).all().item<bool>();
  std::cout << "  compile(): runs in " << explain(segmented).entries.at(0).segments
            << " segments per call, results " << (same_segmented ? "equal" : "DIFFERENT")
            << " to eager\n";
  auto rewritten =
      models::build_model("halving_mlp_while", models::resolve_config("halving_mlp_while"));
  rewritten->load_state_dict(halving->state_dict());
  auto one_graph = compile(rewritten, {.fullgraph = true});
  bool same_while = (one_graph(x) == (*halving)(x)).all().item<bool>();
  std::cout << "HalvingMLPWhile (kiln::while_loop): " << explain(one_graph).graph_count()
            << " graph, results " << (same_while ? "equal" : "DIFFERENT") << " to eager\n";
  return same_accuracy && same_segmented && same_while;
}

}  // namespace

int run_demo(const std::vector<std::string>& raw) {
  Args args(command_spec("demo"), raw);
  const models::FitOptions fit_options{.epochs = static_cast<int>(args.integer("epochs", 10)),
                                       .batch_size = args.integer("batch-size", 128),
                                       .seed = static_cast<uint64_t>(args.integer("seed", 0))};
  const double lr = args.number("lr", 1e-3);
  const std::string path =
      args.str("save", (std::filesystem::temp_directory_path() / "kiln-demo.safetensors").string());
  durable::check_writable_file(path, "--save");  // before training, not after

  manual_seed(fit_options.seed);
  const json::Value config = models::resolve_config("fashion_mlp");
  std::shared_ptr<nn::Module> model = models::build_model("fashion_mlp", config);
  std::cout << "FashionMLP " << json::dump(config) << "\n\n"
            << *model << "\n\n"
            << nn::summary(*model, {{-1, 1, 28, 28}}) << "\n";

  models::ClassificationData data = models::load_classification_data();
  std::cout << "training on " << data.train_images.size(0) << " images: " << fit_options.epochs
            << " epochs, batch " << fit_options.batch_size << ", Adam lr " << lr
            << " with cosine decay, " << num_threads() << " threads\n";
  models::train_classifier(*model, data.train_images, data.train_labels,
                           {.fit = fit_options, .lr = lr},
                           models::progress_bar(isatty(fileno(stdout)) != 0));
  const double accuracy = models::evaluate(*model, data.test_images, data.test_labels);
  std::printf("test accuracy: %.4f\n", accuracy);

  models::save_model(*model, "fashion_mlp", config, path);
  models::SavedModel reloaded = models::load_model(path);
  const double reloaded_accuracy =
      models::evaluate(*reloaded.model, data.test_images, data.test_labels);
  std::printf("saved %s, rebuilt %s from it: test accuracy %.4f (%s)\n", path.c_str(),
              reloaded.name.c_str(), reloaded_accuracy,
              reloaded_accuracy == accuracy ? "identical" : "DIFFERENT");
  bool compiled_ok = show_compile(model, data, accuracy);
  return reloaded_accuracy == accuracy && compiled_ok ? 0 : 1;
}

}  // namespace kiln::cli
