// CPU kernels for pad and pad_backward. Algorithm: precompute, for every output position of
// every padded dim, the input index it reads (-1: the constant fill). pad then walks the
// output row by row (rows split across threads) reading through the input's strides;
// pad_backward adds each gradient row into its source row, split across threads only over
// the unpadded leading dims, whose slices never share a source element.
#include "kiln/ops/pad.h"

#include <cstring>

#include "kernels.h"
#include "nn_common.h"

namespace kiln::cpu::kernels {

namespace {

// Source index tables: maps[d][o] for every dim d of the output (identity when unpadded).
std::vector<std::vector<int64_t>> source_maps(IntList in, IntList out, const ops::PadAttrs& a) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t k = rank - 1 - d;  // pad pair index of dim d
    const int64_t left = 2 * k < static_cast<int64_t>(a.pad.size()) ? a.pad[2 * k] : 0;
    auto& m = maps[static_cast<size_t>(d)];
    m.resize(static_cast<size_t>(out[d]));
    for (int64_t o = 0; o < out[d]; ++o) m[o] = ops::pad_source_index(o, in[d], left, a.mode);
  }
  return maps;
}

void pad_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::PadAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  const Tensor& out = c.outputs[0];
  if (out.numel() == 0) return;
  const int64_t rank = out.dim();
  if (rank == 0) {  // an empty pad list on a 0-d tensor: a copy
    visit_compute_dtype(x.dtype(), "pad", [&](auto tag) {
      using T = decltype(tag);
      *nn::mdata<T>(out) = *static_cast<const T*>(x.raw_data());
    });
    return;
  }
  const auto maps = source_maps(x.sizes(), out.sizes(), a);
  const int64_t row_len = out.size(-1), rows = out.numel() / row_len;
  visit_compute_dtype(x.dtype(), "pad", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x.raw_data());
    T* op = nn::mdata<T>(out);
    const T fill = static_cast<T>(a.value);
    const int64_t last_stride = x.stride(-1);
    const auto& last = maps.back();
    // Constant mode: the last dim's in-range outputs are the run [copy_begin, copy_end).
    const bool constant = a.mode == "constant";
    int64_t copy_begin = 0, copy_end = 0;
    while (copy_begin < row_len && last[copy_begin] < 0) ++copy_begin;
    copy_end = copy_begin;
    while (copy_end < row_len && last[copy_end] >= 0) ++copy_end;
    parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / row_len),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t r = lo; r < hi; ++r) {
                     T* dst = op + r * row_len;
                     // The input offset of this row (or -1 when a leading dim falls in the constant
                     // fill).
                     int64_t off = 0, rem = r;
                     for (int64_t d = rank - 2; d >= 0 && off >= 0; --d) {
                       const int64_t o = rem % out.size(d);
                       rem /= out.size(d);
                       const int64_t s = maps[d][o];
                       off = s < 0 ? -1 : off + s * x.stride(d);
                     }
                     if (off < 0) {
                       std::fill(dst, dst + row_len, fill);
                       continue;
                     }
                     const T* src = xp + off;
                     if (constant && last_stride == 1) {
                       // fill | copy | fill: the in-range outputs read one contiguous run.
                       std::fill(dst, dst + copy_begin, fill);
                       if (copy_end > copy_begin)
                         std::memcpy(dst + copy_begin, src + last[copy_begin],
                                     static_cast<size_t>(copy_end - copy_begin) * sizeof(T));
                       std::fill(dst + copy_end, dst + row_len, fill);
                       continue;
                     }
                     for (int64_t o = 0; o < row_len; ++o)
                       dst[o] = last[o] < 0 ? fill : src[last[o] * last_stride];
                   }
                 });
  });
}

void pad_backward_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::PadAttrs&>(c.attrs);
  const Tensor grad = nn::dense(c.inputs[0]);
  const Tensor& gx = c.outputs[0];
  const int64_t rank = grad.dim();
  std::memset(gx.raw_data(), 0, gx.nbytes());
  if (grad.numel() == 0 || gx.numel() == 0) return;
  const auto maps = source_maps(gx.sizes(), grad.sizes(), a);
  const Shape in_strides = contiguous_strides(gx.sizes());
  // Leading dims without padding split the work; the rest is one serial sub-problem each.
  const int64_t padded_dims = static_cast<int64_t>(a.pad.size()) / 2;
  const int64_t lead = rank - padded_dims;
  int64_t outer = 1;
  for (int64_t d = 0; d < lead; ++d) outer *= grad.size(d);
  const int64_t inner = grad.numel() / outer;
  const int64_t in_inner = gx.numel() / outer;
  visit_floating_dtype(grad.dtype(), "pad_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = nn::cdata<T>(grad);
    T* xp = nn::mdata<T>(gx);
    parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / inner),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t s = lo; s < hi; ++s) {
                     const T* g = gp + s * inner;
                     T* dst = xp + s * in_inner;
                     for (int64_t i = 0; i < inner; ++i) {
                       int64_t off = 0, rem = i;
                       for (int64_t d = rank - 1; d >= lead; --d) {
                         const int64_t o = rem % grad.size(d);
                         rem /= grad.size(d);
                         off += maps[d][o] * in_strides[d];
                       }
                       dst[off] += g[i];
                     }
                   }
                 });
  });
}

}  // namespace

void register_pad_kernels() {
  constexpr size_t cpu = static_cast<size_t>(DeviceType::CPU);
  ops::pad.kernels[cpu] = pad_kernel;
  ops::pad_backward.kernels[cpu] = pad_backward_kernel;
}

}  // namespace kiln::cpu::kernels
