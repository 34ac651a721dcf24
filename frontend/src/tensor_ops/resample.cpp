// pixel_shuffle, pixel_unshuffle and interpolate, composed from views and index_select (so
// their gradients are index_add's, and they run on every device). interpolate works one
// spatial dim at a time: nearest is one index_select per dim; the linear modes blend two
// index_selects per dim with weights computed on the host, which is exactly separable (the
// bilinear weight of a corner is the product of the two linear ones).
#include <cmath>

#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/layout.h"

namespace kiln::nn::functional {

namespace {

// x as [B, C, H, W] with B the product of x's leading dims (at least 3 dims).
Shape leading(const Tensor& x, int64_t keep) {
  return Shape(x.sizes().begin(), x.sizes().end() - keep);
}

void check_factor(const Tensor& x, int64_t factor, const char* op, const char* name) {
  KILN_CHECK(x.defined(), "[", op, "] the input is undefined.");
  KILN_CHECK(factor > 0, "[", op, "] expected a positive ", name, ", got ", factor, ".");
  KILN_CHECK(x.dim() >= 3, "[", op, "] expected an input [*, C, H, W], got ", x.type_str(), ".");
}

}  // namespace

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  check_factor(x, r, "pixel_shuffle", "upscale_factor");
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(c % (r * r) == 0, "[pixel_shuffle] expected the channel count ", c, " of ", x.type_str(),
             " to divide by upscale_factor^2 = ", r * r, ". Fix: use a channel count that is a multiple of ", r * r,
             ".");
  const Shape lead = leading(x, 3);
  int64_t batch = 1;
  for (int64_t s : lead) batch *= s;
  Tensor y = x.reshape({batch, c / (r * r), r, r, h, w}).permute({0, 1, 4, 2, 5, 3});
  Shape out = lead;
  for (int64_t s : {c / (r * r), h * r, w * r}) out.push_back(s);
  return y.reshape(out);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  check_factor(x, r, "pixel_unshuffle", "downscale_factor");
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(h % r == 0 && w % r == 0, "[pixel_unshuffle] expected height and width of ", x.type_str(),
             " to divide by downscale_factor ", r, ". Fix: crop or pad them to multiples of ", r, ".");
  const Shape lead = leading(x, 3);
  int64_t batch = 1;
  for (int64_t s : lead) batch *= s;
  Tensor y = x.reshape({batch, c, h / r, r, w / r, r}).permute({0, 1, 3, 5, 2, 4});
  Shape out = lead;
  for (int64_t s : {c * r * r, h / r, w / r}) out.push_back(s);
  return y.reshape(out);
}

namespace {

Tensor index_tensor(const std::vector<int64_t>& v, const Tensor& like) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(like.device());
}

// PyTorch's area_pixel_compute_scale: the input step per output step.
double linear_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale_factor) {
  if (align_corners) return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  return scale_factor ? 1.0 / *scale_factor : static_cast<double>(in) / static_cast<double>(out);
}

Tensor nearest_along(const Tensor& x, int64_t dim, int64_t out, std::optional<double> scale_factor) {
  const int64_t in = x.size(dim);
  if (in == out) return x;
  // Single precision, as PyTorch's kernels compute it: floor(o * scale) can differ in the last
  // place from the double result exactly at integers.
  const float scale = scale_factor ? static_cast<float>(1.0 / *scale_factor)
                                   : static_cast<float>(in) / static_cast<float>(out);
  std::vector<int64_t> source(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o)
    source[static_cast<size_t>(o)] =
        std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
  return index_select(x, dim, index_tensor(source, x));
}

Tensor linear_along(const Tensor& x, int64_t dim, int64_t out, bool align_corners, std::optional<double> scale_factor) {
  const int64_t in = x.size(dim);
  const double scale = linear_scale(in, out, align_corners, scale_factor);
  std::vector<int64_t> lo(static_cast<size_t>(out)), hi(static_cast<size_t>(out));
  std::vector<double> weight(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    double source = align_corners ? static_cast<double>(o) * scale
                                  : std::max(0.0, (static_cast<double>(o) + 0.5) * scale - 0.5);
    const int64_t i0 = std::min(static_cast<int64_t>(source), in - 1);
    lo[static_cast<size_t>(o)] = i0;
    hi[static_cast<size_t>(o)] = std::min(i0 + 1, in - 1);
    weight[static_cast<size_t>(o)] = std::min(1.0, source - static_cast<double>(i0));
  }
  Shape weight_shape(static_cast<size_t>(x.dim()), 1);
  weight_shape[static_cast<size_t>(dim)] = out;
  const Tensor w = Tensor::from_vector(weight, weight_shape).to(x.dtype()).to(x.device());
  return index_select(x, dim, index_tensor(lo, x)) * (1 - w) + index_select(x, dim, index_tensor(hi, x)) * w;
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  KILN_CHECK(x.defined(), "[interpolate] the input is undefined.");
  const int64_t spatial = x.dim() - 2;
  KILN_CHECK(spatial >= 1 && spatial <= 3, "[interpolate] expected an input [N, C, *] with 1 to 3 spatial dims, got ",
             x.type_str(), ". Fix: add the batch and channel dims.");
  KILN_CHECK(o.size.empty() != o.scale_factor.empty(), "[interpolate] expected exactly one of size and scale_factor, "
             "got ", o.size.empty() ? "neither" : "both", ". Fix: pass .size = {H, W} or .scale_factor = {2}.");
  const size_t given = o.size.empty() ? o.scale_factor.size() : o.size.size();
  KILN_CHECK(given == 1 || given == static_cast<size_t>(spatial), "[interpolate] expected ", spatial,
             " values (one per spatial dim of ", x.type_str(), ") or one for all, got ", given, ".");
  const bool linear = o.mode == "linear" || o.mode == "bilinear" || o.mode == "trilinear";
  KILN_CHECK(o.mode == "nearest" || linear, "[interpolate] unknown mode \"", o.mode,
             "\". Fix: use \"nearest\", \"linear\", \"bilinear\" or \"trilinear\".");
  const int64_t wants = o.mode == "linear" ? 1 : o.mode == "bilinear" ? 2 : o.mode == "trilinear" ? 3 : spatial;
  KILN_CHECK(wants == spatial, "[interpolate] mode \"", o.mode, "\" takes ", wants + 2, "-D inputs, got ",
             x.type_str(), ". Fix: use \"", spatial == 1 ? "linear" : spatial == 2 ? "bilinear" : "trilinear",
             "\" for this input.");
  KILN_CHECK(linear || !o.align_corners, "[interpolate] align_corners applies to the linear modes only, not \"",
             o.mode, "\". Fix: leave it unset.");
  Tensor y = x;
  for (int64_t k = 0; k < spatial; ++k) {
    const size_t at = given == 1 ? 0 : static_cast<size_t>(k);
    const int64_t dim = 2 + k, in = x.size(dim);
    std::optional<double> scale;
    int64_t out = 0;
    if (o.size.empty()) {
      scale = o.scale_factor[at];
      KILN_CHECK(*scale > 0, "[interpolate] expected positive scale factors, got ", *scale, ".");
      out = static_cast<int64_t>(std::floor(static_cast<double>(in) * *scale));
    } else {
      out = o.size[at];
    }
    KILN_CHECK(out > 0, "[interpolate] the output size of spatial dim ", k, " would be ", out, " (input ",
               x.type_str(), "). Fix: pass a larger size or scale_factor.");
    y = linear ? linear_along(y, dim, out, o.align_corners.value_or(false), scale) : nearest_along(y, dim, out, scale);
  }
  return y;
}

}  // namespace kiln::nn::functional
