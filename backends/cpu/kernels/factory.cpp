// CPU kernels for the factory ops, including the random ones (streams documented in
// kiln/ops/factory.h).
#include "kiln/ops/factory.h"

#include <cmath>

#include "kernels.h"
#include "loops.h"

namespace kiln::cpu::kernels {

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

void linspace_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::LinspaceAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  const int64_t n = a.steps;
  const double step = n > 1 ? (a.end - a.start) / static_cast<double>(n - 1) : 0;
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.raw_data());
    // Counting down from `end` in the second half makes the last value exactly `end`.
    for (int64_t i = 0; i < n; ++i)
      o[i] = from_double<T>(n == 1 || i < n / 2 ? a.start + step * static_cast<double>(i)
                                                : a.end - step * static_cast<double>(n - 1 - i));
  });
}

void eye_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::EyeAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.raw_data());
    std::fill(o, o + out.numel(), from_double<T>(0));
    for (int64_t i = 0; i < std::min(a.n, a.m); ++i) o[i * a.m + i] = from_double<T>(1);
  });
}

// Reserves the blocks for `n` values drawn `per_block` at a time, then calls
// fill(block_counter_words, first_element, count) for every block, in parallel.
template <class Fill>
void draw_blocks(Generator& gen, int64_t n, int64_t per_block, Fill fill) {
  if (n == 0) return;
  const int64_t blocks = (n + per_block - 1) / per_block;
  const uint64_t key = gen.seed();
  const uint64_t first = gen.reserve(static_cast<uint64_t>(blocks));
  parallel_for(
      0, blocks, std::max<int64_t>(1, kParallelGrain / (4 * per_block)), [&](int64_t b, int64_t e) {
        for (int64_t blk = b; blk < e; ++blk) {
          std::array<uint32_t, 4> w = Generator::philox(key, first + static_cast<uint64_t>(blk));
          int64_t i0 = blk * per_block;
          fill(w, i0, std::min(per_block, n - i0));
        }
      });
}

void rand_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::RandomAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  Generator& gen = a.generator.get();
  if (out.dtype() == DType::Float32) {
    float* o = static_cast<float*>(out.raw_data());
    draw_blocks(gen, out.numel(), 4, [&](const std::array<uint32_t, 4>& w, int64_t i0, int64_t k) {
      for (int64_t j = 0; j < k; ++j) o[i0 + j] = Generator::to_unit_float(w[j]);
    });
  } else {
    double* o = static_cast<double*>(out.raw_data());
    draw_blocks(gen, out.numel(), 2, [&](const std::array<uint32_t, 4>& w, int64_t i0, int64_t k) {
      for (int64_t j = 0; j < k; ++j) o[i0 + j] = Generator::to_unit_double(w[2 * j], w[2 * j + 1]);
    });
  }
}

void randn_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::RandomAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  visit_floating_dtype(out.dtype(), "randn", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.raw_data());
    draw_blocks(a.generator.get(), out.numel(), 2,
                [&](const std::array<uint32_t, 4>& w, int64_t i0, int64_t k) {
                  double u1 =
                      1.0 - Generator::to_unit_double(w[0], w[1]);  // (0, 1]: log(u1) is finite
                  double u2 = Generator::to_unit_double(w[2], w[3]);
                  double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * M_PI * u2;
                  o[i0] = static_cast<T>(r * std::cos(theta));
                  if (k > 1) o[i0 + 1] = static_cast<T>(r * std::sin(theta));
                });
  });
}

void randint_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::RandintAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  const uint64_t range = static_cast<uint64_t>(a.high) - static_cast<uint64_t>(a.low);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.raw_data());
    draw_blocks(a.generator.get(), out.numel(), 2,
                [&](const std::array<uint32_t, 4>& w, int64_t i0, int64_t k) {
                  for (int64_t j = 0; j < k; ++j) {
                    uint64_t r = (static_cast<uint64_t>(w[2 * j]) << 32) | w[2 * j + 1];
                    int64_t v = static_cast<int64_t>(static_cast<uint64_t>(a.low) + r % range);
                    o[i0 + j] = from_double<T>(static_cast<double>(v));
                  }
                });
  });
}

void bernoulli_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::BernoulliAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  // Element i draws from the stream position i, so p is read in row-major order: a
  // broadcast scalar directly, anything else after a dense copy.
  const Tensor& p_in = c.inputs[0];
  bool scalar = true;
  for (int64_t d = 0; d < p_in.dim(); ++d) scalar &= p_in.stride(d) == 0 || p_in.size(d) == 1;
  Tensor p = scalar || p_in.is_contiguous() ? p_in : dense_copy(p_in);
  visit_floating_dtype(out.dtype(), "bernoulli", [&](auto tag) {
    using T = decltype(tag);
    const T* pp = static_cast<const T*>(p.raw_data());
    const int64_t n = out.numel();
    const int64_t pstep = scalar ? 0 : 1;
    auto prob = [&](int64_t i) {
      T v = pp[i * pstep];
      if (!(v >= 0 && v <= 1)) [[unlikely]]
        KILN_FAIL(
            "[bernoulli] expected every probability in [0, 1], got ", v, " at element ", i,
            ". Fix: clamp p with kiln::clamp(p, 0, 1), or pass probabilities rather than logits.");
      return v;
    };
    T* o = static_cast<T*>(out.raw_data());
    if constexpr (std::is_same_v<T, float>) {
      draw_blocks(a.generator.get(), n, 4,
                  [&](const std::array<uint32_t, 4>& w, int64_t i0, int64_t k) {
                    for (int64_t j = 0; j < k; ++j)
                      o[i0 + j] = Generator::to_unit_float(w[j]) < prob(i0 + j) ? 1.f : 0.f;
                  });
    } else {
      draw_blocks(
          a.generator.get(), n, 2, [&](const std::array<uint32_t, 4>& w, int64_t i0, int64_t k) {
            for (int64_t j = 0; j < k; ++j)
              o[i0 + j] =
                  Generator::to_unit_double(w[2 * j], w[2 * j + 1]) < prob(i0 + j) ? 1.0 : 0.0;
          });
    }
  });
}

}  // namespace

void register_factory_kernels() {
  ops::full.kernels[static_cast<size_t>(DeviceType::CPU)] = full_kernel;
  ops::arange.kernels[static_cast<size_t>(DeviceType::CPU)] = arange_kernel;
  ops::linspace.kernels[static_cast<size_t>(DeviceType::CPU)] = linspace_kernel;
  ops::eye.kernels[static_cast<size_t>(DeviceType::CPU)] = eye_kernel;
  ops::rand.kernels[static_cast<size_t>(DeviceType::CPU)] = rand_kernel;
  ops::randn.kernels[static_cast<size_t>(DeviceType::CPU)] = randn_kernel;
  ops::randint.kernels[static_cast<size_t>(DeviceType::CPU)] = randint_kernel;
  ops::bernoulli.kernels[static_cast<size_t>(DeviceType::CPU)] = bernoulli_kernel;
}

}  // namespace kiln::cpu::kernels
