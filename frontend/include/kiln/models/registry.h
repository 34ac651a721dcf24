// The model catalog: every seed model family by name, built from a JSON config. This is
// what lets `kiln train --model fashion_mlp` work and `kiln eval --checkpoint FILE` rebuild
// a model from the config stored in the checkpoint alone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/serialize/json.h"

namespace kiln::models {

struct ModelInfo {
  std::string name;         // "fashion_mlp"
  std::string description;  // one line for `kiln --help`
};

// Every model the catalog can build, in a fixed order.
const std::vector<ModelInfo>& model_catalog();

// The complete config of `name`: its defaults overridden by `overrides` (a JSON object, or
// null for the defaults). Unknown names, unknown keys and mistyped values throw.
json::Value resolve_config(const std::string& name, const json::Value& overrides = {});

// Builds model `name` from `config` (see resolve_config for what is accepted).
std::shared_ptr<nn::Module> build_model(const std::string& name, const json::Value& config = {});

}  // namespace kiln::models
