// What an artifact's graphs say about its signature: export writes the manifest's inputs,
// outputs and per-graph symbol ranges from them, and kiln_rt holds a manifest to them, so
// an edited manifest (even with its digest recomputed) cannot misreport what the graphs
// take and return.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/artifact/manifest.h"
#include "kiln/ir/graph.h"

namespace kiln::artifact {

// The dims of a shape: static sizes, or symbols as ir::format_size names them ("s0").
std::vector<DimSpec> dim_specs(const Shape& shape);

// The user inputs of `g` (name, dtype, dims) and its outputs (named, or "output<i>").
std::vector<TensorSpec> graph_inputs(const ir::Graph& g);
std::vector<TensorSpec> graph_outputs(const ir::Graph& g);

// The symbol ranges graph `index` of `graphs` serves, given each symbol's [1, max] (the
// manifest's "symbols"): a graph keeps symbol s where the first graph has it, then serves
// s from 2 if another graph is specialized to s = 1 (size 1 broadcasts), else from 1; a
// graph with size 1 where the first graph has s serves s = 1 only.
std::vector<SymbolRange> graph_ranges(const std::vector<const ir::Graph*>& graphs, size_t index,
                                      const std::vector<TensorSpec>& inputs,
                                      const std::vector<SymbolRange>& symbols);

// The weights file's metadata key that records the manifest's "symbols" (their maxima are
// a choice made at export, ExportOptions::max_batch, which no graph shows).
inline constexpr const char* kSymbolsMetadataKey = "kiln.symbols";
std::string symbols_record(const std::vector<SymbolRange>& symbols);
// Throws kiln::Error naming `origin` when the record is malformed.
std::vector<SymbolRange> parse_symbols_record(const std::string& record, const std::string& origin);

}  // namespace kiln::artifact
