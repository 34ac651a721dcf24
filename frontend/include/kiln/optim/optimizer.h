// Optimizer: the base of kiln::optim. Holds parameter groups (each with its own options),
// per-parameter state, zero_grad, and the state dict that checkpoints save and load.
//
//   kiln::optim::SGD opt(params, {.lr = 0.1, .momentum = 0.9});
//   opt.add_param_group(head_params, {.lr = 0.01, .momentum = 0.9});
//   loss.backward(); opt.step(); opt.zero_grad();
//
// Parameters are Tensor handles shared with the model, so step() updates the model.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/tensor.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln::optim {

// A flat map of named tensors, ready for kiln::save. Keys:
//   "param_groups.<g>.params"   int64 [n]: the flat indices of group g's parameters
//   "param_groups.<g>.<option>" float64 0-d: each option of group g (bools as 0/1)
//   "state.<i>.step"            int64 0-d: steps taken by parameter i (flat index)
//   "state.<i>.<buffer>"        the buffer (exp_avg, momentum_buffer, ...), param-shaped
//   "state.<i>.<scalar>"        float64 0-d: a number kept per parameter (NAdam's mu_product)
// A flat index counts parameters across groups in order, as PyTorch does.
using OptimizerStateDict = std::map<std::string, Tensor>;

// What an optimizer remembers about one parameter between steps. Empty until the
// parameter first receives a gradient.
struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> buffers;
  std::map<std::string, double> scalars;  // kept on the host: read every step, never synced
  bool empty() const { return step == 0 && buffers.empty() && scalars.empty(); }
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a .grad (others are skipped) under NoGradGuard.
  virtual void step() = 0;
  // Clears the gradients: unset (the default, as PyTorch >= 2.0) or zero-filled.
  void zero_grad(bool set_to_none = true);

  virtual size_t num_param_groups() const = 0;
  virtual const std::vector<Tensor>& group_params(size_t group) const = 0;
  virtual double lr(size_t group) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;
  // The momentum a schedule may cycle (OneCycleLR): the Adam family's beta1, else an
  // algorithm's `momentum` option (SGD, RMSprop); nullopt when it has neither.
  virtual std::optional<double> momentum(size_t group) const = 0;
  virtual void set_momentum(size_t group, double momentum) = 0;
  // The lr group `group` had when the first scheduler was attached to this optimizer (as
  // PyTorch's group["initial_lr"]): every scheduler starts from it, even one built after
  // another scheduler changed the lr (SequentialLR's parts).
  double initial_lr(size_t group);
  // Every parameter, group by group.
  std::vector<Tensor> parameters() const;
  // The state of `param` (null when it has none yet or is not optimized here).
  const ParamState* state(const Tensor& param) const;
  const std::string& name() const { return name_; }

  // A snapshot (tensors are cloned) of the options of every group and the per-parameter
  // state; see OptimizerStateDict for the keys.
  OptimizerStateDict state_dict() const;
  // Replaces the options and state with `state`, which must come from an optimizer of the
  // same type built over the same groups (same sizes; parameter shapes must match). All
  // checks run before anything changes; a mismatch throws naming the key and the fix.
  void load_state_dict(const OptimizerStateDict& state);

 protected:
  explicit Optimizer(std::string name) : name_(std::move(name)) {}

  // Options of group g as (name, value) pairs, and the inverse (all-or-nothing, validated).
  virtual std::vector<std::pair<std::string, double>> group_options(size_t group) const = 0;
  virtual void set_group_options(const std::vector<std::map<std::string, double>>& groups) = 0;
  // The buffer names this algorithm may keep per parameter (for load-time checks).
  virtual std::vector<std::string> buffer_names() const = 0;
  // The per-parameter numbers it keeps (ParamState::scalars), likewise.
  virtual std::vector<std::string> scalar_names() const { return {}; }
  // Load-time checks: whether this algorithm keeps a buffer (or number) named `name`, by
  // default one of buffer_names() (scalar_names()), and the shape of its buffer for `param`,
  // by default the parameter's. LBFGS keeps a numbered history, flat over all parameters.
  virtual bool keeps_buffer(const std::string& name) const;
  virtual bool keeps_scalar(const std::string& name) const;
  virtual Shape buffer_shape(const std::string& name, const Tensor& param) const;

  // Throws unless every tensor is defined, floating point, and not already optimized.
  void check_new_params(const std::vector<Tensor>& params) const;
  // Starts state slots for a group of n parameters.
  void add_group_state(size_t n) { state_.emplace_back(n); }
  // The state of parameter `index` of `group`. Its buffers follow the parameter to its device
  // when the model moved since they were made (model.to(device) after some steps).
  ParamState& state_at(size_t group, size_t index);
  // The buffer `key` of `s`, created as zeros shaped like `param` on first use.
  static Tensor& buffer(ParamState& s, const std::string& key, const Tensor& param);
  // Throws unless grad matches param (shape, floating dtype).
  void check_grad(const Tensor& param, const Tensor& grad) const;

 private:
  std::string name_;
  std::vector<std::vector<ParamState>> state_;  // parallel to the parameter groups
  std::vector<std::optional<double>> initial_lrs_;  // by group, set by initial_lr()
};

