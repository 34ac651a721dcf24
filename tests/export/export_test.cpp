// Ahead-of-time export end to end: kiln::export_model writes an artifact, kiln_rt loads and
// runs it as a deployed program would. Every seed model's exported result equals the compiled
// and the eager one (static and dynamic batch); the manifest describes what is on disk; the
// runtime refuses wrong inputs and damaged artifacts with messages that say what and where;
// export refuses what it cannot write; kiln_rt's thread count is set through its C API (one
// loaded model called from several threads: tests/concurrency/kiln_rt_threads_test.cpp).
#include "kiln/export.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>

#include "export/export_test_util.h"
#include "frontend/compare_bits.h"
#include "kiln/artifact/manifest.h"
#include "kiln/cpu_features.h"
#include "kiln/kiln.h"
#include "kiln/models.h"
#include "kiln/sha256.h"
#include "kiln_rt.hpp"
#include "test_util.h"

namespace kiln {
namespace {

using export_test::expect_parts;
using export_test::list_dir;
using export_test::load_error;
using export_test::read_text;
using export_test::run_rt;
using export_test::ScratchDir;
using export_test::write_text;
namespace fs = std::filesystem;

// Same shape and dtype, every element within `tol` of b's.
::testing::AssertionResult within(const Tensor& a, const Tensor& b, double tol) {
  return elementwise_match(a, b, [&](double x, double y) { return std::abs(x - y) <= tol; });
}

std::shared_ptr<nn::Module> fashion_mlp() {
  manual_seed(3);
  auto model = models::build(models::FashionMLPConfig{12, 16, 5, 0.3});
  model->eval();
  return model;
}

Tensor randn_batch(std::vector<int64_t> shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, {}, &gen);
}

// ---- 1. every seed model: kiln_rt == compiled == eager ----

// Embedding (int64 token inputs) -> mean -> Linear: the int64 input path of the signature.
struct TokenClassifier : nn::Module {
  nn::ModulePtr<nn::Embedding> embed = register_module(
      "embed", std::make_shared<nn::Embedding>(11, 6, nn::EmbeddingOptions{.padding_idx = 0}));
  nn::ModulePtr<nn::Linear> head = register_module("head", std::make_shared<nn::Linear>(6, 3));
  Tensor forward(const Tensor& tokens) override { return head(embed(tokens).mean({1})); }
};

struct ModelCase {
  std::function<std::shared_ptr<nn::Module>()> make;
  std::function<Tensor(int64_t batch, uint64_t seed)> input;
  int64_t example_batch = 4;
  double tol = 1e-5;
  // Run before eval() (BatchNorm: a few training steps, so the running statistics are not
  // the identity).
  std::function<void(nn::Module&)> prepare;
};

std::function<Tensor(int64_t, uint64_t)> randn_inputs(std::vector<int64_t> rest) {
  return [rest](int64_t batch, uint64_t seed) {
    std::vector<int64_t> shape{batch};
    shape.insert(shape.end(), rest.begin(), rest.end());
    return randn_batch(shape, seed);
  };
}

// kiln_rt's, the compiled and the eager results of `model` on `x`, pairwise within tol.
void expect_three_agree(const kiln_rt::Model& rt, CompiledModule<nn::Module>& compiled,
                        nn::Module& model, const Tensor& x, double tol, const std::string& what) {
  Tensor want = model(x);
  Tensor got_compiled = compiled(x);
  std::vector<Tensor> got_rt = run_rt(rt, {x});
  ASSERT_EQ(got_rt.size(), 1u) << what;
  EXPECT_TRUE(within(got_rt[0], want, tol)) << what << ": kiln_rt vs eager";
  EXPECT_TRUE(within(got_compiled, want, tol)) << what << ": compiled vs eager";
  EXPECT_TRUE(within(got_rt[0], got_compiled, tol)) << what << ": kiln_rt vs compiled";
}

void check_model(const ModelCase& c) {
  ScratchDir scratch("model");
  manual_seed(1234);
  std::shared_ptr<nn::Module> model = c.make();
  if (c.prepare) c.prepare(*model);
  model->eval();
  NoGradGuard no_grad;
  // Exported first: a lazy model materializes its layers in the export's trace.
  Tensor example = c.input(c.example_batch, 100);
  ExportResult fixed = export_model(model, {example}, scratch.path("static.kiln"));
  EXPECT_LE(fixed.max_abs_diff, c.tol) << fixed.summary();
  ExportOptions options;
  options.dynamic_batch = true;
  ExportResult dynamic = export_model(model, {example}, scratch.path("dynamic.kiln"), options);
  EXPECT_LE(dynamic.max_abs_diff, c.tol) << dynamic.summary();

  auto compiled = compile(model);
  kiln_rt::Model rt_static(fixed.dir);
  EXPECT_EQ(rt_static.input_signature(0).find("s0"), std::string::npos)
      << rt_static.input_signature(0);
  expect_three_agree(rt_static, compiled, *model, example, c.tol, "static export");
  kiln_rt::Model rt_dynamic(dynamic.dir);
  EXPECT_EQ(
      rt_dynamic.input_signature(0).rfind(std::string(dtype_name(example.dtype())) + "[s0", 0), 0u)
      << rt_dynamic.input_signature(0);
  for (int64_t batch : {1, 2, 7})
    expect_three_agree(rt_dynamic, compiled, *model,
                       c.input(batch, 200 + static_cast<uint64_t>(batch)), c.tol,
                       "dynamic export, batch " + std::to_string(batch));
}

TEST(ExportModels, ResidualMlp) {
  check_model({[] {
                 return models::build(models::MLPConfig{12, 16, 2, 5});
               },
               randn_inputs({1, 3, 4}), 3});
}

TEST(ExportModels, FashionMlp) {
  check_model({[] {
                 return models::build(models::FashionMLPConfig{12, 16, 5, 0.3});
               },
               randn_inputs({12})});
}

TEST(ExportModels, LazyCnnBeforeItsFirstForward) {
  check_model({[] {
                 return models::build(models::LazyCNNConfig{4, 6, 5});
               },
               randn_inputs({3, 8, 8}), 2});
}

TEST(ExportModels, BatchNormCnnWithTrainedStatistics) {
  check_model({[] {
                 return models::build(models::BatchNormCNNConfig{1, 8, 4, 6, 16, 5, 0.25});
               },
               randn_inputs({1, 8, 8}), 3, 1e-5,
               [](nn::Module& m) {
                 NoGradGuard no_grad;
                 m.train();
                 for (uint64_t i = 0; i < 3; ++i) m(randn_batch({5, 1, 8, 8}, 300 + i) * 2 + 1);
               }});
}

// Export freezes buffers too: an eval BatchNorm's running statistics fold with its affine
// parameters into a per-channel scale and shift, so the artifact reads no buffer and runs
// no batch_norm op.
TEST(ExportModels, BatchNormStatisticsFoldIntoConstants) {
  ScratchDir scratch("bn_fold");
  manual_seed(1234);
  auto model = models::build(models::BatchNormCNNConfig{1, 8, 4, 6, 16, 5, 0.25});
  model->eval();
  ExportResult r = export_model(model, {randn_batch({3, 1, 8, 8}, 1)}, scratch.path("bn.kiln"));
  std::string text = read_text(r.dir + "/graph0.kir");
  EXPECT_EQ(text.find("buffer %"), std::string::npos) << text;
  EXPECT_EQ(text.find("= batch_norm("), std::string::npos) << text;
  EXPECT_NE(text.find("const %"), std::string::npos) << text;
}

TEST(ExportModels, TransformerClassifier) {
  check_model({[] {
                 return models::build(models::TransformerClassifierConfig{.image_size = 6,
                                                                          .d_model = 8,
                                                                          .nhead = 2,
                                                                          .num_layers = 2,
                                                                          .dim_feedforward = 16,
                                                                          .dropout = 0.1,
                                                                          .num_classes = 4});
               },
               randn_inputs({1, 6, 6}), 2});
}

TEST(ExportModels, EmbeddingWithInt64Tokens) {
  check_model({[] { return std::make_shared<TokenClassifier>(); },
               [](int64_t batch, uint64_t seed) {
                 Generator gen(seed);
                 return randint(0, 11, {batch, 5}, kInt64, &gen);
               },
               3});
}

TEST(ExportModels, HalvingMlpWhileLoop) {
  check_model({[] {
                 return models::build(models::HalvingMLPWhileConfig{{12, 16, 5}});
               },
               randn_inputs({12})});
}

TEST(ExportModels, HalvingMlpHostLoopIsRefused) {
  ScratchDir scratch("halving");
  manual_seed(1234);
  auto model = models::build(models::HalvingMLPConfig{12, 16, 5});
  model->eval();
  std::string dir = scratch.path("halving.kiln");
  try {
    export_model(model, {randn_batch({4, 12}, 5)}, dir);
    ADD_FAILURE() << "export_model accepted a forward that reads a traced value on the host";
  } catch (const GraphBreakError& e) {
    expect_parts(e.what(), {"[export] HalvingMLP cannot be exported", "graph break",
                            "halving_mlp.cpp", "while_loop"});
  }
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(list_dir(scratch.base()).empty());
}

// ---- 2. the manifest and the signature ----

TEST(ExportManifest, DescribesTheFilesOnDisk) {
  ScratchDir scratch("manifest");
  auto model = fashion_mlp();
  ExportOptions options;
  options.dynamic_batch = true;
  options.metadata = {{"test_accuracy", "0.5"}};
  ExportResult r = export_model(model, {randn_batch({4, 12}, 1)}, scratch.path("m.kiln"), options);

  // ExportResult.files: every file of the directory, sizes as on disk.
  std::vector<std::string> listed;
  for (const auto& [name, bytes] : r.files) {
    listed.push_back(name);
    EXPECT_EQ(bytes, fs::file_size(fs::path(r.dir) / name)) << name;
  }
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, list_dir(r.dir));
  for (const char* name :
       {"manifest.json", "graph0.kir", "kernels0.so", "kernels0.o", "weights.safetensors"})
    EXPECT_NE(std::find(listed.begin(), listed.end(), name), listed.end()) << name;

