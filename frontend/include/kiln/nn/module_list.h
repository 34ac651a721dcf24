// nn::ModuleList: an indexable list of registered children ("0", "1", ...). Use it instead of
// a std::vector of layers: a std::vector hides them from the tree (and kiln then throws when
// forward calls one). It has no forward; iterate it in the owner's forward.
//
//   for (auto& block : *blocks) x = (*block)(x);
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

class ModuleList : public Module {
 public:
  ModuleList() = default;
  explicit ModuleList(const std::vector<std::shared_ptr<Module>>& modules) { extend(modules); }
  template <class... Ms>
  explicit ModuleList(std::shared_ptr<Ms>... modules) {
    (push_back(detail::remembered(std::move(modules))), ...);
  }

  // Fails with the iteration idiom: a ModuleList does not know how its children connect.
  Tensor forward(const Tensor& input) override;

  ModuleList& push_back(std::shared_ptr<Module> module);  // PyTorch's append
  ModuleList& extend(const std::vector<std::shared_ptr<Module>>& modules);
  ModuleList& extend(const ModuleList& other);
  // Inserts before position `index` (negative counts from the end) and renumbers the names.
  ModuleList& insert(int64_t index, std::shared_ptr<Module> module);
  // The same for a module of a known class (which clone() then copies).
  template <class M>
  ModuleList& push_back(std::shared_ptr<M> module) {
    return push_back(detail::remembered(std::move(module)));
  }
  template <class M>
  ModuleList& insert(int64_t index, std::shared_ptr<M> module) {
    return insert(index, detail::remembered(std::move(module)));
  }

  size_t size() const { return named_children().size(); }
  bool empty() const { return named_children().empty(); }
  ModulePtr<Module> operator[](int64_t index) const;
  template <class M>
  ModulePtr<M> at(int64_t index) const {
    return detail::cast_child<M>((*this)[index], "ModuleList::at");
  }

  detail::ChildIterator begin() const { return detail::ChildIterator(named_children().begin()); }
  detail::ChildIterator end() const { return detail::ChildIterator(named_children().end()); }
};

}  // namespace kiln::nn
