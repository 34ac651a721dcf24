// kiln::nn::audit: one forward and backward that compares what the model computes with what
// its module tree owns, and names every disagreement with its module path and the fix:
//
//   - a tensor that received a gradient but is not a registered parameter (a raw tensor with
//     requires_grad kept as a member: no optimizer built from parameters() trains it);
//   - a tensor forward used that is not a parameter, buffer or input (a plain tensor member:
//     to() will not move it, state_dict() will not save it);
//   - a trainable parameter that received no gradient (unused in forward, or detached);
//   - a tensor registered at two paths (register_parameter("w2", w1)); modules shared at
//     two paths (tied weights) are listed as notes, since that sharing is deliberate.
//
//   auto report = kiln::nn::audit(model, x);            // backward from the output's sum
//   auto report = kiln::nn::audit(model, loss_fn, x, y);  // backward from loss_fn(forward)
//   if (!report.ok()) std::cout << report;
//
// How: while forward runs, an op recorder sits in dispatch and looks at every op input:
// registered parameters and buffers, forward inputs and outputs of earlier ops of the same
// forward (constants made per call, such as zeros) are expected; anything else is a tensor
// the forward reached from outside the tree. A tensor created per call without an op
// (Tensor::from_vector) dies with the call; only tensors still alive after it are reported.
//
// The audit has no side effects: every .grad it touches (parameters, inputs, unregistered
// leaves), buffer values (BatchNorm running statistics), training flags, the grad mode and
// the default generator's position are put back as they were, also when forward throws
// (audit then rethrows). Parameter values are not copied: forward must not write them.
//
// Limits: tensors passed inside argument types other than Tensor, std::vector<Tensor>,
// std::pair and std::tuple are not recognized as inputs. In-place writes (BatchNorm's running
// statistics in training mode) are observed like any op: the tensor written counts as used.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln {
// Dispatch's interceptor seam (kiln/dispatch.h) is internal: this header only holds a pointer.
class DispatchInterceptor;
}  // namespace kiln

namespace kiln::nn {

enum class AuditSeverity : uint8_t {
  Info,     // worth knowing, not a problem (tied weights through a shared module)
  Warning,  // very likely a bug
  Error,    // certainly a bug: training silently differs from what the code says
};
const char* audit_severity_name(AuditSeverity severity);  // "note", "warning", "error"

enum class AuditCheck : uint8_t {
  GradientOnUnregistered,  // a leaf outside the tree received a gradient
  UnregisteredTensor,      // forward used a tensor that is no parameter, buffer or input
  NoGradient,              // a trainable parameter received no gradient
  DuplicateRegistration,   // one tensor registered at two paths
  SharedModule,            // one module registered at two paths (tied weights)
};

struct AuditFinding {
  AuditSeverity severity = AuditSeverity::Info;
  AuditCheck check = AuditCheck::UnregisteredTensor;
  std::string module_path;  // innermost module involved, dotted; "" is the root
  std::string module_type;  // its type_name(); "" when the module is not known
  std::string tensor;       // "float32 [256]", or "fc2.bias (float32 [10])" when registered
  std::string op;           // the op that used the tensor; "" when none did
  // The full line: "blocks.0 (Block): a float32 [256] tensor used by add is not ... Fix: ...".
  std::string message;
};

struct AuditReport {
  std::string model_type;
  int64_t ops = 0;                   // op calls recorded during forward
  int64_t trainable_parameters = 0;  // parameters with requires_grad, each tensor once
  int64_t parameters_with_grad = 0;  // of those, how many received a gradient
  std::vector<AuditFinding> findings;

  // True when no finding is a warning or an error (notes are fine).
  bool ok() const;
  // The findings of one check.
  std::vector<AuditFinding> of(AuditCheck check) const;
  // A header line, then one line per finding prefixed with its severity.
  std::string to_string() const;
};

std::ostream& operator<<(std::ostream& os, const AuditReport& report);

namespace detail {

// The state of one audit (the op recorder and what it saw); defined in audit.cpp.
class AuditState;

// Installs the audit's op recorder for the duration of the model's forward (not the loss).
class AuditForwardScope {
 public:
  explicit AuditForwardScope(AuditState& state);
  ~AuditForwardScope();
  AuditForwardScope(const AuditForwardScope&) = delete;
  AuditForwardScope& operator=(const AuditForwardScope&) = delete;

 private:
  AuditState& state_;
  DispatchInterceptor* previous_ = nullptr;
  bool installed_ = false;
};

// One forward (inside an AuditForwardScope) and the loss to differentiate.
using AuditStep = std::function<Tensor(AuditState& state)>;

// Snapshots the model, runs `step`, backward and the checks, and restores the model.
AuditReport run_audit(Module& model, std::vector<Tensor> inputs, const AuditStep& step);

// The default loss: the sum of every floating-point output's sum; an error names the model
// when forward returned none.
Tensor audit_default_loss(const std::vector<Tensor>& outputs, const Module& model);
// Checks a user loss: defined, one element, floating point.
Tensor audit_check_loss(const Tensor& loss, const Module& model);

template <class... Args>
std::vector<Tensor> audit_inputs(const Args&... inputs) {
  std::vector<Tensor> out;
  (collect_tensors(out, inputs), ...);
  return out;
}

}  // namespace detail

// Audits `model` on `inputs` (the arguments of its forward, called with kiln::nn::call), with
// backward from the sum of every floating-point tensor forward returns (a Tensor, or a
// std::vector / std::pair / std::tuple of them). Call it outside any module's forward.
template <class M, class... Args>
requires requires(M& m, Args&... a) {
  m.forward(a...);
}
AuditReport audit(M& model, Args&&... inputs) {
  static_assert(std::is_base_of_v<Module, M>, "kiln::nn::audit: the model must be a Module");
  return detail::run_audit(model, detail::audit_inputs(inputs...), [&](detail::AuditState& state) {
    std::vector<Tensor> outputs;
    {
      detail::AuditForwardScope scope(state);
      if constexpr (std::is_void_v<decltype(model.forward(inputs...))>) {
        call(model, inputs...);
      } else {
        auto out = call(model, inputs...);
        detail::collect_tensors(outputs, out);
      }
    }
    return detail::audit_default_loss(outputs, model);
  });
}

// Same, with backward from loss_fn(forward's result), which must be a one-element tensor
// (e.g. [&](const Tensor& out) { return kiln::nn::functional::cross_entropy(out, target); }).
// Ops of the loss function are not scanned: its tensors (targets) are not the model's.
template <class M, class LossFn, class... Args>
requires requires(M& m, LossFn& loss_fn, Args&... a) {
  { loss_fn(m.forward(a...)) } -> std::convertible_to<Tensor>;
}
AuditReport audit(M& model, LossFn&& loss_fn, Args&&... inputs) {
  static_assert(std::is_base_of_v<Module, M>, "kiln::nn::audit: the model must be a Module");
  return detail::run_audit(model, detail::audit_inputs(inputs...), [&](detail::AuditState& state) {
    Tensor loss;
    {
      std::optional<detail::AuditForwardScope> scope(std::in_place, state);
      auto out = call(model, inputs...);
      scope.reset();
      loss = loss_fn(out);
    }
    return detail::audit_check_loss(loss, model);
  });
}

}  // namespace kiln::nn