  json::Value m = json::parse(read_text(r.dir + "/manifest.json"));
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m.find("format")->as_string(), "kiln-artifact");
  EXPECT_EQ(m.find("format_version")->as_int(), artifact::kFormatVersion);
  EXPECT_EQ(m.find("model")->as_string(), "FashionMLP");
  EXPECT_EQ(m.find("metadata")->find("test_accuracy")->as_string(), "0.5");
  const json::Value* hashes = m.find("sha256");
  ASSERT_TRUE(hashes && hashes->is_object());
  // A digest for every file but the manifest itself, and for nothing else.
  EXPECT_EQ(hashes->as_object().size(), listed.size() - 1);
  for (const std::string& name : listed) {
    if (name == "manifest.json") continue;
    const json::Value* digest = hashes->find(name);
    ASSERT_TRUE(digest != nullptr) << name;
    EXPECT_EQ(digest->as_string(), r.manifest.sha256.at(name)) << name;
    EXPECT_EQ(digest->as_string().size(), 64u) << name;
  }
  EXPECT_EQ(m.find("artifact_sha256")->as_string(), r.manifest.artifact_sha256);
  EXPECT_EQ(r.manifest.artifact_sha256, r.manifest.combined_sha256());
  EXPECT_NE(r.summary().find("float32[s0, 12]"), std::string::npos) << r.summary();

  kiln_rt::Model rt(r.dir);
  ASSERT_EQ(rt.input_count(), 1u);
  EXPECT_EQ(rt.input_name(0), "x");
  EXPECT_EQ(rt.input_signature(0), "float32[s0, 12]");
  ASSERT_EQ(rt.output_count(), 1u);
  EXPECT_EQ(rt.output_name(0), r.manifest.outputs[0].name);
  EXPECT_EQ(rt.output_signature(0), "float32[s0, 5]");
  EXPECT_THROW(rt.input_signature(1), kiln_rt::Error);
  EXPECT_THROW(rt.output_name(1), kiln_rt::Error);
  // kiln_rt's manifest is the one on disk.
  EXPECT_EQ(json::parse(rt.manifest()), m);
  EXPECT_STREQ(kiln_rt_version(), r.manifest.kiln_version.c_str());
}

