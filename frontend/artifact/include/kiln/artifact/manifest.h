// The manifest of an exported model (manifest.json in the artifact directory): what the
// artifact holds and what it accepts. kiln::export_model writes it; kiln_rt reads it, checks
// it against the host and every call's inputs against it. One file format, one struct, so
// the writer and the reader cannot drift apart.
//
//   {"format": "kiln-artifact", "format_version": 4, "kiln_version": "0.1.0",
//    "model": "FashionMLP", "device": "cpu",
//    "target": {"arch": "x86_64", "cpu": "znver5", "features": ["avx2", "fma", ...]},
//    "inputs":  [{"name": "x", "dtype": "float32", "shape": ["s0", 1, 28, 28]}],
//    "outputs": [{"name": "output0", "dtype": "float32", "shape": ["s0", 10]}],
//    "symbols": [{"name": "s0", "min": 1, "max": 9223372036854775807}],
//    "graphs":  [{"graph": "graph0.kir", "kernels": "kernels0.so", "object": "kernels0.o",
//                 "kernel_count": 3, "symbols": {"s0": [2, 9223372036854775807]}}, ...],
//    "weights": "weights.safetensors", "weights_embedded": false,
//    "config": {...}, "metadata": {"test_accuracy": "0.8463", ...},
//    "sha256": {"graph0.kir": "…", "kernels0.so": "…", ...}, "artifact_sha256": "…"}
//
// A GPU artifact ("device": "cuda") has "target": {"arch": "nvptx64", "cpu": "sm_90",
// "features": []}, and each graph's kernels as PTX ("kernels0.ptx", compiled by the driver for
// the GPU it runs on) and as a cubin for the target's architecture ("kernels0.cubin").
//
// A dim of an input is a static size or a symbol; the symbols' ranges are the guards on
// dynamic dims. Each graph serves the calls whose symbols fall in its own ranges (a dynamic
// batch has one graph for batch 1, where broadcasting differs, and one for the rest).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/serialize/json.h"

namespace kiln::artifact {

inline constexpr const char* kFormatName = "kiln-artifact";
// The format this kiln writes and the newest one kiln_rt reads. 2: artifact_sha256 covers
// the manifest's fields as well as the files (format 1 covered the files only). 3: each
// kernel library records the CPU it was compiled for (artifact/target_record.h) and the
// weights record the symbols' ranges (artifact/graph_signature.h). 4: the device the artifact
// runs on ("cpu" when absent), GPU artifacts.
inline constexpr int64_t kFormatVersion = 4;
inline constexpr const char* kManifestFile = "manifest.json";
// What a GPU artifact's kernels target: Hopper (H100/H200) and newer, which compile its PTX.
inline constexpr const char* kGpuArtifactChip = "sm_90";
inline constexpr const char* kGpuArtifactArch = "nvptx64";
// The data symbols of embedded weights: the safetensors bytes, and their count (uint64_t).
inline constexpr const char* kWeightsSymbol = "kiln_weights";
inline constexpr const char* kWeightsSizeSymbol = "kiln_weights_size";

// One dim of an input or output: a static size, or a symbol ("s0"; an output may have a
// product such as "s0*10").
struct DimSpec {
  int64_t size = 0;    // when symbol is empty
  std::string symbol;  // "" for a static dim
  bool is_static() const { return symbol.empty(); }
  bool operator==(const DimSpec&) const = default;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::Float32;
  std::vector<DimSpec> shape;
  bool operator==(const TensorSpec&) const = default;
};
// "float32[s0, 1, 28, 28]"
std::string spec_str(const TensorSpec& spec);

struct SymbolRange {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  bool operator==(const SymbolRange&) const = default;
};

// One compiled graph of the artifact and the symbol values it serves.
struct GraphEntry {
  std::string graph;    // the graph's IR text (ir::print_graph)
  // Its generated kernels ("" when it has none): a shared library (cpu), PTX text (cuda).
  std::string kernels;
  // The same kernels as a relocatable object file (cpu), as a cubin for the target's GPU
  // architecture (cuda); "" when none.
  std::string object;
  int64_t kernel_count = 0;
  std::vector<SymbolRange> symbols;  // the range of each symbol this graph serves
  bool operator==(const GraphEntry&) const = default;
};

struct Target {
  std::string arch;  // "x86_64"; "nvptx64" for GPU artifacts
  // LLVM's CPU name the kernels were tuned for; for GPU artifacts the GPU architecture
  // ("sm_90": the oldest GPU that runs them)
  std::string cpu;
  std::vector<std::string> features;  // LLVM target features the kernels may use
  bool operator==(const Target&) const = default;
};

struct Manifest {
  int64_t format_version = kFormatVersion;
  std::string kiln_version;
  std::string model;  // the exported module's type name
  // Where the graphs run: "cpu", or "cuda" (GPU 0 of the process that loads it; inputs and
  // outputs stay host tensors, copied over and back).
  std::string device = "cpu";
  Target target;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<SymbolRange> symbols;
  std::vector<GraphEntry> graphs;
  std::string weights = "weights.safetensors";
  // The weights file is a shared library (weights.so, ExportOptions::embed_weights) whose
  // data symbols kWeightsSymbol and kWeightsSizeSymbol hold the safetensors bytes.
  bool weights_embedded = false;
  json::Value config;                           // the model's config (null when unknown)
  std::map<std::string, std::string> metadata;  // the checkpoint's metadata, free-form
  std::map<std::string, std::string> sha256;    // file name -> hex digest, every file but this
  // sha256 of the manifest's other fields (compact JSON, one line) followed by the "name
  // digest\n" lines of sha256, in order.
  std::string artifact_sha256;

  json::Value to_json() const;
  // Strict: a missing or mistyped field, an unknown format, a newer format version, a file
  // name with a path separator, or a symbol used but not declared throws kiln::Error naming
  // `origin` (the manifest's path) and the field.
  static Manifest from_json(const json::Value& value, const std::string& origin);

  // The files the manifest lists (graphs, kernels, objects, weights), in a fixed order.
  std::vector<std::string> files() const;
  // What artifact_sha256 must be for these fields and the sha256 map.
  std::string combined_sha256() const;
  const SymbolRange* find_symbol(const std::string& name) const;
};

// What artifact_sha256 must be for a manifest document: the sha256 of its other fields
// (compact JSON, one line) followed by a "name digest\n" line per entry of "sha256", by name.
std::string artifact_digest(const json::Value& manifest);

// Reads and validates dir/manifest.json (Manifest::from_json), with a clear error when the
// directory or file is missing or is not JSON.
Manifest read_manifest(const std::string& dir);

}  // namespace kiln::artifact
