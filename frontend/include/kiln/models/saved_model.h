// Catalog models saved with their name and config, so a file alone rebuilds the model:
//
//   kiln::models::save_model(*model, "fashion_mlp", config, "fashion.safetensors");
//   kiln::models::SavedModel saved = kiln::models::load_model("fashion.safetensors");
//   saved.model  // a FashionMLP with the trained weights
//
// The checkpoint's config entry is {"model": NAME, "config": {...}, "input_shape": [...]}.
// NAME is written as the catalog name; on reading, any spelling the catalog accepts (an
// earlier name such as "bn_cnn", '-' for '_') loads, and SavedModel::name is the catalog name.
// input_shape (one sample, no batch dim) records what the model reads, for tools such as
// `kiln summary`; lazy layers need no dry run to load (load_state_dict materializes them).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/serialize/json.h"

namespace kiln::models {

struct SavedModel {
  std::string name;    // the catalog name ("fashion_mlp"), whatever spelling the file has
  json::Value config;  // the complete config it was built from
  std::shared_ptr<nn::Module> model;
  // The checkpoint's other metadata (e.g. "test_accuracy" written by `kiln train`).
  std::map<std::string, std::string> metadata;
};

// Saves `model` (built by build_model(name, config)) atomically as a safetensors checkpoint.
// `input_shape` is one sample's shape ({1, 28, 28} for the Fashion-MNIST models).
void save_model(const nn::Module& model, const std::string& name, const json::Value& config,
                const std::string& path, const std::map<std::string, std::string>& extra = {},
                const std::vector<int64_t>& input_shape = {1, 28, 28});

// Rebuilds the model from the checkpoint's name and config and loads its weights (strict).
// A file that is not a catalog-model checkpoint gives an error naming what is missing.
SavedModel load_model(const std::string& path);

}  // namespace kiln::models