TEST(ExportManifest, StaticSignature) {
  ScratchDir scratch("static");
  ExportResult r = export_model(fashion_mlp(), {randn_batch({4, 12}, 1)}, scratch.path("s.kiln"));
  kiln_rt::Model rt(r.dir);
  EXPECT_EQ(rt.input_signature(0), "float32[4, 12]");
  EXPECT_EQ(rt.output_signature(0), "float32[4, 5]");
  EXPECT_TRUE(r.manifest.symbols.empty());
  EXPECT_EQ(r.manifest.graphs.size(), 1u);
}

// ---- 3. kiln_rt's guards on every call ----

// A loaded FashionMLP export (dynamic batch unless `fixed`), its directory removed after.
struct Loaded {
  ScratchDir scratch{"loaded"};
  std::unique_ptr<kiln_rt::Model> rt;
  explicit Loaded(bool fixed) {
    ExportOptions options;
    options.dynamic_batch = !fixed;
    export_model(fashion_mlp(), {randn_batch({4, 12}, 1)}, scratch.path("a.kiln"), options);
    rt = std::make_unique<kiln_rt::Model>(scratch.path("a.kiln"));
  }
};

std::string run_error(const kiln_rt::Model& rt, const std::vector<kiln_rt::Input>& inputs) {
  try {
    rt.run(inputs);
  } catch (const kiln_rt::Error& e) {
    return e.what();
  }
  return "<kiln_rt ran the call>";
}

TEST(ExportGuards, WrongDtypeThroughTheCApi) {
  ScratchDir scratch("dtype");
  std::string dir = scratch.path("a.kiln");
  ExportOptions options;
  options.dynamic_batch = true;
  export_model(fashion_mlp(), {randn_batch({4, 12}, 1)}, dir, options);
  kiln_rt_model* model = kiln_rt_load(dir.c_str());
  ASSERT_NE(model, nullptr) << kiln_rt_last_error();
  EXPECT_STREQ(kiln_rt_last_error(), "");
  std::vector<int64_t> data(3 * 12, 1);
  int64_t shape[2] = {3, 12};
  kiln_rt_tensor x = {data.data(), KILN_RT_INT64, 2, shape};
  EXPECT_EQ(kiln_rt_run(model, &x, 1), nullptr);
  expect_parts(kiln_rt_last_error(),
               {"input 'x'", "expects float32[s0, 12]", "got int64[3, 12]", "pass float32 data"});
  // A malformed tensor and NULL handles are refused too.
  kiln_rt_tensor bad = {data.data(), 42, 2, shape};
  EXPECT_EQ(kiln_rt_run(model, &bad, 1), nullptr);
  expect_parts(kiln_rt_last_error(), {"input 0 is malformed", "dtype 42"});
  EXPECT_EQ(kiln_rt_run(nullptr, &x, 1), nullptr);
  expect_parts(kiln_rt_last_error(), {"expected a model, got NULL"});
  // The error is cleared by the next successful call.
  std::vector<float> floats(3 * 12, 0.5f);
  kiln_rt_tensor good = {floats.data(), KILN_RT_FLOAT32, 2, shape};
  kiln_rt_outputs* out = kiln_rt_run(model, &good, 1);
  ASSERT_NE(out, nullptr) << kiln_rt_last_error();
  EXPECT_STREQ(kiln_rt_last_error(), "");
  EXPECT_EQ(kiln_rt_outputs_count(out), 1u);
  EXPECT_EQ(kiln_rt_outputs_get(out, 1), nullptr);
  kiln_rt_outputs_free(out);
  kiln_rt_free(model);
}

TEST(ExportGuards, HugeBatchesAreErrorsNotCrashes) {
  // A batch whose element count overflows int64 is refused at the C API; one that fits but
  // whose activations cannot be allocated is an out-of-memory error, never a wrapped size.
  ScratchDir scratch("huge");
  std::string dir = scratch.path("a.kiln");
  ExportOptions options;
  options.dynamic_batch = true;
  export_model(fashion_mlp(), {randn_batch({4, 12}, 1)}, dir, options);
  kiln_rt_model* model = kiln_rt_load(dir.c_str());
  ASSERT_NE(model, nullptr) << kiln_rt_last_error();
  std::vector<float> data(12, 0.5f);
  int64_t overflowing[2] = {int64_t{1} << 62, 12};
  kiln_rt_tensor x = {data.data(), KILN_RT_FLOAT32, 2, overflowing};
  EXPECT_EQ(kiln_rt_run(model, &x, 1), nullptr);
  expect_parts(kiln_rt_last_error(),
               {"element count", "4611686018427387904 * 12", "does not fit a 64-bit size"});
  int64_t unallocatable[2] = {int64_t{1} << 50, 12};
  x.shape = unallocatable;
  EXPECT_EQ(kiln_rt_run(model, &x, 1), nullptr);
  expect_parts(kiln_rt_last_error(), {"out of memory"});
  kiln_rt_free(model);
}

TEST(ExportGuards, WrongRankCountAndStaticDim) {
  Loaded dynamic(false);
  std::vector<float> data(7 * 12, 0.25f);
  using kiln_rt::Model;
  expect_parts(run_error(*dynamic.rt, {Model::input(data.data(), {7, 12, 1})}),
               {"input 'x'", "expects float32[s0, 12]", "got float32[7, 12, 1]", "rank 3"});
  // The CLI can make only the batch dynamic: a static feature dim points at mark_dynamic.
  expect_parts(run_error(*dynamic.rt, {Model::input(data.data(), {7, 6})}),
               {"input 'x'", "expects float32[s0, 12]", "got float32[7, 6]", "dim 1 is 6",
                "kiln::mark_dynamic(x, 1)", "`kiln export` can make only the batch dim dynamic"});
  expect_parts(run_error(*dynamic.rt,
                         {Model::input(data.data(), {2, 12}), Model::input(data.data(), {2, 12})}),
               {"expects 1 inputs", "x: float32[s0, 12]", "got 2"});
  expect_parts(run_error(*dynamic.rt, {}), {"expects 1 inputs", "got 0"});
  // A dynamic dim below its range (sizes from 1 up).
  expect_parts(run_error(*dynamic.rt, {Model::input(data.data(), {0, 12})}),
               {"input 'x'", "expects float32[s0, 12]", "got float32[0, 12]",
                "dim 0 (s0) is 0, outside the range [1, inf)", "pass a size in that range"});

  Loaded fixed(true);
  expect_parts(run_error(*fixed.rt, {Model::input(data.data(), {7, 12})}),
               {"input 'x'", "expects float32[4, 12]", "got float32[7, 12]", "dim 0 is 7",
                "exported for 4 only", "`kiln export` without --batch"});
  EXPECT_EQ(fixed.rt->run({Model::input(data.data(), {4, 12})}).shape(0),
            std::vector<int64_t>({4, 5}));
}

