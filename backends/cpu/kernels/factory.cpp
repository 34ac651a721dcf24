// CPU kernels for the factory ops.
#include "kernels.h"
#include "kiln/ops/factory.h"
#include "loops.h"

namespace kiln::cpu {

namespace {

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

void full_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::FullAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v = from_double<T>(a.value);
    T* o = static_cast<T*>(out.raw_data());
    parallel_for(0, out.numel(), kParallelGrain, [&](int64_t b, int64_t e) { std::fill(o + b, o + e, v); });
  });
}

void arange_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::ArangeAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.raw_data());
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = from_double<T>(a.start + static_cast<double>(i) * a.step);
  });
}

}  // namespace

void register_factory_kernels() {
  ops::full.kernels[static_cast<size_t>(DeviceType::CPU)] = full_kernel;
  ops::arange.kernels[static_cast<size_t>(DeviceType::CPU)] = arange_kernel;
}

}  // namespace kiln::cpu
