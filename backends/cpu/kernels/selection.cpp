// CPU kernels for masked_select and nonzero: one pass in row-major order (the order is the
// result, so the pass is serial; it is memory-bound either way).
#include "kiln/ops/selection.h"

#include "kernels.h"
#include "lines.h"
#include "loops.h"

namespace kiln::cpu::kernels {

namespace {

Tensor dense(const Tensor& t) {
  return t.is_contiguous() ? t : dense_copy(t);
}

void masked_select_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::SelectionAttrs&>(c.attrs);
  const Tensor x = dense(c.inputs[0]), mask = dense(c.inputs[1]);
  const Tensor& out = c.outputs[0];
  visit_compute_dtype(x.dtype(), "masked_select", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = elements_of<const T>(x);
    const bool* mp = elements_of<const bool>(mask);
    T* op = elements_of<T>(out);
    int64_t k = 0;
    for (int64_t e = 0; e < x.numel() && k < a.size; ++e)
      if (mp[e]) op[k++] = xp[e];
    for (; k < a.size; ++k) op[k] = static_cast<T>(a.fill);
  });
}

void nonzero_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::SelectionAttrs&>(c.attrs);
  const Tensor x = dense(c.inputs[0]);
  const Tensor& out = c.outputs[0];
  const int64_t rank = x.dim();
  int64_t* op = elements_of<int64_t>(out);
  visit_compute_dtype(x.dtype(), "nonzero", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = elements_of<const T>(x);
    int64_t k = 0;
    for (int64_t e = 0; e < x.numel() && k < a.size; ++e) {
      if (xp[e] == T(0)) continue;
      for (int64_t d = rank, rest = e; d-- > 0;) {
        op[k * rank + d] = rest % x.size(d);
        rest /= x.size(d);
      }
      ++k;
    }
    for (int64_t i = k * rank; i < a.size * rank; ++i) op[i] = static_cast<int64_t>(a.fill);
  });
}

}  // namespace

void register_selection_kernels() {
  constexpr size_t kCPU = static_cast<size_t>(DeviceType::CPU);
  ops::masked_select.kernels[kCPU] = masked_select_kernel;
  ops::nonzero.kernels[kCPU] = nonzero_kernel;
}

}  // namespace kiln::cpu::kernels