// fc(x) + y: two inputs whose batch dims must agree.
struct AddPair : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(3, 3));
  Tensor forward(const Tensor& x, const Tensor& y) { return fc(x) + y; }
};

TEST(ExportGuards, TwoInputsWithOneDynamicBatch) {
  ScratchDir scratch("pair");
  manual_seed(5);
  auto model = std::make_shared<AddPair>();
  model->eval();
  ExportOptions options;
  options.dynamic_batch = true;
  options.input_names = {"a", "b"};
  options.forward = [model](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{nn::call(*model, in.at(0), in.at(1))};
  };
  ExportResult r = export_model(model, {randn_batch({4, 3}, 1), randn_batch({4, 3}, 2)},
                                scratch.path("pair.kiln"), options);
  kiln_rt::Model rt(r.dir);
  ASSERT_EQ(rt.input_count(), 2u);
  EXPECT_EQ(rt.input_name(0), "a");
  EXPECT_EQ(rt.input_name(1), "b");
  EXPECT_EQ(rt.input_signature(0), "float32[s0, 3]");
  EXPECT_EQ(rt.input_signature(1), "float32[s0, 3]");
  for (int64_t batch : {1, 5}) {
    Tensor a = randn_batch({batch, 3}, 10), b = randn_batch({batch, 3}, 11);
    std::vector<Tensor> got = run_rt(rt, {a, b});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(within(got[0], nn::call(*model, a, b), 1e-5)) << "batch " << batch;
  }
  std::vector<float> data(5 * 3, 1.0f);
  expect_parts(run_error(rt, {kiln_rt::Model::input(data.data(), {5, 3}),
                              kiln_rt::Model::input(data.data(), {3, 3})}),
               {"input 'b'", "expects float32[s0, 3]", "got float32[3, 3]", "dim 0 (s0) is 3",
                "earlier dim with the same symbol is 5"});
}

// max_batch bounds the dynamic batch in the manifest, and kiln_rt refuses a batch above it.
TEST(ExportGuards, MaxBatchBoundsTheDynamicBatch) {
  ScratchDir scratch("max_batch");
  auto model = fashion_mlp();
  NoGradGuard no_grad;
  ExportOptions options;
  options.dynamic_batch = true;
  options.max_batch = 8;
  ExportResult r = export_model(model, {randn_batch({4, 12}, 1)}, scratch.path("m.kiln"), options);
  EXPECT_EQ(r.manifest.symbols, (std::vector<artifact::SymbolRange>{{"s0", 1, 8}}));
  EXPECT_NE(r.summary().find("s0 in [1, 8]"), std::string::npos) << r.summary();
  kiln_rt::Model rt(r.dir);
  std::vector<float> data(9 * 12, 0.5f);
  EXPECT_EQ(rt.run({kiln_rt::Model::input(data.data(), {8, 12})}).shape(0),
            (std::vector<int64_t>{8, 5}));
  expect_parts(run_error(rt, {kiln_rt::Model::input(data.data(), {9, 12})}),
               {"input 'x'", "dim 0 (s0) is 9, outside the range [1, 8]"});

  std::string dir = scratch.path("bad.kiln");
  options.max_batch = 1;
  expect_error(
      [&] {
        export_model(model, {randn_batch({4, 12}, 1)}, dir, options);
      },
      {"expected max_batch >= 2", "found 1"});
  options.max_batch = 3;
  expect_error(
      [&] {
        export_model(model, {randn_batch({4, 12}, 1)}, dir, options);
      },
      {"example input 0 has batch 4, above max_batch 3"});
  options.dynamic_batch = false;
  expect_error(
      [&] {
        export_model(model, {randn_batch({2, 12}, 1)}, dir, options);
      },
      {"max_batch 3 bounds a dynamic batch, but no input's dim 0 is dynamic"});
  EXPECT_FALSE(fs::exists(dir));
}

// A forward that returns a view of its input: the output kiln_rt hands back is the
// caller's own copy, not a window into the input it may free or overwrite.
struct FlattenOnly : nn::Module {
  Tensor forward(const Tensor& x) override { return x.flatten(1); }
};

TEST(ExportGuards, OutputsNeverAliasTheInputs) {
  ScratchDir scratch("alias");
  auto model = std::make_shared<FlattenOnly>();
  model->eval();
  ExportOptions options;
  options.dynamic_batch = true;
  ExportResult r =
      export_model(model, {randn_batch({2, 3, 4}, 1)}, scratch.path("a.kiln"), options);
  kiln_rt::Model rt(r.dir);
  std::vector<float> x(2 * 3 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  kiln_rt::Outputs out = rt.run({kiln_rt::Model::input(x.data(), {2, 3, 4})});
  ASSERT_EQ(out.shape(0), (std::vector<int64_t>{2, 12}));
  EXPECT_NE(static_cast<const void*>(out.data<float>(0)), static_cast<const void*>(x.data()));
  std::fill(x.begin(), x.end(), -1.0f);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(out.data<float>(0)[i], static_cast<float>(i));
}

// ---- 4. damaged artifacts ----

// A fresh FashionMLP export (dynamic batch), copied into a new directory per case.
class ExportTampered : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    source_ = new ScratchDir("tampered_source");
    ExportOptions options;
    options.dynamic_batch = true;
    export_model(fashion_mlp(), {randn_batch({4, 12}, 1)}, source_->path("a.kiln"), options);
  }
  static void TearDownTestSuite() {
    delete source_;
    source_ = nullptr;
  }
  // A copy of the artifact, which loads before it is damaged.
  std::string fresh_copy() { return fresh_copy_at("copy.kiln"); }
  std::string fresh_copy_at(const std::string& name) {
    std::string dir = scratch_.path(name);
    fs::copy(source_->path("a.kiln"), dir, fs::copy_options::recursive);
    return dir;
  }
  json::Value manifest(const std::string& dir) {
    return json::parse(read_text(dir + "/manifest.json"));
  }
  void write_manifest(const std::string& dir, const json::Value& m) {
    write_text(dir + "/manifest.json", json::dump(m));
  }

  static ScratchDir* source_;
  ScratchDir scratch_{"copy"};
};
ScratchDir* ExportTampered::source_ = nullptr;

