// The model catalog: one row per model family, tying its name to its config struct.
#include "kiln/models/registry.h"

#include <algorithm>
#include <functional>

#include "kiln/closest_match.h"
#include "kiln/models/batch_norm_cnn.h"
#include "kiln/models/config.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/halving_mlp.h"
#include "kiln/models/lazy_cnn.h"
#include "kiln/models/residual_mlp.h"
#include "kiln/models/transformer_classifier.h"

namespace kiln::models {

namespace {

struct Entry {
  ModelInfo info;
  std::function<json::Value(const json::Value&)> resolve;
  std::function<std::shared_ptr<nn::Module>(const json::Value&)> build;
};

// A row for a family whose config struct is Config and whose build(Config) makes it.
template <class Config>
Entry entry(std::string name, std::string description, std::vector<std::string> aliases = {}) {
  const std::string config_name = name + " config";
  return Entry{{name, std::move(description), std::move(aliases)},
               [config_name](const json::Value& j) {
                 return config_to_json(config_from_json<Config>(j, config_name));
               },
               [config_name](const json::Value& j) -> std::shared_ptr<nn::Module> {
                 return build(config_from_json<Config>(j, config_name));
               }};
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = {
      entry<FashionMLPConfig>("fashion_mlp", "784-256-256-10 MLP with dropout (269,322 params)"),
      entry<MLPConfig>("residual_mlp", "stem + residual blocks + head (729,866 params by default)"),
      entry<BatchNormCNNConfig>("batch_norm_cnn",
                                "2 x (conv, BatchNorm, ReLU, max-pool) + MLP head", {"bn_cnn"}),
      entry<LazyCNNConfig>("lazy_cnn", "2 x (LazyConv2d, ReLU, max-pool) + LazyLinear head"),
      entry<TransformerClassifierConfig>("transformer_classifier",
                                         "pre-norm Transformer encoder over image rows",
                                         {"transformer"}),
      entry<HalvingMLPConfig>("halving_mlp",
                              "784-64-10 MLP ending in a loop on a tensor value (graph-breaks "
                              "when compiled)"),
      entry<HalvingMLPWhileConfig>("halving_mlp_while",
                                   "halving_mlp with its loop as kiln::while_loop (one graph)"),
  };
  return table;
}

// '-' and '_' are one character in model names: `--model residual-mlp` is residual_mlp.
std::string underscored(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

const Entry* lookup(std::string_view name) {
  const std::string key = underscored(name);
  for (const Entry& e : entries()) {
    if (e.info.name == key) return &e;
    for (const std::string& alias : e.info.aliases)
      if (alias == key) return &e;
  }
  return nullptr;
}

const Entry& find(const std::string& name) {
  if (const Entry* e = lookup(name)) return *e;
  std::string known;
  for (const Entry& e : entries()) known += (known.empty() ? "" : ", ") + e.info.name;
  const std::string close = suggest_model_name(name);
  KILN_FAIL("[models] unknown model '", name, "'.",
            close.empty() ? "" : " Did you mean '" + close + "'?", " Known models: ", known,
            ". Fix: pick one of them (`kiln summary --model NAME`).");
}

}  // namespace

const std::vector<ModelInfo>& model_catalog() {
  static const std::vector<ModelInfo> infos = [] {
    std::vector<ModelInfo> out;
    for (const Entry& e : entries()) out.push_back(e.info);
    return out;
  }();
  return infos;
}

std::string canonical_model_name(std::string_view name) {
  const Entry* e = lookup(name);
  return e ? e->info.name : "";
}

std::string suggest_model_name(std::string_view name) {
  // Aliases are candidates too, so a typo of an earlier name ("transfomer") is caught; the
  // suggestion is always the catalog name.
  std::vector<std::string> candidates;
  std::vector<const Entry*> owners;
  for (const Entry& e : entries()) {
    candidates.push_back(e.info.name);
    owners.push_back(&e);
    for (const std::string& alias : e.info.aliases) {
      candidates.push_back(alias);
      owners.push_back(&e);
    }
  }
  const std::string match = closest_match(underscored(name), candidates);
  if (match.empty()) return "";
  const auto at = std::find(candidates.begin(), candidates.end(), match) - candidates.begin();
  return owners[static_cast<size_t>(at)]->info.name;
}

json::Value resolve_config(const std::string& name, const json::Value& overrides) {
  return find(name).resolve(overrides);
}

std::shared_ptr<nn::Module> build_model(const std::string& name, const json::Value& config) {
  return find(name).build(config);
}

}  // namespace kiln::models
