// Gradient clipping: per-gradient norms combined on the host, then one in-place scale.
#include "kiln/nn/utils.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "kiln/autograd.h"
#include "kiln/nn/module.h"
#include "kiln/tensor_ops/reduction.h"

namespace kiln::nn::utils {

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  KILN_CHECK(max_norm >= 0, "[clip_grad_norm_] expected max_norm >= 0, got ", max_norm,
             ". Fix: pass the largest gradient norm to allow, e.g. 1.0.");
  KILN_CHECK(norm_type >= 0, "[clip_grad_norm_] expected norm_type >= 0 (or inf), got ", norm_type,
             ". Fix: pass 2.0 (Euclidean), 1.0, or INFINITY (largest |g|).");
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    KILN_CHECK(p.defined(),
               "[clip_grad_norm_] got an undefined parameter. Fix: pass "
               "model.parameters().");
    Tensor g = p.grad();
    if (g.defined()) grads.push_back(g);
  }
  if (grads.empty()) return 0.0;
  // The norm of the per-gradient norms is the norm of all elements together.
  double total = 0;
  for (const Tensor& g : grads) {
    double n = norm(g, norm_type).item<double>();
    if (std::isinf(norm_type))
      total = std::isnan(n) || std::isnan(total) ? NAN : std::max(total, n);
    else if (norm_type == 0)
      total += n;  // counts of non-zeros add up
    else
      total += std::pow(n, norm_type);
  }
  if (!std::isinf(norm_type) && norm_type != 0) total = std::pow(total, 1.0 / norm_type);
  KILN_CHECK(!error_if_nonfinite || std::isfinite(total),
             "[clip_grad_norm_] the total norm of "
             "order ",
             norm_type, " of the gradients is ", total,
             ", so they cannot be clipped. "
             "Fix: find the inf/nan gradient (a too-large lr, log(0), division by zero), or "
             "pass error_if_nonfinite = false to scale by the non-finite norm anyway.");
  double coef = std::min(max_norm / (total + 1e-6), 1.0);
  if (std::isnan(total)) coef = NAN;
  for (Tensor& g : grads) g.mul_(coef);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  KILN_CHECK(clip_value >= 0, "[clip_grad_value_] expected clip_value >= 0, got ", clip_value,
             ". Fix: pass the largest |gradient| to allow.");
  NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    KILN_CHECK(p.defined(),
               "[clip_grad_value_] got an undefined parameter. Fix: pass "
               "model.parameters().");
    Tensor g = p.grad();
    if (g.defined()) g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace kiln::nn::utils

namespace kiln::nn {

namespace {

// How many elements of `t` are NaN or infinite, and the first one's row-major index.
template <class T>
std::pair<int64_t, int64_t> count_non_finite(const Tensor& t) {
  const Tensor dense = t.contiguous();
  const T* p = static_cast<const T*>(dense.raw_data());
  int64_t count = 0, first = -1;
  for (int64_t i = 0; i < dense.numel(); ++i) {
    double v = 0;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      v = static_cast<float>(p[i]);
    } else {
      v = static_cast<double>(p[i]);
    }
    if (!std::isfinite(v) && count++ == 0) first = i;
  }
  return {count, first};
}

}  // namespace

void check_finite(const Module& module) {
  NoGradGuard no_grad;
  auto check = [](const std::string& name, const Tensor& t, const char* kind) {
    if (!t.defined() || t.is_symbolic() || !t.is_floating_point()) return;
    std::pair<int64_t, int64_t> bad{0, -1};
    visit_dtype(t.dtype(), [&](auto tag) {
      bad = count_non_finite<decltype(tag)>(t.device().is_cpu() ? t : t.to(kCPU));
    });
    KILN_CHECK(bad.first == 0, "[check_finite] the ", kind, " '", name, "' (", t.type_str(),
               ") holds ", bad.first, " non-finite value", bad.first == 1 ? "" : "s",
               " (NaN or inf), the first at flat index ", bad.second,
               ". Fix: the weights diverged or the file is damaged; load an earlier checkpoint, "
               "or retrain with a smaller learning rate.");
  };
  for (const auto& [name, t] : module.named_parameters()) check(name, t, "parameter");
  for (const auto& [name, t] : module.named_buffers()) check(name, t, "buffer");
}

}  // namespace kiln::nn