TEST_F(ExportTampered, TheUntouchedCopyLoads) {
  std::string dir = fresh_copy();
  kiln_rt::Model rt(dir);
  EXPECT_EQ(rt.input_signature(0), "float32[s0, 12]");
}

TEST_F(ExportTampered, FlippedWeightByte) {
  std::string dir = fresh_copy();
  std::string bytes = read_text(dir + "/weights.safetensors");
  ASSERT_GT(bytes.size(), 100u);
  bytes[bytes.size() - 5] ^= 0x01;  // in the data, past the header
  write_text(dir + "/weights.safetensors", bytes);
  expect_parts(load_error(dir), {"weights.safetensors", "sha256",
                                 "is not the file that was "
                                 "exported"});
}

TEST_F(ExportTampered, EmptyWeights) {
  std::string dir = fresh_copy();
  fs::resize_file(dir + "/weights.safetensors", 0);
  expect_parts(load_error(dir), {"weights.safetensors", "to hold data, found it empty"});
}

TEST_F(ExportTampered, TruncatedKernelLibrary) {
  std::string dir = fresh_copy();
  fs::resize_file(dir + "/kernels0.so", 100);
  expect_parts(load_error(dir), {"kernels0.so", "sha256", "truncated"});
}

// The strongest tamperer recomputes every digest: the loader and each call must still
// refuse what would crash or read out of bounds.
TEST_F(ExportTampered, TruncatedLibraryWithItsDigestsRecomputed) {
  std::string dir = fresh_copy();
  const std::string library = dir + "/kernels0.so";
  fs::resize_file(library, fs::file_size(library) / 2);
  json::Value m = manifest(dir);
  m["sha256"]["kernels0.so"] = sha256_file_hex(library);
  m["artifact_sha256"] = artifact::artifact_digest(m);
  write_manifest(dir, m);
  // dlopen would map the missing half and SIGBUS on first touch.
  expect_parts(load_error(dir),
               {"kernels0.so is not a complete ELF shared library", "truncated or damaged"});
}

TEST_F(ExportTampered, AnotherInputShapeWithTheDigestRecomputed) {
  for (int64_t width : {24, 6}) {
    std::string dir = fresh_copy();
    json::Value m = manifest(dir);
    m["inputs"].as_array()[0]["shape"].as_array()[1] = width;
    m["artifact_sha256"] = artifact::artifact_digest(m);
    write_manifest(dir, m);
    // The manifest would admit [N, width] (a wider input once wrote past a heap buffer, a
    // narrower one returned garbage): the signature derived from the graph refuses it.
    expect_parts(load_error(dir),
                 {"manifest.json: expected field inputs[0] to be x: float32[s0, 12] as "
                  "graph0.kir says",
                  "found x: float32[s0, " + std::to_string(width) + "]", "export the model again"});
    fs::remove_all(dir);  // fresh_copy's directory, for the next width
  }
}

// What callers are told the artifact returns comes from the graph, not the manifest alone.
TEST_F(ExportTampered, OutputShapeEditedWithTheDigestRecomputed) {
  std::string dir = fresh_copy();
  json::Value m = manifest(dir);
  m["outputs"].as_array()[0]["shape"].as_array()[1] = 11;
  m["artifact_sha256"] = artifact::artifact_digest(m);
  write_manifest(dir, m);
  expect_parts(load_error(dir), {"expected field outputs[0] to be output0: float32[s0, 5] as "
                                 "graph0.kir says",
                                 "found output0: float32[s0, 11]", "export the model again"});
}

// The symbols' ranges: their maxima as the weights recorded them at export, and which sizes
// each graph serves as the graphs show (size 1 may need a graph of its own).
TEST_F(ExportTampered, InputRangesEditedWithTheDigestRecomputed) {
  std::string dir = fresh_copy();
  json::Value m = manifest(dir);
  m["symbols"].as_array()[0]["max"] = 4;
  m["graphs"].as_array()[0]["symbols"]["s0"] = json::Array{1, 4};
  m["artifact_sha256"] = artifact::artifact_digest(m);
  write_manifest(dir, m);
  expect_parts(load_error(dir),
               {"expected field symbols to be s0 in [1, inf) as weights.safetensors (the ranges "
                "recorded at export) says",
                "found s0 in [1, 4]", "export the model again"});
  m = manifest(fresh_copy_at("graphs"));
  json::Value& served = m["graphs"].as_array()[0]["symbols"]["s0"];
  const int64_t min = served.as_array()[0].as_int();
  served.as_array()[0] = min + 1;
  m["artifact_sha256"] = artifact::artifact_digest(m);
  write_manifest(scratch_.path("graphs"), m);
  expect_parts(load_error(scratch_.path("graphs")),
               {"expected field graphs[0].symbols to be s0 in [" + std::to_string(min) + ", inf)",
                "found s0 in [" + std::to_string(min + 1) + ", inf)"});
}

