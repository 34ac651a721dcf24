// nn::ModuleDict: registered children looked up by name, kept in insertion order (as
// PyTorch's), so state paths read `layers.encoder.weight`. It has no forward.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  explicit ModuleDict(const NamedModules& named) { update(named); }

  Tensor forward(const Tensor& input) override;

  // Adds `module` under `key`, or replaces the module already there (keeping its position).
  ModuleDict& insert(const std::string& key, std::shared_ptr<Module> module);
  // The same for a module of a known class (which clone() then copies).
  template <class M>
  ModuleDict& insert(const std::string& key, std::shared_ptr<M> module) {
    return insert(key, detail::remembered(std::move(module)));
  }
  ModuleDict& update(const NamedModules& named);
  // Removes and returns the module under `key`.
  std::shared_ptr<Module> pop(const std::string& key);
  // Removes every module.
  void clear();

  bool contains(const std::string& key) const { return find_child(key) != nullptr; }
  size_t size() const { return named_children().size(); }
  bool empty() const { return named_children().empty(); }
  std::vector<std::string> keys() const;
  std::vector<std::shared_ptr<Module>> values() const { return children(); }
  // The module under `key`; a missing key fails listing the keys there are.
  ModulePtr<Module> operator[](const std::string& key) const;
  template <class M>
  ModulePtr<M> at(const std::string& key) const {
    return detail::cast_child<M>((*this)[key], "ModuleDict::at");
  }

  // (key, module) pairs in insertion order.
  NamedModules::const_iterator begin() const { return named_children().begin(); }
  NamedModules::const_iterator end() const { return named_children().end(); }
};

}  // namespace kiln::nn
