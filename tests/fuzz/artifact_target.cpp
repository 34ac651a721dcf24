// Fuzz target: what kiln_rt reads from an artifact's files before loading any code, beyond
// manifest.json (the manifest target): a graph's text and the signature and symbol ranges
// it implies, the weights' record of the symbols, and a kernel library's target record.
// The input is those three parts separated by kPartSeparator; a missing part is empty.
//
// The export invariant is checked too: a manifest written from a graph the reader accepts
// (its signature, its symbols, its ranges) must be read back by Manifest::from_json.
#include <limits>

#include "fuzz/fuzz_targets.h"
#include "kiln/artifact/graph_signature.h"
#include "kiln/artifact/manifest.h"
#include "kiln/artifact/target_record.h"
#include "kiln/ir/graph.h"
#include "kiln/sha256.h"

namespace kiln::fuzz {

namespace {

constexpr std::string_view kPartSeparator = "\n%%kiln-part%%\n";

std::vector<std::string_view> split_parts(std::string_view text) {
  std::vector<std::string_view> parts;
  for (size_t at; parts.size() < 2 && (at = text.find(kPartSeparator)) != std::string_view::npos;) {
    parts.push_back(text.substr(0, at));
    text.remove_prefix(at + kPartSeparator.size());
  }
  parts.push_back(text);
  parts.resize(3);
  return parts;
}

void target_record_round_trip(std::string_view bytes) {
  artifact::Target t;
  try {
    t = artifact::parse_target_record(bytes, "<fuzz>/kernels0.so");
  } catch (const Error&) {
    return;
  }
  const std::string record = artifact::target_record(t);
  artifact::Target again = must_succeed("parse_target_record of target_record", [&] {
    return artifact::parse_target_record(record, "<rewritten>");
  });
  KILN_FUZZ_EXPECT(again == t, "the target record changed in a round trip: ", record);
}

void symbols_record_round_trip(std::string_view bytes) {
  std::vector<artifact::SymbolRange> symbols;
  try {
    symbols = artifact::parse_symbols_record(std::string(bytes), "<fuzz>/weights.safetensors");
  } catch (const Error&) {
    return;
  }
  const std::string record = must_succeed("symbols_record", [&] {
    return artifact::symbols_record(symbols);
  });
  KILN_FUZZ_EXPECT(artifact::parse_symbols_record(record, "<rewritten>") == symbols,
                   "the symbols record changed in a round trip: ", record);
}

// A manifest for one graph, as export writes it (the digests are of the names: no file is
// read here).
artifact::Manifest manifest_for(const ir::Graph& g) {
  artifact::Manifest m;
  m.kiln_version = "0.0.0";
  m.model = "fuzz";
  m.target = {"x86_64", "x86-64", {}};
  m.inputs = artifact::graph_inputs(g);
  m.outputs = artifact::graph_outputs(g);
  for (const artifact::TensorSpec& spec : m.inputs)
    for (const artifact::DimSpec& d : spec.shape)
      if (!d.is_static() && !m.find_symbol(d.symbol))
        m.symbols.push_back({d.symbol, 1, std::numeric_limits<int64_t>::max()});
  const std::vector<const ir::Graph*> graphs = {&g};
  m.graphs = {{"graph0.kir", "", "", 0,
               artifact::graph_ranges(graphs, 0, m.inputs, m.symbols)}};
  for (const std::string& file : m.files()) m.sha256[file] = sha256_hex(file.data(), file.size());
  m.artifact_sha256 = m.combined_sha256();
  return m;
}

void graph_signature(std::string_view text) {
  std::unique_ptr<ir::Graph> graph;
  try {
    graph = ir::parse_graph(text);
    ir::verify(*graph);
  } catch (const Error&) {
    return;
  }
  // The writer may refuse a graph (an input name that is not UTF-8 cannot go into JSON);
  // what it writes, the reader must read.
  artifact::Manifest m;
  try {
    m = manifest_for(*graph);
  } catch (const Error&) {
    return;
  }
  for (const artifact::TensorSpec& spec : m.inputs) (void)artifact::spec_str(spec);
  for (const artifact::TensorSpec& spec : m.outputs) (void)artifact::spec_str(spec);
  // Export traces inputs with plain symbols ("s0"); a graph written by hand may use a product
  // ("s0*2") for an input dim, which no manifest can declare.
  for (const artifact::TensorSpec& spec : m.inputs)
    for (const artifact::DimSpec& d : spec.shape)
      if (d.symbol.find_first_of("*^") != std::string::npos) return;
  const std::string text_json = json::dump(m.to_json());
  artifact::Manifest back = must_succeed("Manifest::from_json of a manifest written for a graph",
                                         [&] {
                                           return artifact::Manifest::from_json(
                                               json::parse(text_json), "<fuzz>/manifest.json");
                                         });
  KILN_FUZZ_EXPECT(back.inputs == m.inputs && back.outputs == m.outputs &&
                       back.graphs == m.graphs,
                   "the manifest changed in a round trip: ", text_json);
}

}  // namespace

int fuzz_artifact(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts =
      split_parts(std::string_view(reinterpret_cast<const char*>(data), size));
  graph_signature(parts[0]);
  symbols_record_round_trip(parts[1]);
  target_record_round_trip(parts[2]);
  return 0;
}

}  // namespace kiln::fuzz