// An emptied feature list (re-hashed) would let kernels that need AVX run on a CPU without
// it: the library's own record of its features decides, before it is loaded.
TEST_F(ExportTampered, EmptiedCpuFeaturesWithTheDigestRecomputed) {
  std::string dir = fresh_copy();
  json::Value m = manifest(dir);
  ASSERT_FALSE(m["target"]["features"].as_array().empty());
  std::string features;
  for (const json::Value& f : m["target"]["features"].as_array())
    features += (features.empty() ? "" : ", ") + f.as_string();
  m["target"]["features"] = json::Array{};
  m["artifact_sha256"] = artifact::artifact_digest(m);
  write_manifest(dir, m);
  expect_parts(load_error(dir), {"expected field target.features to be [" + features +
                                     "] as the kernels in ",
                                 "kernels0.so says, found []", "export the model again"});
}

// The CPU the kernels were tuned for is the library's record too.
TEST_F(ExportTampered, AnotherTargetCpuWithTheDigestRecomputed) {
  std::string dir = fresh_copy();
  json::Value m = manifest(dir);
  const std::string cpu = m["target"]["cpu"].as_string();
  m["target"]["cpu"] = "i386";
  m["artifact_sha256"] = artifact::artifact_digest(m);
  write_manifest(dir, m);
  expect_parts(load_error(dir), {"expected field target.cpu to be " + cpu + " as the kernels in ",
                                 "kernels0.so says, found i386"});
}

// A library without the record (an older kiln's, or one stripped of it) is not loaded: the
// features its code needs would be unknown.
TEST_F(ExportTampered, KernelLibraryWithoutItsTargetRecord) {
  std::string dir = fresh_copy();
  const std::string library = dir + "/kernels0.so";
  const std::string command = "objcopy --remove-section=.kiln_target '" + library + "' 2>&1";
  if (std::system(command.c_str()) != 0) GTEST_SKIP() << "objcopy is not available";
  json::Value m = manifest(dir);
  m["sha256"]["kernels0.so"] = sha256_file_hex(library);
  m["artifact_sha256"] = artifact::artifact_digest(m);
  write_manifest(dir, m);
  expect_parts(load_error(dir), {"kernels0.so: expected a record of the CPU its kernels were "
                                 "compiled for (section .kiln_target), found none",
                                 "export the model again"});
}

// The object file is not loaded, but it is part of the artifact (for static linking).
TEST_F(ExportTampered, DamagedOrMissingObjectFile) {
  std::string dir = fresh_copy();
  std::string bytes = read_text(dir + "/kernels0.o");
  bytes[bytes.size() / 2] ^= 0x01;
  write_text(dir + "/kernels0.o", bytes);
  expect_parts(load_error(dir), {"kernels0.o", "sha256", "is not the file that was exported"});
  fs::remove(dir + "/kernels0.o");
  expect_parts(load_error(dir), {"kernels0.o", "cannot be opened"});
}

TEST_F(ExportTampered, MissingGraph) {
  std::string dir = fresh_copy();
  fs::remove(dir + "/graph0.kir");
  expect_parts(load_error(dir), {"graph0.kir", "cannot open it", "export the model again"});
}

TEST_F(ExportTampered, ManifestIsNotJson) {
  std::string dir = fresh_copy();
  write_text(dir + "/manifest.json", "{\"format\": \"kiln-artifact\", ");
  expect_parts(load_error(dir), {"manifest.json"});
}

TEST_F(ExportTampered, NewerFormatVersion) {
  std::string dir = fresh_copy();
  json::Value m = manifest(dir);
  m["format_version"] = 99;
  write_manifest(dir, m);
  expect_parts(load_error(dir), {"format_version", "found 99", "at least as new"});
}

TEST_F(ExportTampered, CpuFeatureThisHostLacks) {
#if defined(__x86_64__) && !defined(__clang__)
  // avx512er (Xeon Phi only) is on no CPU kiln runs on; a GCC build can check it.
  if (host_has_cpu_feature("avx512er").value_or(true))
    GTEST_SKIP() << "this host has (or cannot check) avx512er";
  std::string dir = fresh_copy();
  json::Value m = manifest(dir);
  m["target"]["features"].as_array().push_back("avx512er");
  m["artifact_sha256"] = artifact::artifact_digest(m);  // a consistent manifest naming it
  write_manifest(dir, m);
  expect_parts(load_error(dir), {"CPU features this machine lacks: avx512er", "portable"});
#else
  GTEST_SKIP() << "avx512er is checkable only on x86-64 with a GCC build of kiln";
#endif
}

TEST_F(ExportTampered, ChangedFileDigest) {
  std::string dir = fresh_copy();
  json::Value m = manifest(dir);
  m["sha256"]["graph0.kir"] = std::string(64, '0');
  write_manifest(dir, m);
  expect_parts(load_error(dir),
               {"artifact_sha256", "the files' digests", "manifest.json was changed after export"});
}

TEST_F(ExportTampered, NullAndMissingDirectory) {
  EXPECT_EQ(kiln_rt_load(nullptr), nullptr);
  expect_parts(kiln_rt_last_error(), {"kiln_rt_load", "expected a directory, got NULL"});
  std::string missing = scratch_.path("nowhere.kiln");
  expect_parts(load_error(missing), {missing});
}

// ---- 5. what export refuses ----

// A forward whose C++ body computes something else on its second call: the graph traced on
// the first call then disagrees with the eager reference, and export writes nothing.
TEST(ExportErrors, CompiledDiffersFromEager) {
  ScratchDir scratch("differs");
  std::string dir = scratch.path("a.kiln");
  auto model = fashion_mlp();
  Tensor x = randn_batch({4, 12}, 1);
  int calls = 0;
  ExportOptions options;
  options.forward = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor y = (*model)(in.at(0));
    return {++calls == 1 ? y : y * 2};
  };
  expect_error([&] { export_model(model, {x}, dir, options); },
               {"[export] the compiled graph computes", "where the eager forward computes",
                "output 0, element", "tolerance 0.0001", "no artifact was written"});
  EXPECT_FALSE(fs::exists(dir));
}

