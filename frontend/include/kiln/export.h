// kiln::export_model: compiles a trained model ahead of time into a directory that the
// deployable runtime kiln_rt (frontend/rt: no compiler, no rest of the frontend) loads and runs.
//
//   model->eval();
//   kiln::ExportOptions options;
//   options.dynamic_batch = true;                     // any batch size (dim 0 of every input)
//   kiln::ExportResult r = kiln::export_model(model, {example}, "fashion.kiln", options);
//   std::cout << r.summary();
//
// The directory holds manifest.json (kiln/artifact/manifest.h: signature, guards, target CPU,
// config, hashes), one graph per served shape range as IR text (graph0.kir), its generated
// kernels as a shared library and an object file (kernels0.so, kernels0.o), and every
// parameter, buffer and folded constant in weights.safetensors. With ExportOptions::device
// kiln::kCUDA the kernels are PTX and a cubin for sm_90 instead (a GPU artifact; exporting one
// needs no GPU). docs/aot.md describes it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/artifact/manifest.h"
#include "kiln/compile.h"
#include "kiln/nn/module.h"
#include "kiln/serialize/json.h"

namespace kiln {

struct ExportOptions {
  // Dim 0 of every input becomes dynamic (any size >= 1), besides the dims marked with
  // kiln::mark_dynamic on the example inputs. Other dims keep the example's size.
  bool dynamic_batch = false;
  // The largest batch a dynamic batch serves (0: unbounded): kiln_rt refuses larger ones,
  // as torch.export's Dim(max=...) does.
  int64_t max_batch = 0;
  // The inputs' names in the manifest and in error messages ("x" for one input, input0, ...
  // otherwise).
  std::vector<std::string> input_names{};
  // The pass pipeline. Empty: the default, with a second canonicalize after decompose so
  // that what decompose makes of frozen state (an eval BatchNorm's scale and shift) folds.
  std::string pipeline{};
  // Kernels for any CPU of this architecture instead of this host's (no AVX2 or FMA on
  // x86-64): slower, but the artifact runs everywhere.
  bool portable = false;
  // Recorded in the manifest: the catalog name and config that rebuild the model, and free
  // metadata (a checkpoint's, e.g. "test_accuracy").
  std::string model_name{};
  json::Value config{};
  std::map<std::string, std::string> metadata{};
  // Export checks the compiled graph against the eager forward on the example inputs and
  // refuses to write an artifact where |compiled - eager| > tolerance * (1 + |eager|).
  double tolerance = 1e-4;
  // The weights inside a shared library (weights.so: the safetensors bytes behind a data
  // symbol, assembled with .incbin) instead of weights.safetensors, for deployments that ship
  // code objects only. kiln_rt checks its digest like every file's before loading it.
  bool embed_weights = false;
  // For modules whose forward takes several tensors: runs the forward on them and returns
  // its outputs, flattened. Empty: the module's forward(x) on the single example input.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> forward{};
  // Where the artifact runs. kiln::kCUDA: a GPU artifact, its graphs compiled by the backend
  // "cuda" (fusion groups as PTX for sm_90, run by newer GPUs through the driver's compiler,
  // and assembled into a cubin), its state uploaded to the GPU when kiln_rt loads it; inputs
  // and outputs of kiln_rt calls stay host tensors. The forward is traced where the model and
  // examples are (the CPU is fine) and placed on the GPU, so no GPU is needed to export: the
  // check against eager then runs only where a GPU is present (ExportResult::unchecked).
  Device device = kCPU;
};

struct ExportResult {
  std::string dir;
  artifact::Manifest manifest;
  std::vector<std::pair<std::string, uint64_t>> files;  // name and size in bytes
  // Largest |compiled - eager| over the example inputs' outputs, for every graph exported
  // (checked against ExportOptions::tolerance before anything is written).
  double max_abs_diff = 0;
  // Why the compiled graphs were not checked against eager ("" when they were): a GPU
  // artifact exported where no GPU is present.
  std::string unchecked;
  double export_ms = 0;
  // "wrote DIR: ..." and one line per file, the signature and the guards.
  std::string summary() const;
};

// Traces the forward of `model` (which must be in eval mode) on `example_inputs` with
// fullgraph semantics: a graph break is refused with the tracer's one-line reason and
// location. Runs the pass pipeline with parameters and buffers frozen, generates the kernels
// and writes the artifact to `dir` atomically (a temporary directory renamed into place; an
// existing artifact there is replaced, any other non-empty directory is refused).
ExportResult export_model(std::shared_ptr<nn::Module> model,
                          const std::vector<Tensor>& example_inputs, const std::string& dir,
                          const ExportOptions& options = {});

// The pipeline export_model runs by default.
std::string default_export_pipeline();

}  // namespace kiln
