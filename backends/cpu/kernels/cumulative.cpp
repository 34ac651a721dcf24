// CPU kernels for cumsum and cumprod: one pass along each line, lines split across threads.
// Floating inputs accumulate in double (as PyTorch's CPU kernels do), so a long float32 sum
// loses no more than its final rounding; integer and bool inputs accumulate in int64, wrapping
// around on overflow as PyTorch does.
#include "kiln/ops/cumulative.h"

#include <algorithm>

#include "kernels.h"
#include "lines.h"
#include "loops.h"

namespace kiln::cpu::kernels {

namespace {

template <class T>
using Accumulator = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

template <bool kProduct>
void cumulative_kernel(KernelCall& c) {
  const Tensor &x = c.inputs[0], &out = c.outputs[0];
  if (out.numel() == 0) return;
  const int64_t d = wrap_dim(static_cast<const ops::DimAttrs&>(c.attrs).dim, x.dim(), c.op.name.c_str());
  const Lines in_lines(x, d), out_lines(out, d);
  visit_compute_dtype(x.dtype(), c.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = Accumulator<T>;
    using Out = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    const T* xp = elements_of<const T>(x);
    Out* op = elements_of<Out>(out);
    parallel_for(0, in_lines.count, std::max<int64_t>(1, kParallelGrain / in_lines.length),
                 [&](int64_t b, int64_t e) {
                   for (int64_t line = b; line < e; ++line) {
                     const T* in = xp + in_lines.start(line);
                     Out* result = op + out_lines.start(line);
                     Acc acc = kProduct ? 1 : 0;
                     for (int64_t i = 0; i < in_lines.length; ++i) {
                       // Unsigned integer arithmetic wraps like PyTorch's int64 (signed overflow
                       // would be undefined behaviour).
                       const Acc v = static_cast<Acc>(in[i * in_lines.step]);
                       acc = kProduct ? acc * v : acc + v;
                       result[i * out_lines.step] = static_cast<Out>(acc);
                     }
                   }
                 });
  });
}

}  // namespace

void register_cumulative_kernels() {
  constexpr size_t kCPU = static_cast<size_t>(DeviceType::CPU);
  ops::cumsum.kernels[kCPU] = cumulative_kernel<false>;
  ops::cumprod.kernels[kCPU] = cumulative_kernel<true>;
}

}  // namespace kiln::cpu::kernels
