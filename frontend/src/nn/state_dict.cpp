// Module::state_dict and Module::load_state_dict: the model's state by dotted path, and the
// in-place load that checkpoints (kiln/serialize/checkpoint.h) build on.
//
// Loading copies into the existing tensors instead of replacing them: the members of the
// layers, an optimizer's parameter list and tied weights all hold the same TensorImpl, so
// a load that swapped tensors would silently detach them from the model.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/nn/module.h"
#include "kiln/nn/uninitialized.h"

namespace kiln::nn {

namespace {

std::string join_path(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// PyTorch's order: every module of the tree (the root first, children in registration order,
// a shared child under each of its paths), and for each its own parameters, then its own
// persistent buffers. The handles are the module's own (not detached).
NamedTensors state_entries(const Module& root) {
  NamedTensors out;
  auto& self = const_cast<Module&>(root);
  for (const auto& [path, m] : self.named_modules("", /*remove_duplicate=*/false)) {
    for (auto& entry : m->named_parameters(path, /*recurse=*/false, /*remove_duplicate=*/false))
      out.push_back(std::move(entry));
    for (const auto& [name, t] : m->named_buffers("", /*recurse=*/false, false))
      if (m->is_buffer_persistent(name)) out.emplace_back(join_path(path, name), t);
  }
  return out;
}

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", \"" : "\"") + keys[i] + "\"";
  return out;
}

// When every key of `shorter` appears in `longer` as P + key for one prefix P ending in
// '.', returns P: the state dict was saved from a wrapper of the model ("model.", "module.")
// or from one of its submodules.
std::string common_prefix(const std::vector<std::string>& shorter,
                          const std::vector<std::string>& longer) {
  if (shorter.empty() || longer.empty()) return {};
  std::unordered_set<std::string> lookup(longer.begin(), longer.end());
  const std::string& first = shorter.front();
  for (const std::string& candidate : longer) {
    if (candidate.size() <= first.size() + 1) continue;
    size_t cut = candidate.size() - first.size();
    if (candidate.compare(cut, std::string::npos, first) != 0 || candidate[cut - 1] != '.')
      continue;
    std::string prefix = candidate.substr(0, cut);
    bool all = std::all_of(shorter.begin(), shorter.end(),
                           [&](const std::string& k) { return lookup.count(prefix + k) > 0; });
    if (all) return prefix;
  }
  return {};
}

// An entry for a parameter of a lazy layer that has not run: its shape must fit the layer,
// and the layer's weight entry (which gives the input width) must be there to materialize it.
void check_lazy_entry(const std::string& key, const Tensor& value,
                      const std::unordered_map<std::string, size_t>& by_key,
                      const NamedTensors& state,
                      const std::unordered_map<std::string, Module*>& module_at,
                      std::vector<std::string>& shape_errors,
                      std::vector<std::string>& entry_errors,
                      std::vector<std::pair<LazyModule*, Shape>>& materializations) {
  const size_t dot = key.rfind('.');
  const std::string owner = dot == std::string::npos ? "" : key.substr(0, dot);
  const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
  auto m = module_at.find(owner);
  auto* lazy = m == module_at.end() ? nullptr : dynamic_cast<LazyModule*>(m->second);
  if (!lazy) {
    entry_errors.push_back("\"" + key + "\" is an uninitialized parameter of a module that " +
                           "cannot take its shape from a state dict: run one forward pass " +
                           "(a dry run) or Module::build first");
    return;
  }
  if (std::string expected = lazy->check_loaded(name, value.sizes()); !expected.empty()) {
    shape_errors.push_back(kiln::detail::str_cat(
        "shape mismatch for \"", key, "\": the ", m->second->type_name(), " expects ", expected,
        ", the state dict has ", shape_str(value.sizes())));
    return;
  }
  const std::string weight_key = owner.empty() ? "weight" : owner + ".weight";
  auto w = by_key.find(weight_key);
  if (w == by_key.end()) {
    entry_errors.push_back("\"" + key + "\" belongs to a lazy layer that has not run, and the " +
                           "state dict has no \"" + weight_key + "\" to give it its input width");
    return;
  }
  const Tensor& weight = state[w->second].second;
  if (name == "weight" && weight.defined())
    materializations.emplace_back(lazy, Shape(weight.sizes()));
}

}  // namespace

NamedTensors Module::state_dict() const {
  NamedTensors out = state_entries(*this);
  for (auto& [path, t] : out) t = t.detach();
  return out;
}

LoadStateDictResult Module::load_state_dict(const NamedTensors& state, const LoadStateDictOptions& options) {
  if (!options.rename) return load_state_dict(state, options.strict);
  NamedTensors renamed;
  std::unordered_map<std::string, std::string> source_of;  // new key -> the key it came from
  for (const auto& [key, t] : state) {
    std::string name = options.rename(key);
    if (name.empty()) continue;
    auto [it, inserted] = source_of.emplace(name, key);
    KILN_CHECK(inserted, "[Module::load_state_dict] rename maps both \"", it->second, "\" and \"", key, "\" to \"",
               name, "\". Fix: map each key to its own name, or drop one (return \"\").");
    renamed.emplace_back(std::move(name), t);
  }
  return load_state_dict(renamed, options.strict);
}

