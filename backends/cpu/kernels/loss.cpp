// CPU kernels for the loss ops: nll_loss and its backward (one pass over the targets) and
// the elementwise binary cross-entropies.
#include "kiln/ops/loss.h"

#include <atomic>
#include <cmath>

#include "kernels.h"
#include "nn_common.h"

namespace kiln::cpu::kernels {

namespace {

// input [N, C, S] (S = product of the extra dims; [C] is N = S = 1) against targets [N, S].
struct NllLayout {
  int64_t n = 1, classes = 1, inner = 1;
  explicit NllLayout(IntList input) {
    if (input.size() == 1) {
      classes = input[0];
      return;
    }
    n = input[0];
    classes = input[1];
    for (size_t d = 2; d < input.size(); ++d) inner *= input[d];
  }
  int64_t offset(int64_t i, int64_t cls) const {  // element i of the target, class cls
    return (i / inner) * classes * inner + cls * inner + i % inner;
  }
};

std::vector<double> class_weights(const Tensor& weight, int64_t classes) {
  if (!weight.defined()) return std::vector<double>(static_cast<size_t>(classes), 1.0);
  return weight.to_vector<double>();
}

std::vector<int64_t> checked_targets(const Tensor& target, int64_t classes, int64_t ignore_index,
                                     const char* op) {
  std::vector<int64_t> t = nn::read_indices(target);
  nn::check_indices(t, classes, op, "target",
                    "class indices must lie in [0, num_classes) (or equal ignore_index).",
                    ignore_index);
  return t;
}

void nll_loss_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::NllLossAttrs&>(c.attrs);
  const Tensor x = nn::dense(c.inputs[0]);
  NllLayout L(x.sizes());
  std::vector<int64_t> t = checked_targets(c.inputs[1], L.classes, a.ignore_index, "nll_loss");
  const bool per_element = a.reduction == "none";
  visit_floating_dtype(x.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    std::vector<double> w = class_weights(c.inputs[2], L.classes);
    const T* xp = nn::cdata<T>(x);
    T* out = nn::mdata<T>(c.outputs[0]);
    double total = 0, total_weight = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      double loss = 0;
      if (t[i] != a.ignore_index) {
        double wi = w[static_cast<size_t>(t[i])];
        loss = -wi * static_cast<double>(xp[L.offset(static_cast<int64_t>(i), t[i])]);
        total_weight += wi;
      }
      if (per_element) out[i] = static_cast<T>(loss);
      total += loss;
    }
    // Mean divides by the summed weights of the counted targets (0/0 = nan when none count).
    if (a.reduction == "sum") out[0] = static_cast<T>(total);
    if (a.reduction == "mean") out[0] = static_cast<T>(total / total_weight);
  });
}

void nll_loss_backward_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::NllLossBackwardAttrs&>(c.attrs);
  NllLayout L(a.input_shape);
  std::vector<int64_t> t =
      checked_targets(c.inputs[1], L.classes, a.ignore_index, "nll_loss_backward");
  const bool per_element = a.reduction == "none";
  const Tensor& out = c.outputs[0];
  visit_floating_dtype(out.dtype(), "nll_loss_backward", [&](auto tag) {
    using T = decltype(tag);
    std::vector<double> w = class_weights(c.inputs[2], L.classes);
    std::vector<double> g = c.inputs[0].to_vector<double>();
    T* o = nn::mdata<T>(out);
    std::fill(o, o + out.numel(), T(0));
    double scale = 1;
    if (a.reduction == "mean") {
      double total_weight = 0;
      for (int64_t ti : t)
        if (ti != a.ignore_index) total_weight += w[static_cast<size_t>(ti)];
      scale = 1 / total_weight;
    }
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == a.ignore_index) continue;
      double gi = per_element ? g[i] : g[0];
      o[L.offset(static_cast<int64_t>(i), t[i])] =
          static_cast<T>(-w[static_cast<size_t>(t[i])] * gi * scale);
    }
  });
}

void bce_kernel(KernelCall& c) {
  const Tensor &x = c.inputs[0], &t = c.inputs[1];
  visit_floating_dtype(x.dtype(), "binary_cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    std::atomic<bool> out_of_range{false};
    binary_loop<T, T, T>(c.outputs[0], x, t, [&](T xv, T tv) {
      if (!(xv >= T(0) && xv <= T(1))) [[unlikely]]
        out_of_range.store(true, std::memory_order_relaxed);
      // PyTorch clamps each log at -100 so that x = 0 or 1 gives a finite loss.
      T lx = std::max(std::log(xv), T(-100));
      T l1x = std::max(std::log(T(1) - xv), T(-100));
      return -(tv * lx + (T(1) - tv) * l1x);
    });
    if (out_of_range.load()) {
      for (double v : x.to_vector<double>())
        KILN_CHECK(v >= 0 && v <= 1,
                   "[binary_cross_entropy] expected every input in [0, 1] (probabilities), got ", v,
                   ". Fix: apply sigmoid first, or use binary_cross_entropy_with_logits on the raw "
                   "scores.");
    }
  });
}

void bce_with_logits_kernel(KernelCall& c) {
  const Tensor &x = c.inputs[0], &t = c.inputs[1], &pw = c.inputs[2];
  visit_floating_dtype(x.dtype(), "binary_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    // softplus(-x) = max(-x, 0) + log1p(exp(-|x|)) never overflows.
    auto softplus_neg = [](T xv) {
      return std::max(-xv, T(0)) + std::log1p(std::exp(-std::abs(xv)));
    };
    if (pw.defined()) {
      ternary_loop<T, T, T, T>(c.outputs[0], x, t, pw, [=](T xv, T tv, T pv) {
        return (T(1) - tv) * xv + (T(1) + (pv - T(1)) * tv) * softplus_neg(xv);
      });
    } else {
      binary_loop<T, T, T>(c.outputs[0], x, t,
                           [=](T xv, T tv) { return (T(1) - tv) * xv + softplus_neg(xv); });
    }
  });
}

}  // namespace

void register_loss_kernels() {
  constexpr size_t cpu = static_cast<size_t>(DeviceType::CPU);
  ops::nll_loss.kernels[cpu] = nll_loss_kernel;
  ops::nll_loss_backward.kernels[cpu] = nll_loss_backward_kernel;
  ops::binary_cross_entropy.kernels[cpu] = bce_kernel;
  ops::binary_cross_entropy_with_logits.kernels[cpu] = bce_with_logits_kernel;
}

}  // namespace kiln::cpu::kernels
