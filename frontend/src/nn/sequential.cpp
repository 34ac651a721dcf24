// nn::Sequential: chaining, appending, indexing and slicing.
#include "kiln/nn/sequential.h"

#include <algorithm>

namespace kiln::nn {

namespace detail {
// Resolves a possibly negative index into [0, size), or fails naming the container.
size_t child_index(int64_t index, size_t size, const char* where) {
  int64_t n = static_cast<int64_t>(size);
  int64_t i = index < 0 ? index + n : index;
  KILN_CHECK(i >= 0 && i < n, "[", where, "] index ", index, " is out of range for ", n, " element",
             n == 1 ? "" : "s", ". Fix: use an index in [", -n, ", ", n, ").");
  return static_cast<size_t>(i);
}
}  // namespace detail

Sequential::Sequential(const NamedModules& named) {
  for (const auto& [name, module] : named) push_back(name, module);
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& [name, child] : named_children()) x = (*child)(x);
  return x;
}

Sequential& Sequential::push_back(std::shared_ptr<Module> module) {
  return push_back(std::to_string(size()), std::move(module));
}

Sequential& Sequential::push_back(const std::string& name, std::shared_ptr<Module> module) {
  register_module_impl(name, std::move(module));
  return *this;
}

Sequential& Sequential::extend(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
  return *this;
}

Sequential& Sequential::extend(const Sequential& other) {
  KILN_CHECK(&other != this, "[Sequential::extend] cannot extend a Sequential with itself. Fix: extend with "
             "seq.slice(0, seq.size()) to repeat its children.");
  return extend(other.children());
}

ModulePtr<Module> Sequential::operator[](int64_t index) const {
  return named_children()[detail::child_index(index, size(), "Sequential[]")].second;
}

std::shared_ptr<Sequential> Sequential::slice(int64_t start, int64_t end) const {
  int64_t n = static_cast<int64_t>(size());
  auto clamp = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
  auto out = std::make_shared<Sequential>();
  for (int64_t i = clamp(start); i < clamp(end); ++i) {
    const auto& [name, child] = named_children()[static_cast<size_t>(i)];
    out->push_back(name, child);
  }
  return out;
}

}  // namespace kiln::nn
