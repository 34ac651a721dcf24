// export_model: trace (fullgraph) -> passes with frozen state -> position-independent
// kernels -> the artifact directory (kiln/export.h), checked against eager before writing.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "kiln/artifact/graph_signature.h"
#include "kiln/artifact/target_record.h"
#include "kiln/autograd.h"
#include "kiln/backends/cpu_compiler.h"
#include "kiln/codegen/kernels.h"
#include "kiln/error.h"
#include "kiln/export.h"
#include "kiln/init.h"
#include "kiln/ir/symbols.h"
#include "kiln/serialize/durable_files.h"
#include "kiln/serialize/safetensors.h"
#include "kiln/sha256.h"
#include "kiln/tensor_ops/view.h"
#include "kiln/version.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;
constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

std::vector<std::string> input_names(const ExportOptions& options, size_t n) {
  if (!options.input_names.empty()) {
    KILN_CHECK(options.input_names.size() == n, "[export] expected ", n,
               " input_names (one per example input), found ", options.input_names.size(),
               ". Fix: name every input, or none.");
    return options.input_names;
  }
  if (n == 1) return {"x"};
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back("input" + std::to_string(i));
  return names;
}

// A second handle on each example (a view), carrying the dims to make dynamic, so marking
// never changes the caller's tensors.
std::vector<Tensor> marked_examples(const std::vector<Tensor>& examples, bool dynamic_batch) {
  std::vector<Tensor> out;
  for (const Tensor& x : examples) {
    Tensor alias = narrow(x, 0, 0, x.size(0));
    alias.impl()->dynamic_dims = x.impl()->dynamic_dims | (dynamic_batch ? 1u : 0u);
    out.push_back(alias);
  }
  return out;
}

// One whole-forward trace, through compile()'s tracer (guards, symbolic dims, fullgraph).
detail::TracedGraph trace_for_export(const std::shared_ptr<nn::Module>& model,
                                     const std::vector<Tensor>& inputs,
                                     const detail::ForwardFn& forward,
                                     const std::vector<std::string>& names) {
  CompileOptions options;
  options.fullgraph = true;
  options.backend = "interp";  // the trace is what export wants; interp runs it cheaply
  options.input_names = names;
  options.cache_limit = 1;
  auto core = detail::make_compiled_core(model, options);
  try {
    detail::run_compiled(*core, inputs, {}, forward);
  } catch (const GraphBreakError& e) {
    throw GraphBreakError(detail::str_cat("[export] ", model->type_name(),
                                          " cannot be exported: an artifact is one graph, and its "
                                          "forward breaks the graph. ",
                                          e.what()));
  }
  std::vector<detail::TracedGraph> graphs = detail::traced_graphs(*core);
  KILN_CHECK(graphs.size() == 1, "[export] expected one traced graph, found ", graphs.size(),
             ". Fix: this is a kiln bug in frontend/src/export.");
  return graphs[0];
}

// The symbol names of a graph's user inputs, in order of first use.
std::vector<std::string> input_symbols(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::GraphInput& in : g.inputs()) {
    if (in.kind != ir::InputKind::Input) continue;
    for (int64_t d : in.value->type.shape) {
      if (!ir::is_symbolic_size(d)) continue;
      std::string s = ir::format_size(d);
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
  }
  return out;
}

// Whether symbol `s` is the leading dim of some user input (a batch).
bool is_batch_symbol(const ir::Graph& g, const std::string& s) {
  for (const ir::GraphInput& in : g.inputs())
    if (in.kind == ir::InputKind::Input && !in.value->type.shape.empty() &&
        ir::is_symbolic_size(in.value->type.shape[0]) &&
        ir::format_size(in.value->type.shape[0]) == s)
      return true;
  return false;
}

