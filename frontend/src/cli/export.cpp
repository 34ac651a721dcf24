// `kiln export --checkpoint FILE -o DIR [...]` (options in command_specs.cpp): rebuilds a
// model from a checkpoint alone and compiles it ahead of time with kiln::export_model into an
// artifact directory that kiln_rt (and `kiln run`) loads without the compiler.
#include "kiln/export.h"

#include <iostream>

#include "args.h"
#include "commands.h"
#include "kiln/kiln.h"
#include "kiln/models/saved_model.h"

namespace kiln::cli {

namespace {

// The example batch when the batch is dynamic: 2, because sizes 0 and 1 are always static.
constexpr int64_t kDynamicExampleBatch = 2;

}  // namespace

int run_export(const std::vector<std::string>& raw) {
  Args args(command_spec("export"), raw);
  KILN_CHECK(args.has("checkpoint"),
             "expected --checkpoint FILE (a file written by `kiln train --save FILE`), "
             "found none. Fix: kiln export --checkpoint FILE -o DIR.");
  KILN_CHECK(args.has("output"),
             "expected -o DIR (the artifact directory to write), found none. Fix: kiln "
             "export --checkpoint FILE -o DIR.");
  const bool dynamic = !args.has("batch");  // --dynamic-batch is the default
  const int64_t batch = dynamic ? kDynamicExampleBatch : args.integer("batch", 1);
  const std::string path = args.str("checkpoint", "");

  models::SavedModel saved = models::load_model(path);
  saved.model->eval();
  std::vector<int64_t> shape = checkpoint_sample_shape(path);
  shape.insert(shape.begin(), batch);
  check_example_fits(*saved.model, shape);
  // Every catalog model (the transformer too: it reads image rows) takes float images; the
  // values only drive the trace and the compiled-vs-eager check.
  manual_seed(0);
  Tensor example = randn(IntList(shape.data(), shape.size()));

  ExportOptions options;
  options.dynamic_batch = dynamic;
  options.portable = args.has("portable");
  options.embed_weights = args.has("embed-weights");
  options.device = Device(args.str("device", "cpu"));
  if (args.has("max-batch")) options.max_batch = args.integer("max-batch", 0);
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
