// CPU kernels for the reduction ops, built on reduce.h.
#include "kernels.h"
#include "kiln/ops/reduction.h"
#include "loops.h"
#include "reduce.h"

namespace kiln::cpu {

namespace {

template <class T, class A>
struct SumR {
  using Acc = A;
  Acc init() const { return Acc(0); }
  Acc step(Acc a, T x) const { return a + static_cast<Acc>(x); }
  Acc merge(Acc a, Acc b) const { return a + b; }
  A done(Acc a, int64_t) const { return a; }
};

void sum_kernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  uint64_t mask = reduction_mask(static_cast<const ops::ReduceAttrs&>(c.attrs).dims, x.dim(), "sum");
  visit_compute_dtype(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      reduce<T, T>(x, c.outputs[0], mask, SumR<T, T>{});
    } else {
      reduce<T, int64_t>(x, c.outputs[0], mask, SumR<T, int64_t>{});
    }
  });
}

}  // namespace

void register_reduction_kernels() {
  ops::sum.kernels[static_cast<size_t>(DeviceType::CPU)] = sum_kernel;
}

}  // namespace kiln::cpu
