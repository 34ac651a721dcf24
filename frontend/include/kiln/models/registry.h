// The model catalog: every seed model family by name, built from a JSON config. This is
// what lets `kiln train --model fashion_mlp` work and `kiln eval --checkpoint FILE` rebuild
// a model from the config stored in the checkpoint alone.
//
// A model's name is the stem of its header (batch_norm_cnn for kiln/models/batch_norm_cnn.h;
// halving_mlp_while lives beside halving_mlp). Every function here also accepts '-' for '_'
// ("residual-mlp") and the earlier names kept as aliases ("bn_cnn", "transformer"), so
// checkpoints saved under an earlier name still load; what they return and store is the
// catalog name.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/serialize/json.h"

namespace kiln::models {

struct ModelInfo {
  std::string name;                  // "batch_norm_cnn"
  std::string description;           // one line for `kiln --help`
  std::vector<std::string> aliases;  // earlier names still accepted ("bn_cnn")
};

// Every model the catalog can build, in a fixed order.
const std::vector<ModelInfo>& model_catalog();

// The catalog name that `name` spells (itself, with '-' for '_', or an alias), or "" when it
// names no model.
std::string canonical_model_name(std::string_view name);

// The catalog name an unknown `name` most likely misspells (kiln::closest_match over the
// names and aliases), or "" when none is close.
std::string suggest_model_name(std::string_view name);

// The complete config of `name`: its defaults overridden by `overrides` (a JSON object, or
// null for the defaults). Unknown names, unknown keys and mistyped values throw.
json::Value resolve_config(const std::string& name, const json::Value& overrides = {});

// Builds model `name` from `config` (see resolve_config for what is accepted).
std::shared_ptr<nn::Module> build_model(const std::string& name, const json::Value& config = {});

}  // namespace kiln::models
