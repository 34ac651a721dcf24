// `kiln export --checkpoint FILE -o DIR [--batch N | --dynamic-batch] [--portable]
// [--embed-weights]`: rebuilds
// a model from a checkpoint alone and compiles it ahead of time with kiln::export_model into
// an artifact directory that kiln_rt (and `kiln run`) loads without the compiler.
#include "kiln/export.h"

#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/models/saved_model.h"
#include "kiln/serialize/checkpoint.h"

namespace kiln::cli {

namespace {

// The example batch when the batch is dynamic: 2, because sizes 0 and 1 are always static.
constexpr int64_t kDynamicExampleBatch = 2;

// One sample's shape as the checkpoint records it (the config entry's "input_shape"); the
// Fashion-MNIST image shape for checkpoints written before it was recorded.
std::vector<int64_t> sample_shape(const std::string& path) {
  const json::Value& entry = load_checkpoint(path).config;
  const json::Value* shape = entry.is_object() ? entry.find("input_shape") : nullptr;
  if (!shape) return {1, 28, 28};
  std::vector<int64_t> out;
  bool ok = shape->is_array();
  if (ok) {
    for (const json::Value& d : shape->as_array()) {
      ok = ok && d.is_int() && d.as_int() > 0;
      if (ok) out.push_back(d.as_int());
    }
  }
  KILN_CHECK(ok,
             "[export] expected the checkpoint's input_shape to be a list of positive sizes "
             "(one sample, e.g. [1, 28, 28]), found ",
             json::dump(*shape), " in '", path,
             "'. Fix: re-save the checkpoint with kiln::models::save_model or `kiln train "
             "--save`.");
  return out;
}

}  // namespace

int run_export(const std::vector<std::string>& raw) {
  // -o is the short form of --output.
  std::vector<std::string> normalized = raw;
  for (std::string& a : normalized)
    if (a == "-o") a = "--output";
  Args args("export", normalized, {"checkpoint", "output", "batch", "max-batch"},
            {"dynamic-batch", "portable", "embed-weights"});
  KILN_CHECK(args.has("checkpoint"),
             "[export] expected --checkpoint FILE (a file written by `kiln train --save FILE`), "
             "found none. Fix: kiln export --checkpoint FILE -o DIR.");
  KILN_CHECK(args.has("output"),
             "[export] expected -o DIR (the artifact directory to write), found none. Fix: kiln "
             "export --checkpoint FILE -o DIR.");
  KILN_CHECK(!(args.has("batch") && args.has("dynamic-batch")),
             "[export] expected either --batch N (a static batch size) or --dynamic-batch (any "
             "batch size), found both. Fix: drop one of them.");
  const bool dynamic = !args.has("batch");  // --dynamic-batch is the default
  const int64_t batch = dynamic ? kDynamicExampleBatch : args.positive("batch", 1);
  const std::string path = args.str("checkpoint", "");

  models::SavedModel saved = models::load_model(path);
  saved.model->eval();
  std::vector<int64_t> shape = sample_shape(path);
  shape.insert(shape.begin(), batch);
  // Every catalog model (the transformer too: it reads image rows) takes float images; the
  // values only drive the trace and the compiled-vs-eager check.
  manual_seed(0);
  Tensor example = randn(IntList(shape.data(), shape.size()));

  ExportOptions options;
  options.dynamic_batch = dynamic;
  options.portable = args.has("portable");
  options.embed_weights = args.has("embed-weights");
  if (args.has("max-batch")) options.max_batch = args.positive("max-batch", 0);
  options.model_name = saved.name;
  options.config = saved.config;
  options.metadata = saved.metadata;
  options.metadata.erase("format");  // the checkpoint file's format ("pt"), not the model's
  ExportResult result = export_model(saved.model, {example}, args.str("output", ""), options);
  std::cout << "model " << saved.name << " " << json::dump(saved.config) << "\n"
            << result.summary();
  return 0;
}

}  // namespace kiln::cli
