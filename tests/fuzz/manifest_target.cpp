// Fuzz target: an artifact's manifest.json, as kiln_rt reads it. Each input is read twice:
// as it is, and with its artifact_sha256 replaced by the right digest, so the fields behind
// the digest check are reached too. A manifest the reader accepts must write back to JSON
// that it reads to the same manifest.
#include "fuzz/fuzz_targets.h"
#include "kiln/artifact/manifest.h"

namespace kiln::fuzz {

namespace {

constexpr const char* kOrigin = "<fuzz>/manifest.json";

void read_and_round_trip(const json::Value& doc) {
  artifact::Manifest m;
  try {
    m = artifact::Manifest::from_json(doc, kOrigin);
  } catch (const Error&) {
    return;
  }
  // What kiln_rt does with an accepted manifest before loading any file.
  for (const artifact::TensorSpec& spec : m.inputs) (void)artifact::spec_str(spec);
  for (const artifact::TensorSpec& spec : m.outputs) (void)artifact::spec_str(spec);
  for (const artifact::GraphEntry& g : m.graphs)
    for (const artifact::SymbolRange& r : g.symbols)
      KILN_FUZZ_EXPECT(m.find_symbol(r.name) != nullptr, "graph symbol ", r.name, " undeclared");
  for (const std::string& file : m.files())
    KILN_FUZZ_EXPECT(m.sha256.count(file) == 1, "no digest for ", file);

  json::Value written = must_succeed("Manifest::to_json", [&] { return m.to_json(); });
  written["artifact_sha256"] = m.combined_sha256();
  const std::string text = must_succeed("json::dump", [&] { return json::dump(written); });
  artifact::Manifest again = must_succeed("Manifest::from_json of to_json", [&] {
    return artifact::Manifest::from_json(json::parse(text), kOrigin);
  });
  KILN_FUZZ_EXPECT(json::dump(again.to_json()) == text, "the manifest changed in a round trip: ",
                   text);
}

}  // namespace

int fuzz_manifest(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  json::Value doc;
  try {
    // read_manifest's limits.
    doc = json::parse(text, {.max_depth = 16, .max_values = 1'000'000});
  } catch (const Error&) {
    return 0;
  }
  read_and_round_trip(doc);
  if (doc.is_object() && doc.find("artifact_sha256") != nullptr) {
    doc["artifact_sha256"] = artifact::artifact_digest(doc);
    read_and_round_trip(doc);
  }
  return 0;
}

}  // namespace kiln::fuzz