// A group of parameters that share options.
template <class Options>
// A group's options are a complete struct: unlike PyTorch's dicts, unset fields take the
// struct's defaults, not the optimizer's constructor defaults. To change one field of
// those, copy them: `auto o = defaults; o.lr = 0.5; groups.push_back({params, o});`.
struct ParamGroup {
  std::vector<Tensor> params{};
  Options options{};
};

// Group storage for an algorithm whose options struct lists its fields once:
//   template <class V> void fields(V& v) { v("lr", lr); ... }   (double or bool fields)
//   void validate(const std::string& optimizer) const;           (throws on bad values)
template <class Options>
class OptimizerOf : public Optimizer {
 public:
  std::vector<ParamGroup<Options>>& param_groups() { return groups_; }
  const std::vector<ParamGroup<Options>>& param_groups() const { return groups_; }
  const Options& defaults() const { return defaults_; }

  // A new group with the constructor's options, or with its own.
  void add_param_group(std::vector<Tensor> params) {
    add_param_group(std::move(params), defaults_);
  }
  void add_param_group(std::vector<Tensor> params, Options options) {
    options.validate(name());
    check_new_params(params);
    groups_.push_back({std::move(params), options});
    add_group_state(groups_.back().params.size());
  }

  size_t num_param_groups() const override { return groups_.size(); }
  const std::vector<Tensor>& group_params(size_t group) const override {
    return groups_.at(group).params;
  }
  double lr(size_t group) const override { return groups_.at(group).options.lr; }
  void set_lr(size_t group, double lr) override { groups_.at(group).options.lr = lr; }
  std::optional<double> momentum(size_t group) const override {
    const Options& o = groups_.at(group).options;
    if constexpr (requires { o.betas.first; })
      return o.betas.first;
    else if constexpr (requires { o.momentum; })
      return o.momentum;
    else
      return std::nullopt;
  }
  void set_momentum(size_t group, double momentum) override {
    Options& o = groups_.at(group).options;
    if constexpr (requires { o.betas.first; })
      o.betas.first = momentum;
    else if constexpr (requires { o.momentum; })
      o.momentum = momentum;
    else
      KILN_FAIL("[", name(), "] has no momentum to set. Fix: turn cycle_momentum off for this "
                "optimizer.");
  }

 protected:
  OptimizerOf(std::string name, std::vector<ParamGroup<Options>> groups, Options defaults)
      : Optimizer(std::move(name)), defaults_(defaults) {
    defaults_.validate(this->name());
    KILN_CHECK(!groups.empty(), "[", this->name(),
               "] expected at least one parameter, got an "
               "empty parameter list. Fix: pass model.parameters() (after the model is built).");
    for (auto& g : groups) add_param_group(std::move(g.params), g.options);
  }
  OptimizerOf(std::string name, std::vector<Tensor> params, Options defaults)
      : OptimizerOf(std::move(name), one_group(std::move(params), defaults), defaults) {}

  std::vector<std::pair<std::string, double>> group_options(size_t group) const override {
    std::vector<std::pair<std::string, double>> out;
    Options o = groups_.at(group).options;
    auto visit = [&](const char* key, auto& value) {
      out.emplace_back(key, static_cast<double>(value));
    };
    o.fields(visit);
    return out;
  }
  void set_group_options(const std::vector<std::map<std::string, double>>& groups) override {
    std::vector<Options> next;
    for (size_t g = 0; g < groups.size(); ++g) {
      Options o = groups_.at(g).options;
      auto visit = [&](const char* key, auto& value) {
        using T = std::remove_reference_t<decltype(value)>;
        if constexpr (std::is_same_v<T, bool>)
          value = groups[g].at(key) != 0;
        else
          value = static_cast<T>(groups[g].at(key));
      };
      o.fields(visit);
      o.validate(name());
      next.push_back(o);
    }
    for (size_t g = 0; g < next.size(); ++g) groups_[g].options = next[g];
  }

  // The loop of a step(): under NoGradGuard, each group's options validated, then
  // `update(param, grad, state, options)` for every parameter that has a gradient (checked
  // against it), with the gradient negated when the options ask to maximize.
  template <class Update>
  void update_each(Update&& update) {
    NoGradGuard no_grad;
    for (size_t g = 0; g < groups_.size(); ++g) {
      const Options& o = groups_[g].options;
      o.validate(name());
      for (size_t i = 0; i < groups_[g].params.size(); ++i) {
        Tensor p = groups_[g].params[i];
        Tensor grad = p.grad();
        if (!grad.defined()) continue;
        check_grad(p, grad);
        if (o.maximize) grad = neg(grad);
        update(p, grad, state_at(g, i), o);
      }
    }
  }

  std::vector<ParamGroup<Options>> groups_;
  Options defaults_;

 private:
  static std::vector<ParamGroup<Options>> one_group(std::vector<Tensor> params, Options o) {
    if (params.empty()) return {};
    return {ParamGroup<Options>{std::move(params), o}};
  }
};

}  // namespace kiln::optim
