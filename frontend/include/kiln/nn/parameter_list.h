// nn::ParameterList and nn::ParameterDict: parameters registered by position ("0", "1", ...)
// or by name, for models whose number of tensors is only known at construction.
#pragma once

#include <string>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

class ParameterList : public Module {
 public:
  ParameterList() = default;
  explicit ParameterList(const std::vector<Tensor>& tensors) { extend(tensors); }

  // Registers `tensor` as parameter str(size()) (requires_grad set) and returns it.
  Tensor push_back(Tensor tensor, bool requires_grad = true);
  ParameterList& extend(const std::vector<Tensor>& tensors);

  size_t size() const { return named_parameters("", false, false).size(); }
  bool empty() const { return size() == 0; }
  // The parameter at `index` (negative counts from the end).
  Tensor operator[](int64_t index) const;
  std::vector<Tensor> values() const { return parameters(false); }

  std::string extra_repr() const override;
};

class ParameterDict : public Module {
 public:
  ParameterDict() = default;
  explicit ParameterDict(const NamedTensors& named);

  // Registers `tensor` under `key` (requires_grad set) and returns it. Keys are unique.
  Tensor insert(const std::string& key, Tensor tensor, bool requires_grad = true);
  // Removes the parameter under `key` and returns it; a missing key fails listing the keys.
  Tensor pop(const std::string& key);
  // Removes every parameter.
  void clear();
  // Inserts every (key, tensor), replacing the tensors of keys already there in place of
  // their old ones (PyTorch's update), in the given order for new keys.
  ParameterDict& update(const NamedTensors& named, bool requires_grad = true);

  bool contains(const std::string& key) const;
  size_t size() const { return named_parameters("", false, false).size(); }
  bool empty() const { return size() == 0; }
  std::vector<std::string> keys() const;
  // The parameter under `key`; a missing key fails listing the keys there are.
  Tensor operator[](const std::string& key) const;
  NamedTensors items() const { return named_parameters("", false, false); }

  std::string extra_repr() const override;
};

}  // namespace kiln::nn