TEST(ExportErrors, TrainingModeAndBadArguments) {
  ScratchDir scratch("errors");
  std::string dir = scratch.path("a.kiln");
  auto model = fashion_mlp();
  Tensor x = randn_batch({4, 12}, 1);
  model->train();
  expect_error(
      [&] { export_model(model, {x}, dir); },
      {"[export] FashionMLP: the root module (FashionMLP) is in training mode", "model->eval()"});
  model->eval();
  model->children()[0]->train();  // one submodule left in training mode is found too
  expect_error([&] { export_model(model, {x}, dir); },
               {"[export] FashionMLP: module 'flatten'", "is in training mode"});
  model->eval();
  expect_error([&] { export_model(model, {}, dir); },
               {"[export] expected at least one example input, found none"});
  expect_error(
      [&] {
        export_model(model, {x, x}, dir);
      },
      {"[export] FashionMLP's forward(x) takes one tensor, found 2", "ExportOptions::forward"});
  ExportOptions names;
  names.input_names = {"a", "b"};
  expect_error([&] { export_model(model, {x}, dir, names); },
               {"[export] expected 1 input_names", "found 2"});
  // Batch 1 cannot be made dynamic: the trace keeps sizes 0 and 1 static.
  ExportOptions dynamic;
  dynamic.dynamic_batch = true;
  expect_error(
      [&] {
        export_model(model, {randn_batch({1, 12}, 2)}, dir, dynamic);
      },
      {"dim 0 of input 'x' was asked to be dynamic", "sizes 0 and 1 are always static"});
  EXPECT_TRUE(list_dir(scratch.base()).empty());
}

TEST(ExportErrors, OtherDirectoryIsLeftUntouched) {
  ScratchDir scratch("occupied");
  std::string dir = scratch.path("mine");
  fs::create_directories(dir);
  write_text(dir + "/notes.txt", "keep me");
  // Refused after the artifact was written to its temporary directory: that one is removed.
  expect_error(
      [&] {
        export_model(fashion_mlp(), {randn_batch({4, 12}, 1)}, dir);
      },
      {"[export] expected '" + dir + "' to be absent, empty or an earlier export",
       "directory without manifest.json", "export never deletes other files"});
  EXPECT_EQ(list_dir(dir), std::vector<std::string>({"notes.txt"}));
  EXPECT_EQ(read_text(dir + "/notes.txt"), "keep me");
  EXPECT_EQ(list_dir(scratch.base()), std::vector<std::string>({"mine"}));
  // A plain file is refused the same way.
  std::string file = scratch.path("file.kiln");
  write_text(file, "x");
  expect_error(
      [&] {
        export_model(fashion_mlp(), {randn_batch({4, 12}, 1)}, file);
      },
      {"found a file"});
  EXPECT_EQ(read_text(file), "x");
  EXPECT_EQ(list_dir(scratch.base()), std::vector<std::string>({"file.kiln", "mine"}));
}

TEST(ExportErrors, ReexportReplacesTheArtifact) {
  ScratchDir scratch("reexport");
  std::string dir = scratch.path("a.kiln");
  ExportOptions options;
  options.dynamic_batch = true;
  ExportResult first = export_model(fashion_mlp(), {randn_batch({4, 12}, 1)}, dir, options);
  // A trailing slash names the same directory.
  auto other = models::build(models::FashionMLPConfig{12, 8, 3, 0.3});
  other->eval();
  ExportResult second = export_model(other, {randn_batch({2, 12}, 1)}, dir + "/");
  EXPECT_EQ(second.dir, dir);
  std::vector<std::string> listed;
  for (const auto& [name, bytes] : second.files) listed.push_back(name);
  std::sort(listed.begin(), listed.end());
  // Nothing of the first export is left (it had a graph per batch range).
  EXPECT_EQ(list_dir(dir), listed);
  EXPECT_EQ(list_dir(scratch.base()), std::vector<std::string>({"a.kiln"}));
  kiln_rt::Model rt(dir);
  EXPECT_EQ(rt.input_signature(0), "float32[2, 12]");
  EXPECT_EQ(rt.output_signature(0), "float32[2, 3]");
  EXPECT_NE(first.manifest.artifact_sha256, second.manifest.artifact_sha256);
}

TEST(ExportErrors, AKilledExportsScratchIsRemovedByTheNext) {
  // A kill mid-export leaves "DIR.tmp-PID-N" (or, on a file system that cannot exchange two
  // directories, "DIR.old-PID-N"); the next export to DIR removes them when PID is gone.
  ScratchDir scratch("killed");
  std::string dir = scratch.path("a.kiln");
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = std::to_string(child);
  fs::create_directories(dir + ".tmp-" + dead + "-0");
  fs::create_directories(dir + ".old-" + dead + "-1");
  std::ofstream(dir + ".tmp-" + dead + "-0/manifest.json") << "{";
  export_model(fashion_mlp(), {randn_batch({2, 12}, 1)}, dir);
  export_model(fashion_mlp(), {randn_batch({2, 12}, 1)}, dir);  // replaces, by exchange
  EXPECT_EQ(list_dir(scratch.base()), std::vector<std::string>({"a.kiln"}));
  kiln_rt::Model rt(dir);
}

// ---- 6. kiln_rt's thread count ----

// kiln_rt's own thread pool (not the process's kiln). One thread computes the same values;
// not always the same bits, since the GEMM library picks its blocking by the rows each
// thread gets.
TEST(ExportThreads, NumThreadsIsSetThroughTheCApi) {
  ScratchDir scratch("threads");
  auto model = fashion_mlp();
  ExportOptions options;
  options.dynamic_batch = true;
  ExportResult r = export_model(model, {randn_batch({4, 12}, 1)}, scratch.path("t.kiln"), options);
  kiln_rt::Model rt(r.dir);
  Tensor x = randn_batch({64, 12}, 2);
  int before = kiln_rt::num_threads();
  Tensor want = run_rt(rt, {x}).at(0);
  kiln_rt::set_num_threads(1);
  EXPECT_EQ(kiln_rt::num_threads(), 1);
  EXPECT_TRUE(within(run_rt(rt, {x}).at(0), want, 1e-5));
  kiln_rt::set_num_threads(before);
  EXPECT_EQ(kiln_rt::num_threads(), before);
  EXPECT_EQ(kiln_rt_set_num_threads(0), -1);
  expect_parts(kiln_rt_last_error(), {"kiln_rt_set_num_threads", "at least 1 thread, got 0"});
}

// ---- 7. portable kernels ----

