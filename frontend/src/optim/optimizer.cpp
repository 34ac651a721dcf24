// Optimizer base: zero_grad, parameter checks, per-parameter state and the state dict.
#include "kiln/optim/optimizer.h"

#include <algorithm>
#include <set>

#include "kiln/autograd.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln::optim {

namespace {

std::string group_key(size_t g, const std::string& field) {
  return "param_groups." + std::to_string(g) + "." + field;
}

std::string state_key(size_t i, const std::string& field) {
  return "state." + std::to_string(i) + "." + field;
}

// Splits "a.<n>.rest" into (n, rest); false when the key does not have that form.
bool split_indexed(const std::string& key, const std::string& prefix, size_t& index,
                   std::string& rest) {
  if (key.rfind(prefix, 0) != 0) return false;
  size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return false;
  std::string num = key.substr(prefix.size(), dot - prefix.size());
  if (num.find_first_not_of("0123456789") != std::string::npos) return false;
  index = std::stoul(num);
  rest = key.substr(dot + 1);
  return true;
}

double read_scalar(const std::string& opt, const std::string& key, const Tensor& t) {
  KILN_CHECK(t.defined() && t.numel() == 1, "[", opt, ".load_state_dict] expected \"", key,
             "\" to hold one number, got ", t.defined() ? t.type_str() : "an undefined tensor",
             ". Fix: load a state dict written by ", opt, "::state_dict().");
  return t.item<double>();
}

}  // namespace

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (size_t g = 0; g < num_param_groups(); ++g) {
    for (const Tensor& p : group_params(g)) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else if (grad.grad_fn()) {
        // A grad built with create_graph belongs to a graph: detach before reuse.
        p.set_grad(zeros_like(grad));
      } else {
        grad.zero_();
      }
    }
  }
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (size_t g = 0; g < num_param_groups(); ++g)
    for (const Tensor& p : group_params(g)) out.push_back(p);
  return out;
}

const ParamState* Optimizer::state(const Tensor& param) const {
  for (size_t g = 0; g < state_.size(); ++g) {
    const auto& params = group_params(g);
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].is_same(param)) return state_[g][i].empty() ? nullptr : &state_[g][i];
  }
  return nullptr;
}

void Optimizer::check_new_params(const std::vector<Tensor>& params) const {
  std::set<const TensorImpl*> seen;
  for (size_t g = 0; g < num_param_groups(); ++g)
    for (const Tensor& p : group_params(g)) seen.insert(p.impl());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    KILN_CHECK(p.defined(), "[", name_, "] parameter ", i,
               " of the new group is an undefined "
               "tensor. Fix: pass only registered, initialized parameters.");
    KILN_CHECK(
        p.is_floating_point(), "[", name_,
        "] can only optimize floating-point tensors, "
        "but parameter ",
        i, " of the new group is ", p.type_str(),
        ". Fix: leave integer "
        "tensors (indices, counters) out of the parameter list, or register them as buffers.");
    KILN_CHECK(seen.insert(p.impl()).second, "[", name_, "] parameter ", i, " (", p.type_str(),
               ") appears more than once across the parameter groups; each parameter may be "
               "optimized by one group only. Fix: remove the duplicate (tied weights are listed "
               "once by model.parameters()).");
  }
}

double Optimizer::initial_lr(size_t group) {
  if (initial_lrs_.size() < num_param_groups()) initial_lrs_.resize(num_param_groups());
  std::optional<double>& initial = initial_lrs_.at(group);
  if (!initial) initial = lr(group);
  return *initial;
}

ParamState& Optimizer::state_at(size_t group, size_t index) {
  ParamState& s = state_[group][index];
  const Device device = group_params(group)[index].device();
  for (auto& [key, t] : s.buffers)
    if (t.device() != device) t = t.to(device);
  return s;
}

Tensor& Optimizer::buffer(ParamState& s, const std::string& key, const Tensor& param) {
  auto it = s.buffers.find(key);
  if (it == s.buffers.end()) it = s.buffers.emplace(key, zeros_like(param)).first;
  return it->second;
}

void Optimizer::check_grad(const Tensor& param, const Tensor& grad) const {
  KILN_CHECK(Shape(grad.sizes()) == Shape(param.sizes()) && grad.is_floating_point(), "[", name_,
             ".step] a parameter of type ", param.type_str(), " has a gradient of type ",
             grad.type_str(),
             "; they must have the same shape and a floating dtype. Fix: do not "
             "assign .grad by hand with another shape (set_grad), or call zero_grad() after "
             "reshaping parameters.");
}