// The largest batch the artifact serves: ExportOptions::max_batch, checked against the
// traced graph and the examples, or unbounded.
int64_t batch_limit(const ir::Graph& g, const ExportOptions& options,
                    const std::vector<Tensor>& examples) {
  if (options.max_batch == 0) return kUnbounded;
  KILN_CHECK(options.max_batch >= 2, "[export] expected max_batch >= 2 (or 0: unbounded), found ",
             options.max_batch,
             ". Fix: for batch 1 only, export a static batch (an example of batch 1, no "
             "dynamic_batch).");
  bool dynamic = false;
  for (const std::string& s : input_symbols(g)) dynamic = dynamic || is_batch_symbol(g, s);
  KILN_CHECK(dynamic, "[export] max_batch ", options.max_batch,
             " bounds a dynamic batch, but no input's dim 0 is dynamic. Fix: set "
             "ExportOptions::dynamic_batch (`kiln export --dynamic-batch`) or mark_dynamic(x, 0).");
  for (size_t i = 0; i < examples.size(); ++i)
    KILN_CHECK(examples[i].size(0) <= options.max_batch, "[export] example input ", i,
               " has batch ", examples[i].size(0), ", above max_batch ", options.max_batch,
               ". Fix: export with a smaller example or a larger max_batch.");
  return options.max_batch;
}

// Largest |a - b| (0 when equal, NaNs in the same places count as equal). Throws when an
// element breaks |a - b| <= tolerance * (1 + |b|): the compiled graph must compute what the
// eager forward computes before anything is written.
double compare_with_eager(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                          double tolerance) {
  KILN_CHECK(a.size() == b.size(), "[export] the compiled graph returned ", a.size(),
             " outputs where eager returned ", b.size(),
             ". Fix: this is a kiln bug; please report it with the model.");
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    KILN_CHECK(a[i].sizes() == b[i].sizes(), "[export] output ", i, " of the compiled graph has ",
               a[i].type_str(), " where eager has ", b[i].type_str(),
               ". Fix: this is a kiln bug; please report it with the model.");
    std::vector<double> x = a[i].to(DType::Float64).to_vector<double>();
    std::vector<double> y = b[i].to(DType::Float64).to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k) {
      if (std::isnan(x[k]) && std::isnan(y[k])) continue;
      double d = std::fabs(x[k] - y[k]);
      if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
      worst = std::max(worst, d);
      KILN_CHECK(
          d <= tolerance * (1 + std::fabs(y[k])), "[export] the compiled graph computes ", x[k],
          " where the eager forward computes ", y[k], " (output ", i, ", element ", k,
          "; tolerance ", tolerance,
          "), so no artifact was written. Fix: this is a kiln bug; please report it with the "
          "model. ExportOptions::pipeline can leave out a pass to find the culprit, and "
          "ExportOptions::tolerance loosens the check.");
    }
  }
  return worst;
}

// Every graph input the run needs, the module state in the state slots.
std::vector<Tensor> graph_arguments(const ir::Graph& g, const std::vector<Tensor>& state,
                                    const std::vector<Tensor>& inputs) {
  std::vector<Tensor> args;
  size_t next = 0;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    if (g.inputs()[i].kind == ir::InputKind::Input)
      args.push_back(inputs.at(next++));
    else
      args.push_back(i < state.size() ? state[i] : Tensor());
  }
  return args;
}

// One graph of the artifact, compiled and checked against eager.
struct ExportedGraph {
  std::unique_ptr<cpu::CompiledGraph> compiled;
  std::vector<artifact::SymbolRange> symbols;
};

ExportedGraph compile_for_export(const detail::TracedGraph& traced, const ExportOptions& options,
                                 const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& eager, double& max_diff) {
  cpu::CompilerOptions co;
  co.pipeline = options.pipeline.empty() ? default_export_pipeline() : options.pipeline;
  co.position_independent = true;
  co.host_cpu_features = !options.portable;
  co.frozen_state = traced.state;
  ExportedGraph out;
  out.compiled = std::make_unique<cpu::CompiledGraph>(*traced.graph, co);
  std::vector<Tensor> got = out.compiled->run(graph_arguments(*traced.graph, traced.state, inputs));
  max_diff = std::max(max_diff, compare_with_eager(got, eager, options.tolerance));
  return out;
}

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

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  KILN_CHECK(!f.fail(), "[export] expected to write ", path.string(),
             ", failed: ", std::strerror(errno), ". Fix: check the disk space and permissions.");
}

