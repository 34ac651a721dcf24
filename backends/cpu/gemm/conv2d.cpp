// The direct convolution driver: weight packing, the zero-padded input, the shared depth
// offsets, and the split into (image, group, pixel block) tasks. Each task runs the
// micro-kernel over strips of pixels into a thread-local [pixels x channels] tile, then
// has the kernel's store write the tile into the NCHW output through ConvOutput.
#include "kiln/cpu/gemm/conv2d.h"

#include <algorithm>
#include <cstring>

#include "conv_microkernel.h"
#include "kiln/cpu/gemm/gemm.h"
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

constexpr int kMaxRows = 16;        // the largest mr of any conv micro-kernel
constexpr int64_t kMaxBlock = 512;  // pixels per task: its tile stays in L2

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

Conv2dShape conv2d_shape(IntList x, IntList w, IntList out, IntList stride, IntList padding,
                         IntList dilation, int64_t groups) {
  return {.batch = x[0],
          .channels = x[1],
          .height = x[2],
          .width = x[3],
          .out_channels = w[0],
          .groups = groups,
          .kernel_h = w[2],
          .kernel_w = w[3],
          .stride_h = stride[0],
          .stride_w = stride[1],
          .pad_h = padding[0],
          .pad_w = padding[1],
          .dilation_h = dilation[0],
          .dilation_w = dilation[1],
          .out_h = out[2],
          .out_w = out[3]};
}

bool has_direct_conv(std::string_view isa) {
  return family(isa) != nullptr;
}

PackedConvWeights::PackedConvWeights(const float* w, int64_t out_channels, int64_t groups,
                                     int64_t channels_per_group, int64_t kernel_h, int64_t kernel_w,
                                     std::string_view isa)
    : out_channels_(out_channels),
      groups_(groups),
      channels_per_group_(channels_per_group),
      kernel_h_(kernel_h),
      kernel_w_(kernel_w) {
  const int64_t oc_per_group = out_channels / groups, k = depth();
  kernel_ = &kernel_for(isa, oc_per_group);
  const int64_t nr = kernel_->nr;
  panels_ = ceil_div(oc_per_group, nr);
  data_.resize(static_cast<size_t>(groups * panels_ * k * nr));
  // Written in order (the reads stride through w instead): strided writes would each miss
  // their cache line, and this runs on every eager call.
  float* dst = data_.data();
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t p = 0; p < panels_; ++p) {
      const int64_t oc0 = p * nr, cols = std::min(nr, oc_per_group - oc0);
      const float* src = w + (g * oc_per_group + oc0) * k;
      for (int64_t i = 0; i < k; ++i, dst += nr) {
        for (int64_t j = 0; j < cols; ++j) dst[j] = src[j * k + i];
        std::fill(dst + cols, dst + nr, 0.0f);
      }
    }
  if (kernel_->shallow && k <= kShallowDepth) rows_.assign(w, w + out_channels * k);
}

bool PackedConvWeights::fits(const Conv2dShape& s) const {
  return s.out_channels == out_channels_ && s.groups == groups_ &&
         s.channels == channels_per_group_ * groups_ && s.kernel_h == kernel_h_ &&
         s.kernel_w == kernel_w_;
}

const float* PackedConvWeights::panel(int64_t group, int64_t panel) const {
  return data_.data() + (group * panels_ + panel) * depth() * kernel_->nr;
}

namespace {

// One call's fixed facts: the padded input, the depth offsets, the pixel blocks.
struct ConvRun {
  const Conv2dShape& s;
  const PackedConvWeights& w;
  const ConvOutput& output;
  float* out;
  const float* xp = nullptr;  // x, zero-padded when the convolution pads
  int64_t Hp, Wp, P, block = 0, blocks = 0;
  std::vector<int64_t> offsets;  // depth step k = (c, ki, kj): its distance from the corner
  Tensor padding_storage;

  ConvRun(const Conv2dShape& shape, const float* x, const PackedConvWeights& weights,
          const ConvOutput& transform, float* result, int64_t images_at_once)
      : s(shape),
        w(weights),
        output(transform),
        out(result),
        Hp(shape.height + 2 * shape.pad_h),
        Wp(shape.width + 2 * shape.pad_w),
        P(shape.out_h * shape.out_w) {
    xp = padded_input(s, x, padding_storage);
    const int64_t Cg = s.channels / s.groups;
    offsets.resize(static_cast<size_t>(w.depth()));
    for (int64_t c = 0, k = 0; c < Cg; ++c)
      for (int64_t ki = 0; ki < s.kernel_h; ++ki)
        for (int64_t kj = 0; kj < s.kernel_w; ++kj)
          offsets[k++] = c * Hp * Wp + ki * s.dilation_h * Wp + kj * s.dilation_w;
    // Enough tasks for every thread (twice over) among the images computed together, in
    // whole strips, at most kMaxBlock pixels each.
    const int64_t mr = w.kernel().mr, images = images_at_once * s.groups;
    blocks = std::clamp<int64_t>(ceil_div(2 * num_threads(), images), 1, ceil_div(P, mr));
    blocks = std::max(blocks, ceil_div(P, kMaxBlock));
    block = ceil_div(ceil_div(P, blocks), mr) * mr;
    blocks = ceil_div(P, block);
  }

