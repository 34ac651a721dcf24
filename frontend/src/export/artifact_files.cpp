// Export's artifact stage: the manifest, the graphs' IR text with their state moved to the
// weights, the kernel libraries and the weights file (artifact_files.h).
#include "artifact_files.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "atomic_dir.h"
#include "kiln/artifact/graph_signature.h"
#include "kiln/artifact/target_record.h"
#include "kiln/cpu/codegen/kernels.h"
#include "kiln/error.h"
#include "kiln/serialize/json.h"
#include "kiln/serialize/safetensors.h"
#include "kiln/sha256.h"
#include "kiln/version.h"

namespace kiln::detail {

namespace fs = std::filesystem;

namespace {

// The optimized graph as the artifact stores it: module state and constants become named
// inputs whose data lives in the weights file (the text keeps only their types), and state
// the passes folded away entirely is dropped.
std::string artifact_graph_text(const ir::Graph& optimized, size_t graph_index,
                                NamedTensors& weights) {
  std::unique_ptr<ir::Graph> g = ir::clone_graph(optimized);
  std::set<const ir::Value*> used;
  for (const auto& node : g->nodes())
    for (const ir::Value* v : node->inputs) used.insert(v);
  for (const ir::GraphOutput& out : g->outputs()) used.insert(out.value);
  std::vector<ir::GraphInput>& ins = g->mutable_inputs();
  std::vector<ir::GraphInput> kept;
  for (size_t i = 0; i < ins.size(); ++i) {
    ir::GraphInput in = std::move(ins[i]);
    if (in.kind != ir::InputKind::Input) {
      if (!used.count(in.value)) continue;
      KILN_CHECK(in.constant.defined(), "[export] graph input '", in.name, "' (",
                 ir::input_kind_name(in.kind),
                 ") has no data to store. Fix: this is a kiln bug in frontend/src/export.");
      if (in.kind == ir::InputKind::Constant)
        in.name = "graph" + std::to_string(graph_index) + ".const" + std::to_string(i);
      bool stored = false;
      for (const auto& [name, t] : weights) stored = stored || name == in.name;
      if (!stored) weights.push_back({in.name, in.constant});
      in.constant = Tensor();
    }
    kept.push_back(std::move(in));
  }
  ins = std::move(kept);
  return ir::print_graph(*g);
}

// The weights as a shared library (ExportOptions::embed_weights): their safetensors bytes
// behind the data symbols kiln_rt looks up, assembled with .incbin by the C compiler driver.
void write_weights_library(const NamedTensors& weights,
                           const std::map<std::string, std::string>& metadata, const fs::path& tmp,
                           const std::string& name) {
  const fs::path bytes = fs::absolute(tmp / ".weights.safetensors");
  const fs::path source = tmp / ".weights.S";
  const std::string quoted = bytes.string();
  KILN_CHECK(quoted.find_first_of("\"\\\n") == std::string::npos,
             "[export] embed_weights needs a directory path without quotes, backslashes or "
             "newlines, found '",
             quoted, "'. Fix: export into a plainer path.");
  std::vector<uint8_t> data = safetensors_bytes(weights, metadata);
  write_file(bytes, std::string(data.begin(), data.end()));
  write_file(source,
             str_cat("  .section .rodata\n  .balign 64\n  .globl ", artifact::kWeightsSymbol, "\n",
                     artifact::kWeightsSymbol, ":\n  .incbin \"", quoted,
                     "\"\nkiln_weights_end:\n  .balign 8\n  .globl ", artifact::kWeightsSizeSymbol,
                     "\n", artifact::kWeightsSizeSymbol, ":\n  .quad kiln_weights_end - ",
                     artifact::kWeightsSymbol, "\n  .section .note.GNU-stack,\"\",@progbits\n"));
  cpu::codegen::link_shared_library("", (tmp / name).string(), {source.string()});
  fs::remove(bytes);
  fs::remove(source);
}

}  // namespace

artifact::Manifest artifact_manifest(const nn::Module& model, const ExportedGraphs& graphs,
                                     const ExportOptions& options) {
  artifact::Manifest m;
  m.symbols = graphs.symbols;
  m.kiln_version = std::string(kVersion);
  m.model = options.model_name.empty() ? model.type_name() : options.model_name;
  m.config = options.config;
  m.metadata = options.metadata;
  m.device = options.device.is_cuda() ? "cuda" : "cpu";
  const ir::Graph& optimized = graphs.graphs.at(0).optimized_graph();
  m.inputs = artifact::graph_inputs(optimized);
  m.outputs = artifact::graph_outputs(optimized);
  return m;
}

void write_artifact_files(const fs::path& dir, const ExportedGraphs& graphs,
                          const ExportOptions& options, artifact::Manifest& m) {
  // The symbols' maxima are a choice no graph shows: the weights record them too.
  const std::map<std::string, std::string> weights_metadata = {
      {artifact::kSymbolsMetadataKey, artifact::symbols_record(m.symbols)}};
  NamedTensors weights;
  if (options.device.is_cuda()) m.target = {artifact::kGpuArtifactArch, artifact::kGpuArtifactChip, {}};
  for (size_t g = 0; g < graphs.graphs.size(); ++g) {
    const ExportedGraph& exported = graphs.graphs[g];
    artifact::GraphEntry e;
    std::string index = std::to_string(g);
    e.graph = "graph" + index + ".kir";
    e.symbols = exported.symbols;
    write_file(dir / e.graph, artifact_graph_text(exported.optimized_graph(), g, weights));
    if (exported.gpu && !exported.gpu->ptx().kernels.empty()) {
      e.kernel_count = exported.gpu->stats().kernels;
      e.kernels = "kernels" + index + ".ptx";
      e.object = "kernels" + index + ".cubin";
      write_file(dir / e.kernels, exported.gpu->ptx().ptx);
      write_file(dir / e.object, exported.cubin);
    }
    if (!exported.compiled) {
      m.graphs.push_back(std::move(e));
      continue;
    }
    const cpu::compiler::CompiledGraph& compiled = *exported.compiled;
    if (const cpu::codegen::KernelModule* kernels = compiled.kernel_module()) {
      e.kernel_count = compiled.stats().kernels;
      e.object = "kernels" + index + ".o";
      e.kernels = "kernels" + index + ".so";
      write_file(dir / e.object, kernels->object());
      m.target = {kernels->target_arch(), kernels->target_cpu(), kernels->target_features()};
      std::sort(m.target.features.begin(), m.target.features.end());
      // The library records the CPU its code needs (artifact/target_record.h): kiln_rt
      // reads it from the file before loading the code, whatever the manifest lists.
      const fs::path record = dir / ".target.S";
      write_file(record, artifact::target_record_assembly(m.target));
      cpu::codegen::link_shared_library(kernels->object(), (dir / e.kernels).string(),
                                        {record.string()});
      fs::remove(record);
    }
    m.graphs.push_back(std::move(e));
  }
  if (m.target.arch.empty()) m.target = {"any", "generic", {}};  // no generated code at all
  if (options.embed_weights) {
    m.weights = "weights.so";
    m.weights_embedded = true;
    write_weights_library(weights, weights_metadata, dir, m.weights);
  } else {
    save_safetensors((dir / m.weights).string(), weights, weights_metadata);
  }
  for (const std::string& file : m.files()) m.sha256[file] = sha256_file_hex((dir / file).string());
  m.artifact_sha256 = m.combined_sha256();
  write_file(dir / artifact::kManifestFile, json::dump(m.to_json()) + "\n");
}

}  // namespace kiln::detail
