// nn::ModuleDict: insertion-ordered children by name.
#include "kiln/nn/module_dict.h"

namespace kiln::nn {

namespace {
std::string key_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out.empty() ? "(none)" : out;
}
}  // namespace

Tensor ModuleDict::forward(const Tensor&) {
  KILN_FAIL(
      "[ModuleDict] a ModuleDict has no forward. Fix: call its modules by key in the "
      "owner's forward, e.g. `(*layers)[\"fc\"](x)` or `layers->at<Linear>(\"fc\")(x)`.");
}

ModuleDict& ModuleDict::insert(const std::string& key, std::shared_ptr<Module> module) {
  if (contains(key)) {
    KILN_CHECK(module != nullptr, "[ModuleDict::insert] the module for key '", key,
               "' is null. Fix: pass a constructed module.");
    for (auto& entry : mutable_children())
      if (entry.first == key) entry.second = std::move(module);
    return *this;
  }
  register_module_impl(key, std::move(module));
  return *this;
}

ModuleDict& ModuleDict::update(const NamedModules& named) {
  for (const auto& [key, module] : named) insert(key, module);
  return *this;
}

std::shared_ptr<Module> ModuleDict::pop(const std::string& key) {
  auto module = (*this)[key];
  std::erase_if(mutable_children(), [&](const auto& e) { return e.first == key; });
  return module;
}

void ModuleDict::clear() {
  mutable_children().clear();
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, m] : named_children()) out.push_back(key);
  return out;
}

ModulePtr<Module> ModuleDict::operator[](const std::string& key) const {
  auto module = find_child(key);
  KILN_CHECK(module != nullptr, "[ModuleDict] no module under key '", key,
             "'; the keys are: ", key_list(keys()), ". Fix: use one of them, or insert it first.");
  return module;
}

}  // namespace kiln::nn
