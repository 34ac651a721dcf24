// artifact::Manifest: JSON round trip, and the strict reader's refusals (each naming the
// field and the fix).
#include "kiln/artifact/manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "kiln/sha256.h"
#include "test_util.h"

namespace kiln::artifact {
namespace {

Manifest sample() {
  Manifest m;
  m.kiln_version = "0.1.0";
  m.model = "fashion_mlp";
  m.target = {"x86_64", "znver3", {"avx2", "fma"}};
  m.inputs = {{"x", DType::Float32, {{0, "s0"}, {1, ""}, {28, ""}, {28, ""}}}};
  m.outputs = {{"output0", DType::Float32, {{0, "s0"}, {10, ""}}}};
  m.symbols = {{"s0", 1, 1000}};
  m.graphs = {{"graph0.kir", "kernels0.so", "kernels0.o", 3, {{"s0", 2, 1000}}},
              {"graph1.kir", "", "", 0, {{"s0", 1, 1}}}};
  m.config = json::parse(R"({"d_hidden": 256})");
  m.metadata = {{"test_accuracy", "0.8921"}};
  for (const std::string& f : m.files()) m.sha256[f] = sha256_hex(f.data(), f.size());
  m.artifact_sha256 = m.combined_sha256();
  return m;
}

void expect_refused(json::Value v, std::initializer_list<std::string_view> parts) {
  expect_error([&] { Manifest::from_json(v, "m.json"); }, parts);
}

TEST(ArtifactManifest, RoundTripsThroughJson) {
  Manifest m = sample();
  Manifest back = Manifest::from_json(json::parse(json::dump(m.to_json())), "m.json");
  EXPECT_EQ(back.to_json(), m.to_json());
  EXPECT_EQ(back.inputs, m.inputs);
  EXPECT_EQ(back.graphs, m.graphs);
  EXPECT_EQ(spec_str(back.inputs[0]), "float32[s0, 1, 28, 28]");
  EXPECT_EQ(back.files(), (std::vector<std::string>{"graph0.kir", "kernels0.so", "kernels0.o",
                                                    "graph1.kir", "weights.safetensors"}));
}

TEST(ArtifactManifest, RefusesWhatALoaderCannotTrust) {
  json::Value good = sample().to_json();
  json::Value v = good;
  v["format"] = "onnx";
  expect_refused(v, {"m.json: field format", "expected \"kiln-artifact\"", "found \"onnx\""});
  v = good;
  std::erase_if(v.as_object(), [](const auto& field) { return field.first == "target"; });
  expect_refused(v, {"expected the field \"target\", found none", "Fix: "});
  v = good;
  v["weights"] = "../secrets";
  expect_refused(
      v, {"field weights", "expected a file name inside the artifact directory", "../secrets"});
  v = good;
  v["inputs"].as_array()[0]["shape"].as_array()[0] = "s7";
  expect_refused(v, {"input 'x' uses the symbol s7", "does not declare"});
  v = good;
  v["inputs"].as_array()[0]["dtype"] = "float128";
  expect_refused(v, {"inputs[0].dtype", "found \"float128\""});
  v = good;
  v["graphs"].as_array()[1]["symbols"]["s0"] = json::Array{3, 1};
  expect_refused(v, {"graphs[1]", "range of symbol s0 as [min, max]", "[3,1]"});
  v = good;
  v["sha256"]["graph0.kir"] = std::string(64, '0');
  expect_refused(v, {"field artifact_sha256",
                     "expected the digest of the manifest's fields and the files' digests"});
  // Any other field is covered as well: a signature, a range, the CPU features, a new field.
  for (auto edit : std::vector<std::function<void(json::Value&)>>{
           [](json::Value& m) { m["inputs"].as_array()[0]["shape"].as_array()[2] = 56; },
           [](json::Value& m) { m["symbols"].as_array()[0]["max"] = 4; },
           [](json::Value& m) { m["target"]["features"] = json::Array{}; },
           [](json::Value& m) { m["outputs"].as_array()[0]["shape"].as_array()[1] = 11; },
           [](json::Value& m) { m["comment"] = "added"; }}) {
    v = good;
    edit(v);
    expect_refused(v, {"field artifact_sha256", "manifest.json was changed after export"});
    v["artifact_sha256"] = artifact_digest(v);  // re-hashed by hand: the fields then count
    EXPECT_NO_THROW(Manifest::from_json(v, "m.json"));
  }
  v = good;
  v["sha256"].as_object().erase(v["sha256"].as_object().begin());
  expect_refused(v, {"field sha256", "expected a digest of", "found none"});
  v = good;
  v["format_version"] = 5;
  expect_refused(v, {"expected an artifact format this kiln_rt reads (1 to 4), found 5",
                     "written by kiln 0.1.0"});
  v = good;
  v["device"] = "tpu";
  v["artifact_sha256"] = artifact_digest(v);
  expect_refused(v, {"field device", "expected \"cpu\" or \"cuda\", found \"tpu\""});
  // Format 3 had no device: the CPU.
  v = good;
  v["format_version"] = 3;
  std::erase_if(v.as_object(), [](const auto& field) { return field.first == "device"; });
  v["artifact_sha256"] = artifact_digest(v);
  EXPECT_EQ(Manifest::from_json(v, "m.json").device, "cpu");
  v = good;
  v["format_version"] = 2;
  expect_refused(v, {"format 2 (written by kiln 0.1.0) is no longer read",
                     "do not record the CPU features", "export the model again"});
  v = good;
  v["format_version"] = 1;
  expect_refused(v, {"format 1 (written by kiln 0.1.0) is no longer read",
                     "does not cover the manifest", "export the model again"});
}

TEST(ArtifactManifest, ReadManifestNamesAMissingDirectory) {
  expect_error([] { read_manifest("/nonexistent/model.kiln"); },
               {"expected an artifact directory holding manifest.json",
                "/nonexistent/model.kiln/manifest.json"});
}

}  // namespace
}  // namespace kiln::artifact
