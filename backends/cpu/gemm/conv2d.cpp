// The direct convolution driver: weight packing, the zero-padded input, the shared depth
// offsets, and the split into (image, group, pixel block) tasks. Each task runs the
// micro-kernel over strips of pixels into a thread-local [pixels x channels] tile, then
// has the kernel's store write the tile into the NCHW output with the bias.
#include "kiln/cpu_gemm/conv2d.h"

#include <algorithm>
#include <cstring>

#include "conv_microkernel.h"
#include "kiln/cpu_gemm/gemm.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu::gemm {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

const ConvMicroKernel* const* family(std::string_view isa) {
  if (isa.empty()) isa = kernel_name(default_kernel());
  if (isa == "avx512") return kAvx512ConvKernels;
  if (isa == "avx2") return kAvx2ConvKernels;
  return nullptr;
}

// The family's kernel that wastes the fewest padded channels on `channels`, the widest
// among equals (fewer panels re-read the same input values).
const ConvMicroKernel& kernel_for(std::string_view isa, int64_t channels) {
  const ConvMicroKernel* const* kernels = family(isa);
  KILN_CHECK(kernels, "[conv2d] micro-kernel family '", isa,
             "' has no direct-convolution kernels. Fix: check has_direct_conv() first.");
  const ConvMicroKernel* best = kernels[0];
  for (const ConvMicroKernel* const* k = kernels; *k; ++k)
    if (ceil_div(channels, (*k)->nr) * (*k)->nr < ceil_div(channels, best->nr) * best->nr)
      best = *k;
  return *best;
}

constexpr int kMaxRows = 16;      // the largest mr of any conv micro-kernel
constexpr int64_t kMaxBlock = 512;  // pixels per task: a tile of at most 512 x 64 floats

// x zero-padded to [batch, channels, height + 2 pad_h, width + 2 pad_w], or x itself.
const float* padded_input(const Conv2dShape& s, const float* x, Tensor& storage) {
  if (s.pad_h == 0 && s.pad_w == 0) return x;
  const int64_t Hp = s.height + 2 * s.pad_h, Wp = s.width + 2 * s.pad_w;
  storage = Tensor::empty({s.batch * s.channels * Hp * Wp}, kFloat32);
  float* dst = storage.data_ptr<float>();
  parallel_for(0, s.batch * s.channels, std::max<int64_t>(1, 16384 / (Hp * Wp)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) {
                   float* d = dst + plane * Hp * Wp;
                   const float* src = x + plane * s.height * s.width;
                   std::fill(d, d + s.pad_h * Wp, 0.0f);
                   for (int64_t h = 0; h < s.height; ++h) {
                     float* row = d + (s.pad_h + h) * Wp;
                     std::fill(row, row + s.pad_w, 0.0f);
                     std::memcpy(row + s.pad_w, src + h * s.width, s.width * sizeof(float));
                     std::fill(row + s.pad_w + s.width, row + Wp, 0.0f);
                   }
                   std::fill(d + (s.pad_h + s.height) * Wp, d + Hp * Wp, 0.0f);
                 }
               });
  return dst;
}

}  // namespace

bool has_direct_conv(std::string_view isa) {
  return family(isa) != nullptr;
}

PackedConvWeights::PackedConvWeights(const Conv2dShape& shape, const float* w,
                                     std::string_view isa)
    : shape_(shape) {
  const int64_t groups = shape.groups, oc_per_group = shape.out_channels / groups;
  const int64_t depth = shape.depth();
  kernel_ = &kernel_for(isa, oc_per_group);
  const int64_t nr = kernel_->nr;
  panels_ = ceil_div(oc_per_group, nr);
  data_.assign(static_cast<size_t>(groups * panels_ * depth * nr), 0.0f);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t oc = 0; oc < oc_per_group; ++oc) {
      const float* src = w + (g * oc_per_group + oc) * depth;
      float* dst = data_.data() + ((g * panels_ + oc / nr) * depth) * nr + oc % nr;
      for (int64_t k = 0; k < depth; ++k) dst[k * nr] = src[k];
    }
}

const float* PackedConvWeights::panel(int64_t group, int64_t panel) const {
  return data_.data() + (group * panels_ + panel) * shape_.depth() * kernel_->nr;
}

void conv2d(const float* x, const PackedConvWeights& w, const float* bias, float* out) {
  const Conv2dShape& s = w.shape();
  const ConvMicroKernel& kernel = w.kernel();
  const int64_t G = s.groups, Cg = s.channels / G, OCg = s.out_channels / G;
  const int64_t P = s.out_h * s.out_w, depth = s.depth();
  if (s.batch == 0 || P == 0 || s.out_channels == 0) return;
  const int64_t Hp = s.height + 2 * s.pad_h, Wp = s.width + 2 * s.pad_w;
  Tensor padding_storage;
  const float* xp = padded_input(s, x, padding_storage);

  // Depth step k = (c, ki, kj) reads the padded input this far from the window's corner.
  std::vector<int64_t> offsets(static_cast<size_t>(depth));
  for (int64_t c = 0, k = 0; c < Cg; ++c)
    for (int64_t ki = 0; ki < s.kernel_h; ++ki)
      for (int64_t kj = 0; kj < s.kernel_w; ++kj)
        offsets[k++] = c * Hp * Wp + ki * s.dilation_h * Wp + kj * s.dilation_w;

  // Enough tasks for every thread (twice over), in whole strips, at most kMaxBlock pixels.
  const int64_t mr = kernel.mr, nr = kernel.nr, panels = w.panels(), width = panels * nr;
  const int64_t images = s.batch * G;
  int64_t blocks = std::clamp<int64_t>(ceil_div(2 * num_threads(), images), 1, ceil_div(P, mr));
  blocks = std::max(blocks, ceil_div(P, kMaxBlock));
  const int64_t block = ceil_div(ceil_div(P, blocks), mr) * mr;
  blocks = ceil_div(P, block);

  parallel_for(0, images * blocks, 1, [&](int64_t lo, int64_t hi) {
    thread_local std::vector<float> tile;
    tile.resize(static_cast<size_t>(block * width));
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t image = t / blocks, n = image / G, g = image % G;
      const int64_t p0 = (t % blocks) * block, p1 = std::min(P, p0 + block);
      const float* plane = xp + (n * s.channels + g * Cg) * Hp * Wp;
      for (int64_t panel = 0; panel < panels; ++panel) {
        const float* weights = w.panel(g, panel);
        // The window corner of output pixel p0, stepped along without divisions (a strip's
        // eight divisions cost more than its products when the depth is 9).
        int64_t oh = p0 / s.out_w, ow = p0 % s.out_w;
        for (int64_t p = p0; p < p1; p += mr) {
          const int64_t rows = std::min(mr, p1 - p);
          const float* pixels[kMaxRows];
          for (int64_t i = 0; i < rows; ++i) {
            pixels[i] = plane + oh * s.stride_h * Wp + ow * s.stride_w;
            if (++ow == s.out_w) ow = 0, ++oh;
          }
          for (int64_t i = rows; i < mr; ++i) pixels[i] = pixels[rows - 1];
          kernel.run(rows, pixels, offsets.data(), depth, weights,
                     tile.data() + (p - p0) * width + panel * nr, width);
        }
      }
      kernel.store(p1 - p0, OCg, tile.data(), width, bias ? bias + g * OCg : nullptr,
                   out + (n * s.out_channels + g * OCg) * P + p0, P);
    }
  });
}

}  // namespace kiln::cpu::gemm
