// 1-D and 3-D pooling, adaptive max pooling and max_unpool2d, composed from the 2-D table
// ops and reductions:
// - 1-D pools: the 2-D op on a height-1 image.
// - 3-D pools: a window over depth first (the max, or the sum, of the strided depth slices
//   each tap reads), then the 2-D pool over height and width. A box window is a product of
//   intervals, so both the max and the average (its divisor: the product of each dim's
//   clipped window length) split exactly this way.
// - adaptive_max_pool2d: PyTorch's windows [floor(i H / OH), ceil((i + 1) H / OH)), rows then
//   columns (the max of a box is the max over its rows of the max over its columns).
// - max_unpool2d: a scatter-add of the values at their argmax positions into zeros.
#include <cmath>
#include <limits>

#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"

namespace kiln::nn::functional {
namespace {

Shape per_dim(IntList v, size_t dims, const char* name, const char* fn, IntList fallback) {
  if (v.empty()) v = fallback;
  KILN_CHECK(v.size() == 1 || v.size() == dims, "[", fn, "] ", name, " takes one value or ", dims,
             " (one per spatial dim), got ", shape_str(v), ". Fix: pass e.g. 2 or {",
             dims == 1 ? "2" : dims == 2 ? "2, 1" : "2, 1, 1", "}.");
  return v.size() == 1 ? Shape(std::vector<int64_t>(dims, v[0])) : Shape(v);
}

Tensor batched(const Tensor& x, int64_t rank, const char* fn, bool& unbatched) {
  KILN_CHECK(x.defined(), "[", fn, "] the input is undefined.");
  KILN_CHECK(x.dim() == rank || x.dim() == rank - 1, "[", fn, "] expected a ", rank,
             "-D batched or ", rank - 1, "-D unbatched input, got ", x.type_str(),
             ". Fix: reshape the input.");
  unbatched = x.dim() == rank - 1;
  return unbatched ? x.unsqueeze(0) : x;
}

// The number of windows along one dim (PyTorch's rule, also for ceil_mode: the last window
// must start inside the input or its left padding).
int64_t windows(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode,
                const char* fn) {
  KILN_CHECK(k > 0 && s > 0 && d > 0 && p >= 0 && p <= (d * (k - 1) + 1) / 2, "[", fn,
             "] expected a positive kernel, stride and dilation and padding at most half the "
             "window, got kernel ", k, ", stride ", s, ", padding ", p, ", dilation ", d,
             ". Fix: pass padding <= kernel_size / 2.");
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  KILN_CHECK(span >= 0, "[", fn, "] the input size ", in, " (padded ", in + 2 * p,
             ") is smaller than the window ", d * (k - 1) + 1, ". Fix: pad the input or use a "
             "smaller kernel.");
  int64_t n = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (n - 1) * s >= in + p) --n;
  return n;
}

// The strided depth slices that tap `tap` of the window reads, for every output depth:
// [N, C, OD, H, W]. `xp` is the input padded in depth (before by p, after as far as the last
// window reaches).
Tensor tap_slices(const Tensor& xp, int64_t tap, int64_t out, int64_t s, int64_t d) {
  return slice(xp, 2, tap * d, tap * d + (out - 1) * s + 1, s);
}

Tensor pad_depth(const Tensor& x, int64_t before, int64_t after, double value) {
  if (before == 0 && after == 0) return x;
  return pad(x, {0, 0, 0, 0, before, after}, "constant", value);
}

// [N, C, D, H, W] <-> [N, C * D, H, W] for the 2-D pool over the last two dims.
Tensor planes(const Tensor& x) {
  return x.reshape({x.size(0), x.size(1) * x.size(2), x.size(3), x.size(4)});
}
Tensor volumes(const Tensor& y, int64_t channels) {
  return y.reshape({y.size(0), channels, y.size(1) / channels, y.size(2), y.size(3)});
}

}  // namespace

