// The model catalog: exact parameter counts of the seed families, state paths, configs to
// and from JSON (and their errors), the registry, and forward shapes.
#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/kiln.h"
#include "kiln/models/batch_norm_cnn.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/registry.h"
#include "kiln/models/residual_mlp.h"
#include "kiln/models/saved_model.h"
#include "kiln/nn/state_budget.h"
#include "test_util.h"

namespace kiln {
namespace {

int64_t count_params(nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

double max_diff(const Tensor& a, const Tensor& b) {
  return (a - b).abs().max().item<double>();
}

bool has_key(const nn::NamedTensors& named, const std::string& key) {
  for (const auto& [k, v] : named)
    if (k == key) return true;
  return false;
}

TEST(Models, ResidualMLPHasTheSeedParameterCounts) {
  auto small = models::build(models::MLPConfig{});
  EXPECT_EQ(count_params(*small), 729866);
  auto large = models::build(models::MLPConfig{.d_hidden = 512, .num_blocks = 8});
  EXPECT_EQ(count_params(*large), 4609546);
  auto named = small->named_parameters();
  EXPECT_TRUE(has_key(named, "stem.weight"));
  EXPECT_TRUE(has_key(named, "blocks.0.up.weight"));
  EXPECT_TRUE(has_key(named, "blocks.3.down.bias"));
  EXPECT_TRUE(has_key(named, "head.bias"));
  Tensor out = (*small)(randn({3, 1, 28, 28}));
  EXPECT_EQ(Shape(out.sizes()), (Shape{3, 10}));
}

TEST(Models, ResidualBlockAddsItsInput) {
  models::ResidualBlock block(4);
  {
    NoGradGuard no_grad;
    block.down->weight.zero_();
    block.down->bias.zero_();
  }
  Tensor x = randn({2, 4});
  EXPECT_EQ(max_diff(block(x), x), 0.0);
}

TEST(Models, FashionMLPShapeCountAndDropoutFollowsEval) {
  auto mlp = models::build(models::FashionMLPConfig{});
  EXPECT_EQ(count_params(*mlp), 269322);
  Tensor x = randn({4, 1, 28, 28});
  EXPECT_EQ(Shape((*mlp)(x).sizes()), (Shape{4, 10}));
  mlp->eval();
  EXPECT_FALSE(mlp->drop->is_training());
  EXPECT_EQ(max_diff((*mlp)(x), (*mlp)(x)), 0.0);  // no dropout in eval: deterministic
  mlp->train();
  EXPECT_GT(max_diff((*mlp)(x), (*mlp)(x)), 0.0);
}

TEST(Models, BatchNormCNNPathsBuffersAndShapes) {
  auto cnn =
      models::build(models::BatchNormCNNConfig{.channels1 = 4, .channels2 = 8, .d_hidden = 16});
  auto sd = cnn->named_buffers();
  EXPECT_TRUE(has_key(sd, "features.1.running_mean"));
  EXPECT_TRUE(has_key(sd, "features.5.num_batches_tracked"));
  EXPECT_TRUE(has_key(cnn->named_parameters(), "classifier.1.weight"));
  EXPECT_EQ(Shape((*cnn)(randn({2, 1, 28, 28})).sizes()), (Shape{2, 10}));
  // conv 1*4*9 + bn 8 + conv 4*8*9 + bn 16 + fc 392*16+16 + fc 16*10+10
  EXPECT_EQ(count_params(*cnn), 36 + 8 + 288 + 16 + 392 * 16 + 16 + 170);
}

TEST(Models, ConfigRoundTripsThroughJson) {
  models::MLPConfig cfg{.d_hidden = 512, .num_blocks = 8};
  json::Value j = models::config_to_json(cfg);
  EXPECT_EQ(json::dump(j), R"({"d_in":784,"d_hidden":512,"num_blocks":8,"d_out":10})");
  auto back = models::config_from_json<models::MLPConfig>(json::parse(json::dump(j)), "mlp");
  EXPECT_EQ(back.d_hidden, 512);
  EXPECT_EQ(back.num_blocks, 8);
  // Missing keys keep their defaults; doubles read from ints.
  auto partial =
      models::config_from_json<models::FashionMLPConfig>(json::parse(R"({"dropout":0})"), "f");
  EXPECT_EQ(partial.d_hidden, 256);
  EXPECT_EQ(partial.dropout, 0.0);
}

TEST(Models, ConfigErrorsNameTheKey) {
  expect_error(
      [] { models::config_from_json<models::MLPConfig>(json::parse(R"({"d_hiden":5})"), "mlp"); },
      {"[mlp] unknown config key 'd_hiden'", "Known keys: d_in, d_hidden, num_blocks, d_out"});
  expect_error(
      [] {
        models::config_from_json<models::MLPConfig>(json::parse(R"({"d_hidden":2.5})"), "mlp");
      },
      {"[mlp.d_hidden] expected an integer, found the number 2.5, written with a fraction"});
  expect_error(
      [] {
        models::config_from_json<models::MLPConfig>(json::parse(R"({"d_hidden":1e12})"), "mlp");
      },
      {"found the number 1e+12", "write the integer's digits in full"});
  expect_error(
      [] {
        models::config_from_json<models::MLPConfig>(json::parse(R"({"d_hidden":"x"})"), "mlp");
      },
      {"[mlp.d_hidden] expected an integer, found string"});
  expect_error([] { models::config_from_json<models::MLPConfig>(json::parse("[1]"), "mlp"); },
               {"[mlp] a config must be a JSON object, found array"});
  expect_error([] { models::build(models::MLPConfig{.d_hidden = 0}); },
               {"[MLPConfig] expected d_hidden > 0, found 0", "Fix"});
  expect_error([] { models::build(models::FashionMLPConfig{.dropout = 1.5}); },
               {"expected 0 <= dropout < 1, found 1.5"});
  expect_error([] { models::build(models::BatchNormCNNConfig{.image_size = 30}); },
               {"image_size divisible by 4", "found 30"});
}

TEST(Models, RegistryBuildsEveryModelFromJson) {
  for (const auto& info : models::model_catalog()) {
    SCOPED_TRACE(info.name);
    json::Value cfg = models::resolve_config(info.name);
    EXPECT_TRUE(cfg.is_object());
    auto model = models::build_model(info.name, cfg);
    ASSERT_NE(model, nullptr);
    // A forward on Fashion-MNIST-shaped input gives 10 logits (lazy layers materialize).
    EXPECT_EQ(Shape((*model)(randn({2, 1, 28, 28})).sizes()), (Shape{2, 10}));
  }
  json::Value big =
      models::resolve_config("residual_mlp", json::parse(R"({"d_hidden":512,"num_blocks":8})"));
  EXPECT_EQ(json::dump(big), R"({"d_in":784,"d_hidden":512,"num_blocks":8,"d_out":10})");
  EXPECT_EQ(count_params(*models::build_model("residual_mlp", big)), 4609546);
  expect_error([] { models::build_model("resnet"); },
               {"unknown model 'resnet'", "Known models: fashion_mlp, residual_mlp"});
  expect_error([] { models::build_model("fashion_mpl"); },
               {"unknown model 'fashion_mpl'. Did you mean 'fashion_mlp'?"});
  expect_error([] { models::resolve_config("fashion_mlp", json::parse(R"({"width":3})")); },
               {"[fashion_mlp config] unknown config key 'width'"});
}

TEST(Models, RegistryReadsDashesAndEarlierNamesAsTheCatalogName) {
  EXPECT_EQ(models::canonical_model_name("residual_mlp"), "residual_mlp");
  EXPECT_EQ(models::canonical_model_name("residual-mlp"), "residual_mlp");
  EXPECT_EQ(models::canonical_model_name("bn_cnn"), "batch_norm_cnn");
  EXPECT_EQ(models::canonical_model_name("bn-cnn"), "batch_norm_cnn");
  EXPECT_EQ(models::canonical_model_name("transformer"), "transformer_classifier");
  EXPECT_EQ(models::canonical_model_name("halving-mlp-while"), "halving_mlp_while");
  EXPECT_EQ(models::canonical_model_name("resnet"), "");
  // Suggestions are catalog names, also for a typo of an earlier name.
  EXPECT_EQ(models::suggest_model_name("residual-mpl"), "residual_mlp");
  EXPECT_EQ(models::suggest_model_name("transfomer"), "transformer_classifier");
  EXPECT_EQ(models::suggest_model_name("resnet"), "");
  // Every spelling builds the same model, and its errors name the catalog name.
  EXPECT_EQ(count_params(*models::build_model("bn-cnn")),
            count_params(*models::build_model("batch_norm_cnn")));
  EXPECT_EQ(models::resolve_config("transformer"),
            models::resolve_config("transformer_classifier"));
  expect_error([] { models::resolve_config("bn_cnn", json::parse(R"({"width":3})")); },
               {"[batch_norm_cnn config] unknown config key 'width'"});
  expect_error([] { models::build_model("transfomer"); },
               {"unknown model 'transfomer'. Did you mean 'transformer_classifier'?",
                "Known models: fashion_mlp, residual_mlp, batch_norm_cnn, lazy_cnn, "
                "transformer_classifier, halving_mlp, halving_mlp_while."});
}

// Checkpoints hold the model's name: save_model writes the catalog name, and a file written
// under an earlier name ("bn_cnn", "halving-mlp") still loads, as the catalog name.
TEST(Models, LoadModelReadsACheckpointSavedUnderAnEarlierName) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "kiln_models_alias.safetensors").string();
  auto model = models::build_model("batch_norm_cnn");
  models::save_model(*model, "bn_cnn", {}, path);
  json::Value entry = load_checkpoint(path).config;
  EXPECT_EQ(entry.find("model")->as_string(), "batch_norm_cnn");
  for (const char* old_name : {"bn_cnn", "bn-cnn"}) {
    SCOPED_TRACE(old_name);
    entry["model"] = old_name;
    save(*model, path, entry);
    models::SavedModel saved = models::load_model(path);
    EXPECT_EQ(saved.name, "batch_norm_cnn");
    EXPECT_EQ(saved.config, models::resolve_config("batch_norm_cnn"));
    EXPECT_EQ(count_params(*saved.model), count_params(*model));
  }
  auto halving = models::build_model("halving_mlp");
  json::Value halving_entry = json::Object{};
  halving_entry["model"] = "halving-mlp";
  halving_entry["config"] = models::resolve_config("halving_mlp");
  save(*halving, path, halving_entry);
  EXPECT_EQ(models::load_model(path).name, "halving_mlp");
  halving_entry["model"] = "resnet";
  save(*halving, path, halving_entry);
  expect_error([&] { models::load_model(path); },
               {"[models] unknown model 'resnet'.", "Known models: fashion_mlp, residual_mlp"});
  std::filesystem::remove(path);
}

// A module whose constant is registered as a non-persistent buffer: it moves with to() but
// is not part of the checkpoint.
struct ScaledResidual : nn::Module {
  nn::ModulePtr<nn::Linear> body = register_module("body", std::make_shared<nn::Linear>(4, 4));
  Tensor scale = register_buffer("scale", full({}, 0.5), /*persistent=*/false);
  Tensor forward(const Tensor& x) override { return x + body(x) * scale; }
};

// A checkpoint's stored config is checked against its tensors while the model is built: a
// config far larger than the weights (tampered, or saved with the wrong config) is refused
// at the first layer that outgrows the file, before its weights are written, instead of
// allocating and initializing the whole model and failing at load_state_dict.
TEST(Models, LoadModelRefusesAStoredConfigLargerThanItsTensors) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "kiln_models_budget.safetensors").string();
  auto small = models::build(models::FashionMLPConfig{.d_hidden = 8});
  json::Value big = models::resolve_config("fashion_mlp", json::parse(R"({"d_hidden": 100000})"));
  models::save_model(*small, "fashion_mlp", big, path);
  expect_error([&] { models::load_model(path); },
               {"[state budget] the model being built registers Linear parameter 'weight' "
                "float32[100000, 784]",
                "holds 6442 elements", "\"d_hidden\":100000", "Nothing was written to it."});
  // The right config loads, and a budget outside load_model counts every registration.
  json::Value right = models::resolve_config("fashion_mlp", json::parse(R"({"d_hidden": 8})"));
  models::save_model(*small, "fashion_mlp", right, path);
  EXPECT_EQ(models::load_model(path).model->parameters().size(), 6u);
  {
    nn::StateBudgetScope budget(6442, "a test budget");
    models::build(models::FashionMLPConfig{.d_hidden = 8});
    EXPECT_EQ(budget.used(), 6442);
    expect_error([] { nn::Linear(1, 1); }, {"more than the 6442 allowed: a test budget"});
  }
  nn::Linear after(1000, 1000);  // no budget outside the scope
  std::filesystem::remove(path);
}

TEST(Models, ScaledResidualConstantStaysOutOfTheStateDict) {
  ScaledResidual m;
  auto sd = m.state_dict();
  EXPECT_FALSE(has_key(sd, "scale"));
  EXPECT_TRUE(has_key(sd, "body.weight"));
  EXPECT_TRUE(has_key(m.named_buffers(), "scale"));
  m.to(DType::Float64);
  EXPECT_EQ(m.scale.dtype(), DType::Float64);
}

}  // namespace
}  // namespace kiln