// A name beside `dir` that no other export (thread or process) uses at the same time.
fs::path scratch_path(const fs::path& dir, const char* what) {
  return durable::scratch_name(dir.string(), std::string(".") + what + "-");
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
  write_file(
      source,
      detail::str_cat("  .section .rodata\n  .balign 64\n  .globl ", artifact::kWeightsSymbol, "\n",
                      artifact::kWeightsSymbol, ":\n  .incbin \"", quoted,
                      "\"\nkiln_weights_end:\n  .balign 8\n  .globl ", artifact::kWeightsSizeSymbol,
                      "\n", artifact::kWeightsSizeSymbol, ":\n  .quad kiln_weights_end - ",
                      artifact::kWeightsSymbol, "\n  .section .note.GNU-stack,\"\",@progbits\n"));
  codegen::link_shared_library("", (tmp / name).string(), {source.string()});
  fs::remove(bytes);
  fs::remove(source);
}

// Moves the finished temporary directory to `dir`, replacing an artifact already there.
// Everything in it is flushed to disk first. An existing artifact is exchanged with the new
// one in one step (renameat2), so `dir` is at every moment the old artifact or the new one,
// never absent; where the file system cannot exchange, the old one is renamed aside first
// (then `dir` is briefly absent, never a mix). The parent directory is flushed last.
void move_into_place(const fs::path& tmp, const fs::path& dir) {
  durable::fsync_tree(tmp.string(), "[export]");
  fs::path parent = fs::absolute(dir).parent_path();
  if (fs::exists(dir)) {
    bool replaceable =
        fs::is_directory(dir) && (fs::is_empty(dir) || fs::exists(dir / artifact::kManifestFile));
    KILN_CHECK(replaceable, "[export] expected '", dir.string(),
               "' to be absent, empty or an earlier export, found a ",
               fs::is_directory(dir) ? "directory without manifest.json" : "file",
               ". Fix: choose another output directory; export never deletes other files.");
    if (durable::exchange(tmp.string(), dir.string())) {
      durable::fsync_path(parent.string(), "[export]");
      fs::remove_all(tmp);  // now the old artifact
      return;
    }
    fs::path old = scratch_path(dir, "old");
    fs::rename(dir, old);
    fs::rename(tmp, dir);
    durable::fsync_path(parent.string(), "[export]");
    fs::remove_all(old);
    return;
  }
  fs::rename(tmp, dir);
  durable::fsync_path(parent.string(), "[export]");
}

}  // namespace

std::string default_export_pipeline() {
  return "canonicalize,decompose,canonicalize,dce,cse,fuse";
}

std::string ExportResult::summary() const {
  std::ostringstream os;
  os << "wrote " << dir << " (" << manifest.model << ", " << manifest.graphs.size()
     << (manifest.graphs.size() == 1 ? " graph" : " graphs") << ", target " << manifest.target.cpu
     << ", exported in " << static_cast<int64_t>(export_ms) << " ms; compiled vs eager max |diff| "
     << max_abs_diff << ")\n";
  for (const auto& [name, bytes] : files) os << "  " << name << "  " << bytes << " bytes\n";
  for (const artifact::TensorSpec& s : manifest.inputs)
    os << "  input  " << s.name << ": " << artifact::spec_str(s) << "\n";
  for (const artifact::TensorSpec& s : manifest.outputs)
    os << "  output " << s.name << ": " << artifact::spec_str(s) << "\n";
  for (const artifact::SymbolRange& s : manifest.symbols)
    os << "  " << s.name << " in [" << s.min << ", "
       << (s.max == kUnbounded ? std::string("inf)") : std::to_string(s.max) + "]") << "\n";
  os << "  sha256 " << manifest.artifact_sha256 << "\n";
  return os.str();
}

