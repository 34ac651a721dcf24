// Models built by name from JSON configs (what `kiln train` and `kiln eval` do), a checkpoint
// that rebuilds its model from the file alone, what a checkpoint says about itself, and a
// state dict written by PyTorch loaded into the same architecture built with kiln layers.
// docs/modules.md quotes this program and its output.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "example_checks.h"
#include "kiln/kiln.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/registry.h"
#include "kiln/models/saved_model.h"
#include "kiln/serialize/checkpoint.h"

namespace nn = kiln::nn;
namespace json = kiln::json;
using kiln::Tensor;

#ifndef KILN_TEST_DATA_DIR
#define KILN_TEST_DATA_DIR "tests/data"
#endif

int main() {
  kiln::manual_seed(0);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_models_" + std::to_string(getpid()) + ".safetensors"))
                               .string();

  // [example: config]
  // A config is a plain struct; build(config) makes the model, config_to_json describes it.
  auto mlp = kiln::models::build(kiln::models::FashionMLPConfig{.d_hidden = 128, .dropout = 0.1});
  std::cout << json::dump(kiln::models::config_to_json(mlp->config)) << "\n";
  // [end]
  check(mlp->fc1->out_features == 128, "config fields reach the layers");

  // [example: build]
  // The defaults of FashionMLPConfig, overridden by the keys given.
  json::Value config =
      kiln::models::resolve_config("fashion_mlp", json::parse(R"({"d_hidden": 64})"));
  std::shared_ptr<nn::Module> model = kiln::models::build_model("fashion_mlp", config);
  std::cout << json::dump(config) << "\n" << *model << "\n";
  try {
    kiln::models::resolve_config("fashion_mlp", json::parse(R"({"d_hiden": 64})"));
  } catch (const kiln::Error& e) {
    std::cout << "error: " << e.what() << "\n";
  }
  // [end]
  check(model->parameters().size() == 6, "FashionMLP has 3 Linears");

  // [example: save]
  kiln::models::save_model(*model, "fashion_mlp", config, path, {{"note", "docs example"}});
  kiln::models::SavedModel saved = kiln::models::load_model(path);  // the file alone
  Tensor x = kiln::randn({2, 1, 28, 28});
  model->eval();
  saved.model->eval();
  bool same = (*model)(x).to_vector<float>() == (*saved.model)(x).to_vector<float>();
  std::cout << "rebuilt " << saved.name << " " << json::dump(saved.config)
            << ", same outputs: " << std::boolalpha << same << "\n";

  kiln::Checkpoint ck = kiln::load_checkpoint(path);
  std::cout << "format_version " << ck.format_version << ", kiln " << ck.kiln_version
            << ", contents " << ck.contents << ", " << ck.tensors.size() << " tensors\n"
            << "config " << json::dump(ck.config) << "\n";
  for (const auto& [key, value] : ck.metadata)
    std::cout << "metadata " << key << " = " << value << "\n";
  // [end]
  check(same, "load_model rebuilds the same model");
  check(ck.format_version == kiln::kCheckpointFormatVersion && ck.contents == "model",
        "checkpoint info");
  check(ck.metadata.at("note") == "docs example" && ck.metadata.at("format") == "pt", "metadata");
  std::filesystem::remove(path);

  // [example: torch]
  // tests/data/checkpoint/make_checkpoint.py saved, with safetensors.torch.save_file, the
  // state dict of nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2)).
  const std::string dir = KILN_TEST_DATA_DIR "/checkpoint/";
  auto torch_model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::BatchNorm1d>(3),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 2));
  kiln::load(*torch_model, dir + "torch_mlp.safetensors");  // strict: same keys, same shapes
  torch_model->eval();
  kiln::Checkpoint io = kiln::load_checkpoint(dir + "torch_mlp_io.safetensors");
  Tensor diff = ((*torch_model)(*io.find("input")) - *io.find("output")).abs().max();
  std::printf("max |kiln - torch| = %.3g\n", diff.item<double>());
  // [end]
  check(diff.item<double>() <= 1e-6, "PyTorch's outputs reproduced");

  return finish("models_and_checkpoints");
}