bool Optimizer::keeps_buffer(const std::string& name) const {
  const std::vector<std::string> names = buffer_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool Optimizer::keeps_scalar(const std::string& name) const {
  const std::vector<std::string> names = scalar_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

Shape Optimizer::buffer_shape(const std::string& /*name*/, const Tensor& param) const {
  return Shape(param.sizes());
}

OptimizerStateDict Optimizer::state_dict() const {
  NoGradGuard no_grad;
  OptimizerStateDict out;
  size_t flat = 0;
  for (size_t g = 0; g < num_param_groups(); ++g) {
    size_t n = group_params(g).size();
    std::vector<int64_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(flat + i);
    out[group_key(g, "params")] = Tensor::from_vector(ids, {static_cast<int64_t>(n)});
    for (const auto& [key, value] : group_options(g))
      out[group_key(g, key)] = Tensor::scalar(value, kFloat64);
    for (size_t i = 0; i < n; ++i, ++flat) {
      const ParamState& s = state_[g][i];
      if (s.empty()) continue;
      out[state_key(flat, "step")] = Tensor::scalar(s.step, kInt64);
      for (const auto& [key, t] : s.buffers) out[state_key(flat, key)] = t.clone();
      for (const auto& [key, value] : s.scalars) out[state_key(flat, key)] = Tensor::scalar(value, kFloat64);
    }
  }
  return out;
}

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
  NoGradGuard no_grad;
  const std::string where = "[" + name_ + ".load_state_dict] ";
  const std::string fix =
      " Fix: load a state dict saved by the same optimizer type, built over "
      "the same parameter groups in the same order.";
  // Flat index -> (group, index) and the parameter.
  std::vector<std::pair<size_t, size_t>> slot;
  for (size_t g = 0; g < num_param_groups(); ++g)
    for (size_t i = 0; i < group_params(g).size(); ++i) slot.emplace_back(g, i);

  std::vector<std::map<std::string, double>> options(num_param_groups());
  std::vector<std::vector<ParamState>> next(num_param_groups());
  for (size_t g = 0; g < num_param_groups(); ++g) next[g].resize(group_params(g).size());
  std::vector<bool> saw_params(num_param_groups(), false);

  for (const auto& [key, t] : sd) {
    size_t index = 0;
    std::string rest;
    if (split_indexed(key, "param_groups.", index, rest)) {
      KILN_CHECK(index < num_param_groups(), where, "the state has parameter group ", index,
                 " (key \"", key, "\") but this optimizer has ", num_param_groups(), " group(s).",
                 fix);
      if (rest == "params") {
        KILN_CHECK(t.defined() && t.dim() == 1 &&
                       t.size(0) == static_cast<int64_t>(group_params(index).size()),
                   where, "parameter group ", index, " has ", group_params(index).size(),
                   " parameter(s) here but ", (t.defined() && t.dim() == 1 ? t.size(0) : -1),
                   " in the loaded state (\"", key, "\").", fix);
        saw_params[index] = true;
      } else {
        options[index][rest] = read_scalar(name_, key, t);
      }
    } else if (split_indexed(key, "state.", index, rest)) {
      KILN_CHECK(index < slot.size(), where, "the state has an entry for parameter ", index,
                 " (key \"", key, "\") but this optimizer has ", slot.size(), " parameter(s).",
                 fix);
      auto [g, i] = slot[index];
      const Tensor& p = group_params(g)[i];
      ParamState& s = next[g][i];
      if (rest == "step") {
        s.step = static_cast<int64_t>(read_scalar(name_, key, t));
        continue;
      }
      if (keeps_scalar(rest)) {
        s.scalars[rest] = read_scalar(name_, key, t);
        continue;
      }
      KILN_CHECK(keeps_buffer(rest), where, "unexpected state \"", key, "\": ", name_,
                 " keeps no buffer named \"", rest, "\".", fix);
      const Shape shape = buffer_shape(rest, p);
      KILN_CHECK(t.defined() && Shape(t.sizes()) == shape, where, "\"", key, "\" has type ",
                 t.defined() ? t.type_str() : "undefined", " but ", name_, " keeps it as ", shape_str(shape),
                 " for parameter ", index, " (", p.type_str(), ").", fix);
      Tensor value = t.to(p.dtype());
      if (value.device() != p.device()) value = value.to(p.device());
      s.buffers[rest] = value.is_same(t) ? t.clone() : value.contiguous();
    } else {
      KILN_FAIL(where, "unexpected key \"", key,
                "\"; expected keys starting with "
                "\"param_groups.<g>.\" or \"state.<i>.\".",
                fix);
    }
  }
  for (size_t g = 0; g < num_param_groups(); ++g) {
    KILN_CHECK(saw_params[g], where, "missing key \"", group_key(g, "params"),
               "\": the state "
               "has fewer parameter groups than this optimizer (",
               num_param_groups(), ").", fix);
    std::set<std::string> expected;
    for (const auto& [key, value] : group_options(g)) {
      expected.insert(key);
      KILN_CHECK(options[g].count(key), where, "missing option \"", group_key(g, key), "\".", fix);
    }
    for (const auto& [key, value] : options[g])
      KILN_CHECK(expected.count(key), where, "unexpected option \"", group_key(g, key),
                 "\": ", name_, " has no option \"", key, "\".", fix);
  }
  set_group_options(options);  // validates every group before changing any
  state_ = std::move(next);
}

}  // namespace kiln::optim