ExportResult export_model(std::shared_ptr<nn::Module> model,
                          const std::vector<Tensor>& example_inputs, const std::string& dir,
                          const ExportOptions& options) {
  auto start = std::chrono::steady_clock::now();
  init();
  KILN_CHECK(model != nullptr, "[export] expected a module, got null.");
  for (const auto& [path, m] : model->named_modules())
    KILN_CHECK(!m->is_training(), "[export] ", model->type_name(), ": ",
               path.empty() ? std::string("the root module") : "module '" + path + "'", " (",
               m->type_name(),
               ") is in training mode; an artifact is for inference (dropout off, BatchNorm "
               "reading its running statistics). Fix: call model->eval() before export_model.");
  KILN_CHECK(!example_inputs.empty(), "[export] expected at least one example input, found none.");
  KILN_CHECK(!dir.empty(), "[export] expected an output directory, got an empty path.");
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    const Tensor& x = example_inputs[i];
    KILN_CHECK(x.defined() && !x.is_symbolic() && x.device().is_cpu() && x.dim() >= 1,
               "[export] example input ", i,
               " must be a concrete cpu tensor with at least one dim, found ",
               x.defined() ? x.type_str() : std::string("an undefined tensor"),
               ". Fix: pass real data of the shape the model will be called with.");
  }
  NoGradGuard no_grad;
  std::vector<std::string> names = input_names(options, example_inputs.size());
  detail::ForwardFn forward = options.forward;
  if (!forward) {
    KILN_CHECK(example_inputs.size() == 1, "[export] ", model->type_name(),
               "'s forward(x) takes one tensor, found ", example_inputs.size(),
               " example inputs. Fix: set ExportOptions::forward to call a forward that takes "
               "several.");
    forward = [m = model.get()](const std::vector<Tensor>& in) -> std::vector<Tensor> {
      return {(*m)(in.at(0))};
    };
  }

  // The main graph, with every requested dynamic dim symbolic.
  std::vector<Tensor> inputs = marked_examples(example_inputs, options.dynamic_batch);
  detail::TracedGraph main = trace_for_export(model, inputs, forward, names);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& traced = main.graph->inputs()[i].value->type.shape;
    for (int64_t d = 0; d < inputs[i].dim(); ++d) {
      if (!(inputs[i].impl()->dynamic_dims >> d & 1) || ir::is_symbolic_size(traced[d])) continue;
      KILN_FAIL("[export] dim ", d, " of input '", names[i],
                "' was asked to be dynamic, but the trace kept it static (size ", inputs[i].size(d),
                ")",
                inputs[i].size(d) < 2 ? ": sizes 0 and 1 are always static"
                                      : ": the forward uses that size in a way a symbolic "
                                        "size cannot express (KILN_LOG=recompiles says where)",
                ". Fix: ",
                inputs[i].size(d) < 2 ? "export with an example of size 2 or more in that dim"
                                      : "export with a static size in that dim",
                ".");
    }
  }
  std::vector<Tensor> eager = forward(example_inputs);
  double max_diff = 0;
  std::vector<ExportedGraph> graphs;
  graphs.push_back(compile_for_export(main, options, inputs, eager, max_diff));

  // Size 1 is special (it broadcasts), so a symbolic graph serves sizes >= 2. For each
  // symbol, a trace at size 1 that matches the symbolic graph specialized to 1 shows the
  // graph serves 1 too; otherwise that trace becomes a graph of its own.
  artifact::Manifest m;
  std::vector<std::string> symbols = input_symbols(*main.graph);
  const int64_t batch_max = batch_limit(*main.graph, options, example_inputs);
  for (const std::string& s : symbols) {
    // A specialization that fails its own infer check cannot match the trace either.
    std::unique_ptr<ir::Graph> specialized = ir::clone_graph(*main.graph);
    bool specialized_ok = true;
    try {
      passes::PassManager("specialize{" + s + "=1,allow_one=1}").run(*specialized);
    } catch (const Error&) {
      specialized_ok = false;
    }
    int64_t sentinel = ir::parse_size(s);
    std::vector<Tensor> ones, ones_eager;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Shape& traced = main.graph->inputs()[i].value->type.shape;
      Tensor x = inputs[i], e = example_inputs[i];
      uint64_t marks = inputs[i].impl()->dynamic_dims;
      for (int64_t d = 0; d < x.dim(); ++d) {
        if (traced[d] != sentinel) continue;
        x = narrow(x, d, 0, 1);
        e = narrow(e, d, 0, 1);
        marks &= ~(uint64_t{1} << d);
      }
      x = narrow(x, 0, 0, x.size(0));
      x.impl()->dynamic_dims = marks;
      ones.push_back(x);
      ones_eager.push_back(e);
    }
    detail::TracedGraph at_one = trace_for_export(model, ones, forward, names);
    int64_t min = 1;
    if (!specialized_ok ||
        ir::structural_hash(*at_one.graph) != ir::structural_hash(*specialized)) {
      min = 2;
      graphs.push_back(compile_for_export(at_one, options, ones, forward(ones_eager), max_diff));
      graphs.back().symbols.push_back({s, 1, 1});
    }
    int64_t max = is_batch_symbol(*main.graph, s) ? batch_max : kUnbounded;
    graphs[0].symbols.push_back({s, min, max});
    m.symbols.push_back({s, 1, max});
  }
  for (size_t g = 1; g < graphs.size(); ++g)
    for (const artifact::SymbolRange& r : graphs[0].symbols)
      if (r.name != graphs[g].symbols[0].name) graphs[g].symbols.push_back(r);

  // The manifest's signature, from the main graph as the artifact stores it (kiln_rt derives
  // it from there again and refuses a manifest that says otherwise).
  m.kiln_version = std::string(kVersion);
  m.model = options.model_name.empty() ? model->type_name() : options.model_name;
  m.config = options.config;
  m.metadata = options.metadata;
  const ir::Graph& optimized = graphs[0].compiled->optimized_graph();
  m.inputs = artifact::graph_inputs(optimized);
  m.outputs = artifact::graph_outputs(optimized);
  // The symbols' maxima are a choice no graph shows: the weights record them too.
  const std::map<std::string, std::string> weights_metadata = {
      {artifact::kSymbolsMetadataKey, artifact::symbols_record(m.symbols)}};

  // Write everything to a temporary directory beside `dir`, then move it into place.
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  // Scratch directories of exports to this target that were killed midway.
  durable::remove_stale_scratch(target.string(), ".tmp-");
  durable::remove_stale_scratch(target.string(), ".old-");
  fs::path tmp = scratch_path(target, "tmp");
  fs::create_directories(tmp);
  try {
    NamedTensors weights;
    for (size_t g = 0; g < graphs.size(); ++g) {
      const cpu::CompiledGraph& compiled = *graphs[g].compiled;
      artifact::GraphEntry e;
      std::string index = std::to_string(g);
      e.graph = "graph" + index + ".kir";
      e.symbols = graphs[g].symbols;
      write_file(tmp / e.graph, artifact_graph_text(compiled.optimized_graph(), g, weights));
      if (const codegen::KernelModule* kernels = compiled.kernel_module()) {
        e.kernel_count = compiled.stats().kernels;
        e.object = "kernels" + index + ".o";
        e.kernels = "kernels" + index + ".so";
        write_file(tmp / e.object, kernels->object());
        m.target = {kernels->target_arch(), kernels->target_cpu(), kernels->target_features()};
        std::sort(m.target.features.begin(), m.target.features.end());
        // The library records the CPU its code needs (artifact/target_record.h): kiln_rt
        // reads it from the file before loading the code, whatever the manifest lists.
        const fs::path record = tmp / ".target.S";
        write_file(record, artifact::target_record_assembly(m.target));
        codegen::link_shared_library(kernels->object(), (tmp / e.kernels).string(),
                                     {record.string()});
        fs::remove(record);
      }
      m.graphs.push_back(std::move(e));
    }
    if (m.target.arch.empty()) m.target = {"any", "generic", {}};  // no generated code at all
    if (options.embed_weights) {
      m.weights = "weights.so";
      m.weights_embedded = true;
      write_weights_library(weights, weights_metadata, tmp, m.weights);
    } else {
      save_safetensors((tmp / m.weights).string(), weights, weights_metadata);
    }
    for (const std::string& file : m.files())
      m.sha256[file] = sha256_file_hex((tmp / file).string());
    m.artifact_sha256 = m.combined_sha256();
    write_file(tmp / artifact::kManifestFile, json::dump(m.to_json()) + "\n");
    move_into_place(tmp, target);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }

  ExportResult result;
  result.dir = target.string();
  result.manifest = std::move(m);
  for (const std::string& file : result.manifest.files())
    result.files.push_back({file, fs::file_size(target / file)});
  result.files.push_back(
      {artifact::kManifestFile, fs::file_size(target / artifact::kManifestFile)});
  result.max_abs_diff = max_diff;
  result.export_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace kiln