LoadStateDictResult Module::load_state_dict(const NamedTensors& state, bool strict) {
  using kiln::detail::str_cat;
  NamedTensors own = state_entries(*this);

  // ---- match and validate everything before any tensor changes ----
  std::unordered_map<std::string, size_t> by_key;  // state key -> entry
  std::vector<std::string> shape_errors;           // errors whatever `strict` says
  std::vector<std::string> entry_errors;           // duplicate keys, tensors without data
  for (size_t i = 0; i < state.size(); ++i) {
    auto [it, inserted] = by_key.emplace(state[i].first, i);
    if (!inserted)
      entry_errors.push_back(str_cat("duplicate key \"", state[i].first,
                                     "\" in the state dict (entries ", it->second, " and ", i,
                                     ")"));
  }
  LoadStateDictResult result;
  // Lazy layers not yet run materialize from the state dict's shapes (as PyTorch does).
  std::unordered_map<std::string, Module*> module_at;
  for (const auto& [path, m] : named_modules("", /*remove_duplicate=*/false))
    module_at.emplace(path, m);
  std::vector<std::pair<LazyModule*, Shape>> materializations;
  std::unordered_map<std::string, size_t> own_keys;
  std::vector<std::pair<Tensor, const Tensor*>> copies;  // (destination, value)
  for (size_t i = 0; i < own.size(); ++i) {
    const auto& [key, dst] = own[i];
    own_keys.emplace(key, i);
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      result.missing_keys.push_back(key);
      continue;
    }
    const Tensor& value = state[it->second].second;
    if (is_uninitialized(dst) && value.defined() && !value.is_symbolic()) {
      check_lazy_entry(key, value, by_key, state, module_at, shape_errors, entry_errors,
                       materializations);
      copies.emplace_back(dst, &value);
      continue;
    }
    if (!value.defined())
      entry_errors.push_back("\"" + key + "\" is an undefined tensor in the state dict");
    else if (value.is_symbolic())
      entry_errors.push_back("\"" + key +
                             "\" in the state dict is symbolic (a value inside a trace) and has "
                             "no data");
    else if (Shape(value.sizes()) != Shape(dst.sizes()))
      shape_errors.push_back(str_cat("shape mismatch for \"", key, "\": the model has ",
                                     shape_str(dst.sizes()), ", the state dict ",
                                     shape_str(value.sizes())));
    else
      copies.emplace_back(dst, &value);
  }
  std::unordered_set<std::string> listed;
  for (const auto& [key, value] : state)
    if (!own_keys.count(key) && listed.insert(key).second) result.unexpected_keys.push_back(key);

  bool key_errors = strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
  if (!key_errors && shape_errors.empty() && entry_errors.empty()) {
    // ---- copy in place: every handle stays valid, versions are bumped by the copy ----
    NoGradGuard no_grad;
    for (auto& [layer, weight_shape] : materializations) layer->materialize_for_load(weight_shape);
    for (auto& [dst, value] : copies) dst.copy_(*value);  // converts to dst's dtype
    return result;
  }

  std::string msg = str_cat("[load_state_dict] the state dict does not match ", type_name(),
                            "; nothing was loaded.");
  if (key_errors && !result.missing_keys.empty())
    msg += str_cat("\n  ", result.missing_keys.size(),
                   " missing key(s) (in the model, absent from the state dict): ",
                   quoted_list(result.missing_keys));
  if (key_errors && !result.unexpected_keys.empty())
    msg += str_cat("\n  ", result.unexpected_keys.size(),
                   " unexpected key(s) (in the state dict, absent from the model): ",
                   quoted_list(result.unexpected_keys));
  for (const std::string& e : shape_errors) msg += "\n  " + e;
  for (const std::string& e : entry_errors) msg += "\n  " + e;

  std::vector<std::string> fixes;
  if (key_errors) {
    std::string outer = common_prefix(result.missing_keys, result.unexpected_keys);
    std::string inner = common_prefix(result.unexpected_keys, result.missing_keys);
    // A missing path whose tensor is tied to a path being loaded gets its value anyway.
    std::string tied;
    for (const std::string& m : result.missing_keys)
      for (const auto& [k, other] : own)
        if (tied.empty() && k != m && other.is_same(own[own_keys.at(m)].second) && by_key.count(k))
          tied = "\"" + m + "\" is tied to \"" + k + "\" (one tensor), which the state dict has";
    if (!outer.empty())
      fixes.push_back("this model's keys appear in the state dict under the prefix \"" + outer +
                      "\" (it was saved from a model holding this one as \"" +
                      outer.substr(0, outer.size() - 1) + "\"): keep the entries starting with \"" +
                      outer + "\", with that prefix removed, and load those");
    else if (!inner.empty())
      fixes.push_back("the state dict's keys are this model's without the prefix \"" + inner +
                      "\" (it was saved from that submodule): load it into the submodule \"" +
                      inner.substr(0, inner.size() - 1) + "\" instead");
    else if (!tied.empty())
      fixes.push_back(tied + ": load with strict=false to accept it");
    else
      fixes.push_back(
          "load a state dict saved from this architecture (same module names and registration "
          "order), or pass strict=false to load the matching entries and get the missing and "
          "unexpected keys back (e.g. when fine-tuning with a new head)");
  }
  if (!shape_errors.empty())
    fixes.push_back(
        "a shape mismatch means the state dict comes from another configuration (layer "
        "sizes): build the model with the checkpoint's sizes, or drop those entries and load "
        "with strict=false");
  if (!entry_errors.empty())
    fixes.push_back("give every key one entry, holding a tensor with data");
  std::string fix = "\nFix: " + fixes[0];
  for (size_t i = 1; i < fixes.size(); ++i) fix += "; and " + fixes[i];
  KILN_FAIL(msg, fix, ".");
}

}  // namespace kiln::nn