TEST(ExportPortable, LoadsAndMatchesEager) {
  ScratchDir scratch("portable");
  auto model = fashion_mlp();
  NoGradGuard no_grad;
  ExportOptions options;
  options.portable = true;
  options.dynamic_batch = true;
  ExportResult r = export_model(model, {randn_batch({4, 12}, 1)}, scratch.path("p.kiln"), options);
#if defined(__x86_64__)
  for (const std::string& f : r.manifest.target.features)
    EXPECT_TRUE(f != "avx2" && f != "+avx2" && f != "fma" && f != "+fma") << f;
#endif
  kiln_rt::Model rt(r.dir);
  for (int64_t batch : {1, 3}) {
    Tensor x = randn_batch({batch, 12}, 60 + static_cast<uint64_t>(batch));
    std::vector<Tensor> got = run_rt(rt, {x});
    EXPECT_TRUE(within(got.at(0), (*model)(x), 1e-5)) << "batch " << batch;
  }
}

// FashionMLP exported twice with a dynamic batch: weights in a file, and embedded.
struct PlainAndEmbedded {
  ScratchDir scratch;
  std::shared_ptr<nn::Module> model = fashion_mlp();
  Tensor example = randn_batch({4, 12}, 1);
  ExportOptions options;
  ExportResult plain, embedded;
  explicit PlainAndEmbedded(const std::string& name) : scratch(name) {
    NoGradGuard no_grad;
    options.dynamic_batch = true;
    plain = export_model(model, {example}, scratch.path("plain.kiln"), options);
    options.embed_weights = true;
    embedded = export_model(model, {example}, scratch.path("embedded.kiln"), options);
  }
};

// Weights inside a shared library: no safetensors file, the same results bit for bit, and
// the library's digest checked before it is loaded.
TEST(ExportEmbeddedWeights, RunsLikeTheFileAndIsChecked) {
  PlainAndEmbedded exported("embedded");
  const ExportResult &plain = exported.plain, &embedded = exported.embedded;
  EXPECT_EQ(embedded.manifest.weights, "weights.so");
  EXPECT_TRUE(embedded.manifest.weights_embedded);
  EXPECT_FALSE(fs::exists(embedded.dir + "/weights.safetensors"));
  EXPECT_FALSE(fs::exists(embedded.dir + "/.weights.S"));
  EXPECT_TRUE(fs::exists(embedded.dir + "/weights.so"));
  {
    kiln_rt::Model a(plain.dir), b(embedded.dir);
    Tensor x = randn_batch({3, 12}, 70);
    EXPECT_TRUE(same_bits(run_rt(b, {x}).at(0), run_rt(a, {x}).at(0)));
  }  // unloaded before its file is damaged: a loaded library is mapped from its file

  std::string bytes = read_text(embedded.dir + "/weights.so");
  bytes[bytes.size() / 2] ^= 0x01;
  write_text(embedded.dir + "/weights.so", bytes);
  expect_parts(load_error(embedded.dir),
               {"weights.so", "sha256", "is not the file that was exported"});

  // The assembler's .incbin names the bytes by path, in quotes.
  std::string odd = exported.scratch.path("say \"hi\".kiln");
  expect_error([&] { export_model(exported.model, {exported.example}, odd, exported.options); },
               {"embed_weights needs a directory path without quotes", "say \"hi\""});
  EXPECT_FALSE(fs::exists(odd));
}

// A forward that treats size 1 differently (squeeze() drops a batch of 1): the trace at
// size 1 differs from the dynamic graph specialized to 1, so the artifact holds a second
// graph serving exactly s0 = 1, and each call runs the graph whose range holds its batch.
struct SqueezingHead : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(6, 4));
  Tensor forward(const Tensor& x) override { return fc(x).squeeze(); }
};

TEST(ExportModels, SizeOneServedByAGraphOfItsOwn) {
  ScratchDir scratch("size_one");
  manual_seed(5);
  auto model = std::make_shared<SqueezingHead>();
  model->eval();
  NoGradGuard no_grad;
  ExportOptions options;
  options.dynamic_batch = true;
  ExportResult r = export_model(model, {randn_batch({3, 6}, 1)}, scratch.path("a.kiln"), options);
  ASSERT_EQ(r.manifest.graphs.size(), 2u) << r.summary();
  EXPECT_EQ(r.manifest.graphs[0].symbols,
            (std::vector<artifact::SymbolRange>{{"s0", 2, std::numeric_limits<int64_t>::max()}}));
  EXPECT_EQ(r.manifest.graphs[1].symbols, (std::vector<artifact::SymbolRange>{{"s0", 1, 1}}));
  EXPECT_EQ(r.manifest.symbols[0].min, 1);
  kiln_rt::Model rt(r.dir);
  for (int64_t batch : {1, 2, 5}) {
    Tensor x = randn_batch({batch, 6}, 90 + static_cast<uint64_t>(batch));
    Tensor want = (*model)(x);
    Tensor got = run_rt(rt, {x}).at(0);
    EXPECT_EQ(got.sizes(), want.sizes()) << "batch " << batch;
    EXPECT_TRUE(within(got, want, 1e-5)) << "batch " << batch;
  }
}

// KILN_RT_MAP_WEIGHTS=1: the graph reads the weights where they are mapped (the file, or
// the embedded library's data), with the same results bit for bit.
TEST(ExportMappedWeights, SameResultsFromTheMapping) {
  PlainAndEmbedded exported("mapped");
  const ExportResult &file = exported.plain, &embedded = exported.embedded;
  Tensor x = randn_batch({5, 12}, 80);
  Tensor want = run_rt(kiln_rt::Model(file.dir), {x}).at(0);
  ::setenv("KILN_RT_MAP_WEIGHTS", "1", 1);
  std::vector<Tensor> from_file = run_rt(kiln_rt::Model(file.dir), {x});
  std::vector<Tensor> from_library = run_rt(kiln_rt::Model(embedded.dir), {x});
  ::unsetenv("KILN_RT_MAP_WEIGHTS");
  EXPECT_TRUE(same_bits(from_file.at(0), want));
  EXPECT_TRUE(same_bits(from_library.at(0), want));
}

}  // namespace
}  // namespace kiln
