// save_model / load_model: catalog models with their config in the checkpoint.
#include "kiln/models/saved_model.h"

#include "kiln/models/registry.h"
#include "kiln/nn/state_budget.h"
#include "kiln/serialize/checkpoint.h"

namespace kiln::models {

void save_model(const nn::Module& model, const std::string& name, const json::Value& config,
                const std::string& path, const std::map<std::string, std::string>& extra,
                const std::vector<int64_t>& input_shape) {
  json::Array shape;
  for (int64_t d : input_shape) shape.emplace_back(d);
  // resolve_config refuses an unknown name first; the file stores the catalog spelling.
  json::Value resolved = resolve_config(name, config);
  json::Object entry;
  entry.emplace_back("model", canonical_model_name(name));
  entry.emplace_back("config", std::move(resolved));
  entry.emplace_back("input_shape", std::move(shape));
  kiln::save(model, path, json::Value(std::move(entry)), extra);
}

SavedModel load_model(const std::string& path) {
  Checkpoint ckpt = load_checkpoint(path);
  const json::Value& c = ckpt.config;
  const json::Value* name = c.is_object() ? c.find("model") : nullptr;
  const json::Value* config = c.is_object() ? c.find("config") : nullptr;
  KILN_CHECK(name && name->is_string() && config, "[load_model] '", path,
             "' holds no model name and config (expected a config entry {\"model\": NAME, "
             "\"config\": {...}} in its metadata, found ",
             c.is_null() ? "none" : json::dump(c),
             "). Fix: save it with kiln::models::save_model or `kiln train --save`; a plain state "
             "dict loads with kiln::load(model, path) into a model you build yourself.");
  // A file saved under an earlier name ("bn_cnn") loads as its catalog name: resolve_config
  // accepts every spelling and refuses an unknown one with the catalog's names.
  json::Value resolved = resolve_config(name->as_string(), *config);
  SavedModel saved{canonical_model_name(name->as_string()), std::move(resolved), nullptr,
                   ckpt.metadata};
  {
    // The stored config is checked against the file's tensors while the model is built: a
    // model that outgrows them is refused before its weights are allocated and written.
    // Twice the file's elements (plus 1M) leaves room for buffers a file need not hold.
    int64_t stored = 0;
    for (const auto& [key, t] : ckpt.tensors)
      stored = size_add(stored, t.numel(), "the checkpoint's elements");
    nn::StateBudgetScope budget(
        size_add(size_mul(stored, 2, "the state budget"), int64_t{1} << 20, "the state budget"),
        kiln::detail::str_cat("the checkpoint '", path, "' holds ", stored, " elements and its config ",
                json::dump(saved.config), " must build a model that fits them"));
    saved.model = build_model(saved.name, saved.config);
  }
  // Lazy layers materialize from their weights' shapes (load_state_dict), with no dry run.
  saved.model->load_state_dict(ckpt.tensors, /*strict=*/true);
  return saved;
}

}  // namespace kiln::models