Tensor max_pool1d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  IntList dilation, bool ceil_mode) {
  bool unbatched = false;
  Tensor x3 = batched(x, 3, "max_pool1d", unbatched);
  Shape k = per_dim(kernel_size, 1, "kernel_size", "max_pool1d", {}),
        s = per_dim(stride, 1, "stride", "max_pool1d", k), p = per_dim(padding, 1, "padding", "max_pool1d", {0}),
        d = per_dim(dilation, 1, "dilation", "max_pool1d", {1});
  Tensor y = max_pool2d(x3.unsqueeze(2), {1, k[0]}, {1, s[0]}, {0, p[0]}, {1, d[0]}, ceil_mode).squeeze(2);
  return unbatched ? y.squeeze(0) : y;
}

Tensor avg_pool1d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad) {
  bool unbatched = false;
  Tensor x3 = batched(x, 3, "avg_pool1d", unbatched);
  Shape k = per_dim(kernel_size, 1, "kernel_size", "avg_pool1d", {}),
        s = per_dim(stride, 1, "stride", "avg_pool1d", k), p = per_dim(padding, 1, "padding", "avg_pool1d", {0});
  Tensor y = avg_pool2d(x3.unsqueeze(2), {1, k[0]}, {1, s[0]}, {0, p[0]}, ceil_mode, count_include_pad)
                 .squeeze(2);
  return unbatched ? y.squeeze(0) : y;
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  bool unbatched = false;
  Tensor x3 = batched(x, 3, "adaptive_avg_pool1d", unbatched);
  Tensor y = adaptive_avg_pool2d(x3.unsqueeze(2), {1, output_size}).squeeze(2);
  return unbatched ? y.squeeze(0) : y;
}

Tensor max_pool3d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  IntList dilation, bool ceil_mode) {
  const char* fn = "max_pool3d";
  bool unbatched = false;
  Tensor x5 = batched(x, 5, fn, unbatched);
  Shape k = per_dim(kernel_size, 3, "kernel_size", fn, {}), s = per_dim(stride, 3, "stride", fn, k),
        p = per_dim(padding, 3, "padding", fn, {0}), d = per_dim(dilation, 3, "dilation", fn, {1});
  const int64_t depth = x5.size(2);
  const int64_t out = windows(depth, k[0], s[0], p[0], d[0], ceil_mode, fn);
  const int64_t reach = (out - 1) * s[0] + d[0] * (k[0] - 1) + 1;  // padded depth the windows read
  Tensor xp = pad_depth(x5, p[0], std::max<int64_t>(reach - depth - p[0], 0),
                        -std::numeric_limits<double>::infinity());
  Tensor m;
  for (int64_t tap = 0; tap < k[0]; ++tap) {
    Tensor t = tap_slices(xp, tap, out, s[0], d[0]);
    m = m.defined() ? maximum(m, t) : t;
  }
  Tensor y = volumes(max_pool2d(planes(m), {k[1], k[2]}, {s[1], s[2]}, {p[1], p[2]},
                                {d[1], d[2]}, ceil_mode),
                     x5.size(1));
  return unbatched ? y.squeeze(0) : y;
}

