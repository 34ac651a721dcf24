// `kiln run DIR --input FILE.safetensors [--output FILE.safetensors]` and `kiln run DIR --info`:
// loads an artifact written by `kiln export` through kiln_rt (the deployable runtime, as an
// application would) and runs it on tensors from a safetensors file, or prints its signature.
//
// Inputs are taken by the artifact's input names when the file holds every one of them (other
// tensors are ignored); otherwise, when the file holds exactly as many tensors as the artifact
// has inputs, in the file's order.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <iostream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "kiln/artifact/manifest.h"
#include "kiln/kiln.h"
#include "kiln/serialize/safetensors.h"
#include "kiln_rt.hpp"

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTimedRuns = 5;       // after one warm-up; the median is reported
constexpr int64_t kShown = 8;       // values printed per output
constexpr int64_t kRowsShown = 32;  // argmax rows printed per output

// kiln_rt's dtype values are kiln's DType order (both are part of the artifact format).
static_assert(static_cast<int>(DType::Bool) == KILN_RT_BOOL &&
              static_cast<int>(DType::Int32) == KILN_RT_INT32 &&
              static_cast<int>(DType::Int64) == KILN_RT_INT64 &&
              static_cast<int>(DType::Float16) == KILN_RT_FLOAT16 &&
              static_cast<int>(DType::BFloat16) == KILN_RT_BFLOAT16 &&
              static_cast<int>(DType::Float32) == KILN_RT_FLOAT32 &&
              static_cast<int>(DType::Float64) == KILN_RT_FLOAT64);

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string type_str(DType dtype, const std::vector<int64_t>& shape) {
  std::string out = std::string(dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The tensors to run on, in the artifact's input order (see the file comment).
std::vector<Tensor> pick_inputs(const kiln_rt::Model& model, const SafetensorsFile& file,
                                const std::string& path) {
  std::vector<std::string> names;
  std::string wanted, found;
  for (size_t i = 0; i < model.input_count(); ++i) {
    names.push_back(model.input_name(i));
    wanted += (i ? ", " : "") + names.back();
  }
  for (const auto& [name, t] : file.tensors) found += (found.empty() ? "" : ", ") + name;
  std::vector<Tensor> inputs;
  bool by_name = true;
  for (const std::string& n : names) by_name = by_name && file.find(n) != nullptr;
  if (by_name) {
    for (const std::string& n : names) inputs.push_back(*file.find(n));
  } else {
    KILN_CHECK(file.tensors.size() == names.size(), "expected '", path,
               "' to hold the artifact's inputs (", wanted, ") by name, or exactly ", names.size(),
               " tensor", names.size() == 1 ? "" : "s", " taken in order, found ",
               file.tensors.size(), " (", found.empty() ? "none" : found,
               "). Fix: save the inputs under those names (`kiln run DIR --info` lists them).");
    for (const auto& [name, t] : file.tensors) inputs.push_back(t);
  }
  for (Tensor& t : inputs) t = t.contiguous();
  return inputs;
}

// A copy of an output that outlives the kiln_rt_outputs it came from.
Tensor to_tensor(const kiln_rt_tensor& out) {
  std::vector<int64_t> shape(out.shape, out.shape + out.rank);
  Tensor t = Tensor::empty(shape, static_cast<DType>(out.dtype));
  if (t.nbytes() > 0) std::memcpy(t.raw_data(), out.data, t.nbytes());
  return t;
}

// "  values: 0.1, 0.2, ... (first 8 of 20)" and, for 2-D float outputs (classifier logits),
// the argmax of each row.
void print_values(const Tensor& t) {
  const int64_t n = t.numel();
  Tensor flat = t.reshape({n}).to(kFloat64);
  const double* v = flat.data_ptr<double>();
  std::string line = "  values:";
  for (int64_t i = 0; i < std::min(n, kShown); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s %.6g", i ? "," : "", v[i]);
    line += buf;
  }
  if (n > kShown)
    line += ", ... (first " + std::to_string(kShown) + " of " + std::to_string(n) + ")";
  std::cout << line << "\n";
  if (t.dim() != 2 || !t.is_floating_point() || t.size(1) == 0) return;
  std::string rows = "  argmax per row:";
  for (int64_t r = 0; r < std::min(t.size(0), kRowsShown); ++r) {
    const double* row = v + r * t.size(1);
    rows += (r ? ", " : " ") + std::to_string(std::max_element(row, row + t.size(1)) - row);
  }
  if (t.size(0) > kRowsShown) rows += ", ... (first " + std::to_string(kRowsShown) + " rows)";
  std::cout << rows << "\n";
}

// A dim as a reader wants it: "28", or "s0 in 1..∞" for a symbol with its range (inputs;
// outputs name the symbol alone, or a product such as s0*10).
std::string dim_str(const artifact::DimSpec& dim, const artifact::Manifest& m, bool with_range) {
  if (dim.is_static()) return std::to_string(dim.size);
  const artifact::SymbolRange* range = m.find_symbol(dim.symbol);
  if (!range || !with_range) return dim.symbol;
  const bool unbounded = range->max == std::numeric_limits<int64_t>::max();
  return dim.symbol + " in " + std::to_string(range->min) + ".." +
         (unbounded ? "\u221e" : std::to_string(range->max));
}

void print_specs(const char* what, const std::vector<artifact::TensorSpec>& specs,
                 const artifact::Manifest& m) {
  for (const artifact::TensorSpec& spec : specs) {
    std::string dims;
    for (const artifact::DimSpec& d : spec.shape)
      dims += (dims.empty() ? "" : ", ") + dim_str(d, m, std::string(what) == "input");
    std::printf("  %-7s %-10s %-8s [%s]\n", what, spec.name.c_str(),
                std::string(dtype_name(spec.dtype)).c_str(), dims.c_str());
  }
}

// The signature as a table, then what the artifact is (the manifest itself is in DIR), then
// whether it runs here: `loads` is how loading it went ("yes, ..." or "no: <why>").
void print_info(const artifact::Manifest& m, const std::string& dir, const std::string& loads) {
  std::cout << "artifact " << dir << ": " << m.model << ", exported by kiln " << m.kiln_version
            << " (format " << m.format_version << "), read by kiln_rt " << kiln_rt_version()
            << "\n\nsignature:\n";
  print_specs("input", m.inputs, m);
  print_specs("output", m.outputs, m);
  std::cout << "\ngraphs:\n";
  for (const artifact::GraphEntry& g : m.graphs) {
    std::string ranges;
    for (const artifact::SymbolRange& r : g.symbols) {
      const bool unbounded = r.max == std::numeric_limits<int64_t>::max();
      ranges += (ranges.empty() ? ", serves " : ", ") + r.name + " in " + std::to_string(r.min) +
                ".." + (unbounded ? "\u221e" : std::to_string(r.max));
    }
    std::cout << "  " << g.graph << ": " << g.kernel_count << " kernel"
              << (g.kernel_count == 1 ? "" : "s")
              << (g.kernels.empty() ? "" : " in " + g.kernels) << ranges << "\n";
  }
  // The features, wrapped at about 90 columns.
  std::string features, line;
  for (const std::string& f : m.target.features) {
    if (line.size() + f.size() > 80) {
      features += line + "\n        ";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + f;
  }
  features += line;
  if (m.device == "cuda")
    std::cout << "\ndevice: cuda, kernels for " << m.target.cpu << " and newer GPUs\n";
  else
    std::cout << "\ntarget: " << m.target.arch << ", tuned for " << m.target.cpu << "\n"
              << "  needs: " << (features.empty() ? "(baseline)" : features) << "\n";
  std::cout << "weights: " << (m.weights_embedded ? "embedded in " : "") << m.weights << "\n";
  if (!m.config.is_null()) std::cout << "config: " << json::dump(m.config) << "\n";
  for (const auto& [key, value] : m.metadata) std::cout << "metadata " << key << ": " << value << "\n";
  std::cout << "artifact_sha256: " << m.artifact_sha256 << "\n";
  std::cout << "runs here: " << loads << "\n";
}

int run_artifact(const std::string& dir, const Args& args) {
  if (args.has("info")) {
    // The manifest describes the artifact wherever it is; loading it says whether this
    // machine runs it (a GPU artifact where there is no GPU does not, and info says why).
    const artifact::Manifest m = artifact::read_manifest(dir);
    std::string loads;
    Clock::time_point start = Clock::now();
    try {
      kiln_rt::Model model(dir);
      loads = "yes (loaded and checked in " + fixed(ms_since(start), 1) + " ms)";
    } catch (const kiln_rt::Error& e) {
      loads = std::string("no: ") + e.what();
    }
    print_info(m, dir, loads);
    return 0;
  }
  Clock::time_point start = Clock::now();
  kiln_rt::Model model(dir);
  const double load_ms = ms_since(start);
  const std::string input_path = args.str("input", "");
  std::vector<Tensor> inputs = pick_inputs(model, load_safetensors(input_path), input_path);
  std::vector<kiln_rt::Input> raw;
  for (const Tensor& t : inputs) {
    raw.push_back({t.raw_data(), static_cast<kiln_rt_dtype>(t.dtype()),
                   std::vector<int64_t>(t.sizes().begin(), t.sizes().end())});
  }
  std::cout << "loaded " << dir << " in " << fixed(load_ms, 1) << " ms (kiln_rt "
            << kiln_rt_version() << ")\n";
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::cout << "input  " << model.input_name(i) << ": "
              << type_str(inputs[i].dtype(), raw[i].shape) << "\n";
  }

  kiln_rt::Outputs outputs = model.run(raw);  // the warm-up; its outputs are printed
  std::vector<double> run_ms;
  for (int r = 0; r < kTimedRuns; ++r) {
    Clock::time_point t0 = Clock::now();
    model.run(raw);
    run_ms.push_back(ms_since(t0));
  }
  std::sort(run_ms.begin(), run_ms.end());
  std::cout << "run: " << fixed(run_ms[kTimedRuns / 2], 3) << " ms (median of " << kTimedRuns
            << " runs after 1 warm-up)\n";

  NamedTensors results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor t = to_tensor(outputs[i]);
    const std::string name = model.output_name(i);
    std::cout << "output " << name << ": " << type_str(t.dtype(), outputs.shape(i)) << "\n";
    print_values(t);
    results.emplace_back(name, t);
  }
  if (args.has("output")) {
    const std::string out_path = args.str("output", "");
    save_safetensors(out_path, results);
    std::cout << "wrote " << out_path << " (" << results.size() << " tensor"
              << (results.size() == 1 ? "" : "s") << ")\n";
  }
  return 0;
}

}  // namespace

int run_run(const std::vector<std::string>& raw) {
  KILN_CHECK(!raw.empty() && raw[0].rfind("-", 0) != 0,
             "expected the artifact directory first (written by `kiln export`), found ",
             raw.empty() ? std::string("no arguments") : "'" + raw[0] + "'",
             ". Fix: kiln run DIR --input FILE.safetensors, or kiln run DIR --info.");
  const std::string dir = raw[0];
  Args args(command_spec("run"), std::vector<std::string>(raw.begin() + 1, raw.end()));
  KILN_CHECK(args.has("info") || args.has("input"),
             "expected --input FILE.safetensors (the tensors to run on) or --info, found "
             "neither. Fix: kiln run ",
             dir, " --input FILE.safetensors; `kiln run ", dir,
             " --info` lists the inputs it takes.");
  try {
    return run_artifact(dir, args);
  } catch (const kiln_rt::Error& e) {
    // kiln_rt's messages already say where, what was expected and found, and the fix.
    std::cerr << "kiln run: " << cli_message(e.what()) << "\n";
    return 1;
  }
}

}  // namespace kiln::cli
