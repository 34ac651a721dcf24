// Export's compile stage: the traces an artifact needs (the main graph with its symbolic
// sizes, and a graph of its own for size 1 where the main one cannot serve it), each compiled
// to position-independent kernels and checked against the eager forward before anything is
// written.
#pragma once

#include <memory>
#include <vector>

#include "export_signature.h"
#include "kiln/artifact/manifest.h"
#include "kiln/cpu/compiler/cpu_backend.h"
#include "kiln/cuda/compiler/cuda_backend.h"

namespace kiln::detail {

// One graph of the artifact, compiled and checked against eager, and the sizes it serves.
struct ExportedGraph {
  // By ExportOptions::device: the cpu backend's graph, or the cuda backend's with its PTX
  // assembled into a cubin.
  std::unique_ptr<cpu::compiler::CompiledGraph> compiled;
  std::unique_ptr<cuda::compiler::CompiledGraph> gpu;
  std::string cubin;
  std::vector<artifact::SymbolRange> symbols;
  const ir::Graph& optimized_graph() const {
    return gpu ? gpu->optimized_graph() : compiled->optimized_graph();
  }
};

struct ExportedGraphs {
  std::vector<ExportedGraph> graphs;  // the main graph first
  // Every symbol with the whole range the artifact serves (the manifest's).
  std::vector<artifact::SymbolRange> symbols;
  // Largest |compiled - eager| over every graph's outputs on its example inputs.
  double max_abs_diff = 0;
  std::string unchecked;  // ExportResult::unchecked
};

// Traces the request with fullgraph semantics, compiles every graph the artifact needs and
// checks each against eager within ExportOptions::tolerance.
ExportedGraphs compile_export_graphs(const ExportRequest& request, const ExportOptions& options);

}  // namespace kiln::detail