Tensor avg_pool3d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  const char* fn = "avg_pool3d";
  bool unbatched = false;
  Tensor x5 = batched(x, 5, fn, unbatched);
  Shape k = per_dim(kernel_size, 3, "kernel_size", fn, {}), s = per_dim(stride, 3, "stride", fn, k),
        p = per_dim(padding, 3, "padding", fn, {0});
  KILN_CHECK(!divisor_override || *divisor_override != 0,
             "[avg_pool3d] divisor_override must not be 0. Fix: pass a positive divisor.");
  const int64_t depth = x5.size(2);
  const int64_t out = windows(depth, k[0], s[0], p[0], 1, ceil_mode, fn);
  const int64_t reach = (out - 1) * s[0] + k[0];
  Tensor xp = pad_depth(x5, p[0], std::max<int64_t>(reach - depth - p[0], 0), 0.0);
  Tensor sum;
  for (int64_t tap = 0; tap < k[0]; ++tap) {
    Tensor t = tap_slices(xp, tap, out, s[0], 1);
    sum = sum.defined() ? sum + t : t;
  }
  if (!divisor_override) {
    // Each output depth's share of the divisor: its window clipped to the padded input (or,
    // without count_include_pad, to the input itself).
    std::vector<double> counts;
    for (int64_t o = 0; o < out; ++o) {
      int64_t start = o * s[0] - p[0], end = std::min(start + k[0], depth + p[0]);
      if (!count_include_pad) start = std::max<int64_t>(start, 0), end = std::min(end, depth);
      counts.push_back(static_cast<double>(end - start));
    }
    Tensor divisor = Tensor::from_vector(counts, {1, 1, out, 1, 1}).to(sum.dtype()).to(sum.device());
    sum = sum / divisor;
  }
  Tensor y = volumes(avg_pool2d(planes(sum), {k[1], k[2]}, {s[1], s[2]}, {p[1], p[2]}, ceil_mode,
                                count_include_pad, divisor_override),
                     x5.size(1));
  return unbatched ? y.squeeze(0) : y;
}

Tensor adaptive_max_pool2d(const Tensor& x, IntList output_size) {
  bool unbatched = false;
  Tensor x4 = batched(x, 4, "adaptive_max_pool2d", unbatched);
  Shape out = per_dim(output_size, 2, "output_size", "adaptive_max_pool2d", {});
  Tensor y = x4;
  for (int64_t dim : {2, 3}) {
    const int64_t in = y.size(dim);
    int64_t n = out[static_cast<size_t>(dim - 2)];
    if (n == -1) n = in;  // PyTorch's None: keep the input size
    KILN_CHECK(n > 0, "[adaptive_max_pool2d] expected positive output sizes, got ",
               shape_str(output_size), ". Fix: pass sizes >= 1 (or -1 to keep a dim).");
    std::vector<Tensor> cells;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t start = i * in / n, end = ((i + 1) * in + n - 1) / n;
      cells.push_back(amax(slice(y, dim, start, end), {dim}, /*keepdim=*/true));
    }
    y = cat(cells, dim);
  }
  return unbatched ? y.squeeze(0) : y;
}

Tensor max_unpool2d(const Tensor& x, const Tensor& indices, IntList kernel_size, IntList stride,
                    IntList padding, IntList output_size) {
  const char* fn = "max_unpool2d";
  bool unbatched = false;
  Tensor x4 = batched(x, 4, fn, unbatched);
  KILN_CHECK(indices.defined() && Shape(indices.sizes()) == Shape(x.sizes()) &&
                 indices.dtype() == kInt64,
             "[max_unpool2d] expected int64 indices of the input's shape ", shape_str(x.sizes()),
             ", got ", indices.defined() ? indices.type_str() : "undefined",
             ". Fix: pass the indices max_pool2d_with_indices returned with these values.");
  Tensor idx = unbatched ? indices.unsqueeze(0) : indices;
  Shape k = per_dim(kernel_size, 2, "kernel_size", fn, {}), s = per_dim(stride, 2, "stride", fn, k),
        p = per_dim(padding, 2, "padding", fn, {0});
  int64_t h = (x4.size(2) - 1) * s[0] - 2 * p[0] + k[0], w = (x4.size(3) - 1) * s[1] - 2 * p[1] + k[1];
  if (!output_size.empty()) {
    KILN_CHECK(output_size.size() >= 2, "[max_unpool2d] output_size needs (H, W), got ",
               shape_str(output_size), ". Fix: pass the pooled input's size.");
    h = output_size[output_size.size() - 2], w = output_size[output_size.size() - 1];
  }
  const int64_t n = x4.size(0), c = x4.size(1);
  Tensor flat = zeros({n, c, h * w}, TensorOptions(x.dtype()).with_device(x.device()));
  Tensor y = scatter_add(flat, 2, idx.reshape({n, c, -1}), x4.reshape({n, c, -1})).reshape({n, c, h, w});
  return unbatched ? y.squeeze(0) : y;
}

}  // namespace kiln::nn::functional
