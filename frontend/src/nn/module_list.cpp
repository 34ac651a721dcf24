// nn::ModuleList: appending, inserting (with renumbering) and indexing.
#include "kiln/nn/module_list.h"

#include <algorithm>

namespace kiln::nn {

namespace detail {
size_t child_index(int64_t index, size_t size, const char* where);
}

Tensor ModuleList::forward(const Tensor&) {
  KILN_FAIL(
      "[ModuleList] a ModuleList has no forward: it does not know how its children "
      "connect. Fix: iterate it in the owner's forward, e.g. `for (auto& layer : *layers) "
      "x = (*layer)(x);`, or use a Sequential to chain them.");
}

ModuleList& ModuleList::push_back(std::shared_ptr<Module> module) {
  register_module_impl(std::to_string(size()), std::move(module));
  return *this;
}

ModuleList& ModuleList::extend(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
  return *this;
}

ModuleList& ModuleList::extend(const ModuleList& other) {
  std::vector<std::shared_ptr<Module>> copy(other.begin(), other.end());  // other may be *this
  return extend(copy);
}

ModuleList& ModuleList::insert(int64_t index, std::shared_ptr<Module> module) {
  int64_t n = static_cast<int64_t>(size());
  // Like Python's list.insert: positions past either end clamp to it.
  int64_t at = index < 0 ? std::max<int64_t>(index + n, 0) : std::min(index, n);
  push_back(std::move(module));  // validates the module (non-null, not this)
  NamedModules& kids = mutable_children();
  auto added = std::move(kids.back());
  kids.pop_back();
  kids.insert(kids.begin() + at, std::move(added));
  for (size_t i = 0; i < kids.size(); ++i) kids[i].first = std::to_string(i);
  return *this;
}

ModulePtr<Module> ModuleList::operator[](int64_t index) const {
  return named_children()[detail::child_index(index, size(), "ModuleList[]")].second;
}

}  // namespace kiln::nn
