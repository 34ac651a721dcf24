// nn::Sequential: children called in order, each output feeding the next. Children are named
// "0", "1", ... (or given names), so state paths read `features.0.weight`.
//
//   auto mlp = std::make_shared<kiln::nn::Sequential>(
//       std::make_shared<kiln::nn::Linear>(784, 256), std::make_shared<kiln::nn::ReLU>());
#pragma once

#include <memory>
#include <string>

#include "kiln/nn/module.h"

namespace kiln::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  template <class... Ms>
  explicit Sequential(std::shared_ptr<Ms>... modules) {
    (push_back(detail::remembered(std::move(modules))), ...);
  }
  // Named children in this order (PyTorch's Sequential(OrderedDict(...))).
  explicit Sequential(const NamedModules& named);

  // Runs every child on the previous child's output.
  Tensor forward(const Tensor& input) override;

  // Appends `module` named by its position ("3").
  Sequential& push_back(std::shared_ptr<Module> module);
  Sequential& push_back(const std::string& name, std::shared_ptr<Module> module);
  // The same for a module of a known class (which clone() then copies).
  template <class M>
  Sequential& push_back(std::shared_ptr<M> module) {
    return push_back(detail::remembered(std::move(module)));
  }
  template <class M>
  Sequential& push_back(const std::string& name, std::shared_ptr<M> module) {
    return push_back(name, detail::remembered(std::move(module)));
  }
  // Appends each module (named by position), or every child of `other` (shared, not copied).
  Sequential& extend(const std::vector<std::shared_ptr<Module>>& modules);
  Sequential& extend(const Sequential& other);

  size_t size() const { return named_children().size(); }
  bool empty() const { return named_children().empty(); }
  // The child at `index` (negative counts from the end).
  ModulePtr<Module> operator[](int64_t index) const;
  template <class M>
  ModulePtr<M> at(int64_t index) const {
    return detail::cast_child<M>((*this)[index], "Sequential::at");
  }
  // A Sequential holding (sharing, not copying) children [start, end) under their names,
  // like PyTorch's seq[start:end]. Negative bounds count from the end; bounds are clamped.
  std::shared_ptr<Sequential> slice(int64_t start, int64_t end) const;

  detail::ChildIterator begin() const { return detail::ChildIterator(named_children().begin()); }
  detail::ChildIterator end() const { return detail::ChildIterator(named_children().end()); }
};

}  // namespace kiln::nn
