// nn::ParameterList and nn::ParameterDict.
#include "kiln/nn/parameter_list.h"

#include <algorithm>
#include <sstream>

namespace kiln::nn {

namespace detail {
size_t child_index(int64_t index, size_t size, const char* where);
}

namespace {
// "Parameter containing: [float32 of size 3x4]", PyTorch's summary of a parameter.
std::string describe_parameter(const Tensor& t) {
  std::ostringstream os;
  os << "Parameter containing: [" << t.dtype() << " of size ";
  for (int64_t d = 0; d < t.dim(); ++d) os << (d ? "x" : "") << t.size(d);
  os << "]";
  return os.str();
}

std::string parameter_lines(const NamedTensors& named) {
  std::string out;
  for (const auto& [name, t] : named)
    out += (out.empty() ? "" : "\n") + ("(" + name + "): ") + describe_parameter(t);
  return out;
}
}  // namespace

Tensor ParameterList::push_back(Tensor tensor, bool requires_grad) {
  KILN_CHECK(tensor.defined(),
             "[ParameterList::push_back] the tensor is undefined. Fix: pass "
             "a defined tensor.");
  return register_parameter(std::to_string(size()), std::move(tensor), requires_grad);
}

ParameterList& ParameterList::extend(const std::vector<Tensor>& tensors) {
  for (const auto& t : tensors) push_back(t);
  return *this;
}

Tensor ParameterList::operator[](int64_t index) const {
  size_t i = detail::child_index(index, size(), "ParameterList[]");
  return *const_cast<ParameterList*>(this)->find_parameter(std::to_string(i));
}

std::string ParameterList::extra_repr() const {
  return parameter_lines(named_parameters("", false, false));
}

ParameterDict::ParameterDict(const NamedTensors& named) {
  for (const auto& [key, t] : named) insert(key, t);
}

Tensor ParameterDict::insert(const std::string& key, Tensor tensor, bool requires_grad) {
  KILN_CHECK(tensor.defined(), "[ParameterDict::insert] the tensor for key '", key,
             "' is undefined. Fix: pass a defined tensor.");
  return register_parameter(key, std::move(tensor), requires_grad);
}

Tensor ParameterDict::pop(const std::string& key) {
  (void)(*this)[key];  // a missing key fails naming the keys there are
  return remove_parameter(key);
}

void ParameterDict::clear() {
  for (const std::string& key : keys()) remove_parameter(key);
}

ParameterDict& ParameterDict::update(const NamedTensors& named, bool requires_grad) {
  // Rebuilt in order, so a replaced key keeps its place and new keys follow.
  std::vector<std::pair<std::string, std::pair<Tensor, bool>>> next;
  for (const auto& [key, t] : items()) next.push_back({key, {t, t.requires_grad()}});
  for (const auto& [key, t] : named) {
    KILN_CHECK(t.defined(), "[ParameterDict::update] the tensor for key '", key, "' is undefined. Fix: pass a "
               "defined tensor.");
    auto it = std::find_if(next.begin(), next.end(), [&](const auto& e) { return e.first == key; });
    if (it != next.end())
      it->second = {t, requires_grad};
    else
      next.push_back({key, {t, requires_grad}});
  }
  clear();
  for (const auto& [key, entry] : next) insert(key, entry.first, entry.second);
  return *this;
}

bool ParameterDict::contains(const std::string& key) const {
  return const_cast<ParameterDict*>(this)->find_parameter(key) != nullptr;
}

std::vector<std::string> ParameterDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, t] : items()) out.push_back(key);
  return out;
}

Tensor ParameterDict::operator[](const std::string& key) const {
  Tensor* t = const_cast<ParameterDict*>(this)->find_parameter(key);
  if (t == nullptr) {
    std::string list;
    for (const auto& k : keys()) list += (list.empty() ? "'" : ", '") + k + "'";
    KILN_FAIL("[ParameterDict] no parameter under key '", key,
              "'; the keys are: ", list.empty() ? "(none)" : list,
              ". Fix: use one of them, or insert it first.");
  }
  return *t;
}

std::string ParameterDict::extra_repr() const {
  return parameter_lines(items());
}

}  // namespace kiln::nn