  // Images [n0, n1): (image, group, pixel block) tasks across kiln's threads (in line when
  // called from inside a parallel_for).
  void images(int64_t n0, int64_t n1) const {
    const ConvMicroKernel& kernel = w.kernel();
    const int64_t G = s.groups, Cg = s.channels / G, OCg = s.out_channels / G;
    if (w.rows() && s.stride_w == 1) {
      // Shallow: (image, group, block of 8 output channels) tasks, each writing its rows.
      constexpr int64_t kChannels = 8;
      const int64_t cblocks = ceil_div(OCg, kChannels);
      parallel_for(n0 * G * cblocks, n1 * G * cblocks, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t) {
          const int64_t image = t / cblocks, n = image / G, g = image % G;
          const int64_t oc = g * OCg + (t % cblocks) * kChannels;
          const int64_t channels = std::min(kChannels, (g + 1) * OCg - oc);
          kernel.shallow(xp + (n * s.channels + g * Cg) * Hp * Wp, s.stride_h * Wp, offsets.data(),
                         w.depth(), w.rows() + oc * w.depth(), output.from(oc), channels,
                         out + (n * s.out_channels + oc) * P, s.out_h, s.out_w);
        }
      });
      return;
    }
    const int64_t mr = kernel.mr, nr = kernel.nr, panels = w.panels(), width = panels * nr;
    parallel_for(n0 * G * blocks, n1 * G * blocks, 1, [&](int64_t lo, int64_t hi) {
      thread_local std::vector<float> tile;
      tile.resize(static_cast<size_t>(block * width));
      const int64_t depth = w.depth();
      const int64_t depth_blocks =
          ceil_div(depth * nr * static_cast<int64_t>(sizeof(float)), kPanelBlockBytes);
      const int64_t depth_block = ceil_div(depth, depth_blocks);
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t image = t / blocks, n = image / G, g = image % G;
        const int64_t p0 = (t % blocks) * block, p1 = std::min(P, p0 + block);
        const float* plane = xp + (n * s.channels + g * Cg) * Hp * Wp;
        for (int64_t panel = 0; panel < panels; ++panel)
          for (int64_t k0 = 0; k0 < depth; k0 += depth_block) {
            const int64_t steps = std::min(depth_block, depth - k0);
            const float* weights = w.panel(g, panel) + k0 * nr;
            // The window corner of output pixel p0, stepped along without divisions (a
            // strip's eight divisions cost more than its products when the depth is 9).
            int64_t oh = p0 / s.out_w, ow = p0 % s.out_w;
            for (int64_t p = p0; p < p1; p += mr) {
              const int64_t rows = std::min(mr, p1 - p);
              const float* pixels[kMaxRows];
              for (int64_t i = 0; i < rows; ++i) {
                pixels[i] = plane + oh * s.stride_h * Wp + ow * s.stride_w;
                if (++ow == s.out_w) ow = 0, ++oh;
              }
              for (int64_t i = rows; i < mr; ++i) pixels[i] = pixels[rows - 1];
              kernel.run(rows, pixels, offsets.data() + k0, steps, weights,
                         tile.data() + (p - p0) * width + panel * nr, width, k0 > 0);
            }
          }
        kernel.store(p1 - p0, OCg, tile.data(), width, output.from(g * OCg),
                     out + (n * s.out_channels + g * OCg) * P + p0, P);
      }
    });
  }
};

// An epilogue reads a block of images right after it is written: blocks of about this many
// output bytes stay in L2.
constexpr int64_t kEpilogueBlockBytes = 256 * 1024;

}  // namespace

void conv2d(const Conv2dShape& s, const float* x, const PackedConvWeights& w,
            const ConvOutput& output, float* out, const ImageEpilogue& epilogue) {
  KILN_CHECK(w.fits(s), "[conv2d] the packed weights are not those of this convolution (",
             s.out_channels, " output channels, ", s.channels, " input channels in ", s.groups,
             " groups, kernel ", s.kernel_h, "x", s.kernel_w,
             "). Fix: pack the weights for this shape.");
  const int64_t P = s.out_h * s.out_w;
  if (s.batch == 0) return;
  if (P == 0 || s.out_channels == 0) {
    if (epilogue) epilogue(0, s.batch);
    return;
  }
  const int64_t threads = num_threads();
  if (!epilogue || s.batch < 2) {
    ConvRun(s, x, w, output, out, s.batch).images(0, s.batch);
    if (epilogue) epilogue(0, s.batch);
    return;
  }
  // Whole images per task, each task's epilogue right after its images.
  const int64_t image_bytes = s.out_channels * P * static_cast<int64_t>(sizeof(float));
  const int64_t per_block =
      std::clamp<int64_t>(kEpilogueBlockBytes / image_bytes, 1, ceil_div(s.batch, threads));
  const ConvRun run(s, x, w, output, out, per_block);
  parallel_for(0, ceil_div(s.batch, per_block), 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * per_block, n1 = std::min(s.batch, n0 + per_block);
      run.images(n0, n1);
      epilogue(n0, n1);
    }
  });
}

}  // namespace kiln::cpu::gemm
