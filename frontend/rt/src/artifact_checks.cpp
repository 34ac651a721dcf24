// Holding the manifest to the graphs, the weights' record and the kernel libraries' target
// records (artifact_checks.h).
#include "artifact_checks.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "kiln/artifact/graph_signature.h"
#include "kiln/artifact/target_record.h"
#include "kiln/cpu/exec/elf_section.h"
#include "kiln/error.h"

namespace kiln::rt {

namespace {

const char* const kEdited =
    "Fix: the manifest was edited after export; export the model again (kiln::export_model or "
    "`kiln export`) and copy the whole directory.";

std::string spec_text(const artifact::TensorSpec& s) {
  return s.name + ": " + artifact::spec_str(s);
}

std::string range_text(const artifact::SymbolRange& r) {
  return r.name + " in [" + std::to_string(r.min) + ", " +
         (r.max == std::numeric_limits<int64_t>::max() ? std::string("inf)")
                                                       : std::to_string(r.max) + "]");
}

std::string ranges_text(std::vector<artifact::SymbolRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::string out;
  for (const auto& r : ranges) out += (out.empty() ? "" : ", ") + range_text(r);
  return out.empty() ? "none" : out;
}

std::string list_text(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return "[" + out + "]";
}

// The manifest's `field` says `said` where `source` says `actual`.
[[noreturn]] void disagree(const std::string& dir, const std::string& field,
                           const std::string& said, const std::string& source,
                           const std::string& actual) {
  KILN_FAIL("[kiln_rt] ", dir, "/", artifact::kManifestFile, ": expected field ", field, " to be ",
            actual, " as ", source, " says, found ", said, ". ", kEdited);
}

void compare_specs(const std::string& dir, const char* field, const std::string& graph_file,
                   const std::vector<artifact::TensorSpec>& said,
                   const std::vector<artifact::TensorSpec>& actual) {
  for (size_t i = 0; i < std::max(said.size(), actual.size()); ++i) {
    std::string name = std::string(field) + "[" + std::to_string(i) + "]";
    if (i < said.size() && i < actual.size() && said[i] == actual[i]) continue;
    disagree(dir, name, i < said.size() ? spec_text(said[i]) : "nothing", graph_file,
             i < actual.size() ? spec_text(actual[i]) : "nothing");
  }
}

}  // namespace

void check_signature(const artifact::Manifest& m, const std::vector<const ir::Graph*>& graphs,
                     const std::map<std::string, std::string>& weights_metadata,
                     const std::string& dir) {
  const std::string first = m.graphs.at(0).graph;
  compare_specs(dir, "inputs", first, m.inputs, artifact::graph_inputs(*graphs.at(0)));
  compare_specs(dir, "outputs", first, m.outputs, artifact::graph_outputs(*graphs.at(0)));

  auto record = weights_metadata.find(artifact::kSymbolsMetadataKey);
  std::vector<artifact::SymbolRange> recorded = artifact::parse_symbols_record(
      record == weights_metadata.end() ? std::string() : record->second, dir + "/" + m.weights);
  if (recorded != m.symbols)
    disagree(dir, "symbols", ranges_text(m.symbols), m.weights + " (the ranges recorded at export)",
             ranges_text(recorded));
  for (size_t g = 0; g < graphs.size(); ++g) {
    std::vector<artifact::SymbolRange> said = m.graphs[g].symbols,
                                       actual =
                                           artifact::graph_ranges(graphs, g, m.inputs, recorded);
    auto by_name = [](const auto& a, const auto& b) { return a.name < b.name; };
    std::sort(said.begin(), said.end(), by_name);
    std::sort(actual.begin(), actual.end(), by_name);
    if (said != actual)
      disagree(dir, "graphs[" + std::to_string(g) + "].symbols", ranges_text(said),
               m.graphs[g].graph + " with the recorded ranges", ranges_text(actual));
  }
}

void check_kernel_target(const artifact::Manifest& m, const std::string& library,
                         const std::string& dir) {
  std::optional<std::string> bytes = cpu::exec::read_elf_section(library, artifact::kTargetSection);
  KILN_CHECK(bytes.has_value(), "[kiln_rt] ", library,
             ": expected a record of the CPU its kernels were compiled for (section ",
             artifact::kTargetSection,
             "), found none, so the CPU features they use are unknown. Fix: export the model "
             "again (kiln::export_model or `kiln export`) and copy the whole directory.");
  artifact::Target t = artifact::parse_target_record(*bytes, library);
  std::vector<std::string> said = m.target.features, actual = t.features;
  std::sort(said.begin(), said.end());
  std::sort(actual.begin(), actual.end());
  const std::string source = "the kernels in " + library;
  if (t.arch != m.target.arch) disagree(dir, "target.arch", m.target.arch, source, t.arch);
  if (t.cpu != m.target.cpu) disagree(dir, "target.cpu", m.target.cpu, source, t.cpu);
  if (said != actual) disagree(dir, "target.features", list_text(said), source, list_text(actual));
}

}  // namespace kiln::rt
