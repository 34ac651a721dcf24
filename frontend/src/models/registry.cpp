// The model catalog: one row per model family, tying its name to its config struct.
#include "kiln/models/registry.h"

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
Entry entry(std::string name, std::string description) {
  const std::string config_name = name + " config";
  return Entry{{name, std::move(description)},
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
      entry<BatchNormCNNConfig>("bn_cnn", "2 x (conv, BatchNorm, ReLU, max-pool) + MLP head"),
      entry<LazyCNNConfig>("lazy_cnn", "2 x (LazyConv2d, ReLU, max-pool) + LazyLinear head"),
      entry<TransformerClassifierConfig>("transformer",
                                         "pre-norm Transformer encoder over image rows"),
      entry<HalvingMLPConfig>("halving-mlp",
                              "784-64-10 MLP ending in a loop on a tensor value (graph-breaks "
                              "when compiled)"),
      entry<HalvingMLPWhileConfig>("halving-mlp-while",
                                   "halving-mlp with its loop as kiln::while_loop (one graph)"),
  };
  return table;
}

const Entry& find(const std::string& name) {
  std::string known;
  std::vector<std::string> names;
  for (const Entry& e : entries()) {
    if (e.info.name == name) return e;
    known += (known.empty() ? "" : ", ") + e.info.name;
    names.push_back(e.info.name);
  }
  const std::string close = closest_match(name, names);
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

json::Value resolve_config(const std::string& name, const json::Value& overrides) {
  return find(name).resolve(overrides);
}

std::shared_ptr<nn::Module> build_model(const std::string& name, const json::Value& config) {
  return find(name).build(config);
}

}  // namespace kiln::models
