// conv1d, conv3d and the transposed convolutions, composed from the 2-D table ops:
// - conv1d / conv_transpose1d: the 2-D op on a height-1 image.
// - conv_transpose2d: conv2d_input_grad itself (a transposed convolution is the adjoint of a
//   convolution), with the output size widened by output_padding. Its vjps are conv2d and
//   conv2d_weight_grad, so it differentiates (twice) like conv2d.
// - conv3d: one conv2d per kernel depth tap, over the depth slices that tap reads (strided),
//   summed. The same multiply-adds as a direct 3-D kernel, in kernel-depth GEMM calls.
// - conv_transpose3d: one conv_transpose2d per kernel depth tap, each result spread out in
//   depth by the stride and shifted by the tap's dilation offset, summed, then cropped.
#include "../call.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/conv.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/view.h"

namespace kiln::nn::functional {
namespace {

// One value for every spatial dim, or one per dim; empty gives `fallback`.
Shape per_dim(IntList v, size_t dims, const char* name, const char* fn, int64_t fallback) {
  if (v.empty()) return Shape(std::vector<int64_t>(dims, fallback));
  KILN_CHECK(v.size() == 1 || v.size() == dims, "[", fn, "] ", name, " takes one value or ", dims,
             " (one per spatial dim), got ", shape_str(v), ". Fix: pass e.g. 2 or {",
             dims == 1 ? "2" : dims == 2 ? "2, 1" : "2, 1, 1", "}.");
  return v.size() == 1 ? Shape(std::vector<int64_t>(dims, v[0])) : Shape(v);
}

// x with a batch dim ([N, C, *spatial]); unbatched tells the caller to drop it again.
Tensor batched(const Tensor& x, size_t spatial, const char* fn, bool& unbatched) {
  KILN_CHECK(x.defined(), "[", fn, "] the input is undefined.");
  const int64_t rank = static_cast<int64_t>(spatial) + 2;
  KILN_CHECK(x.dim() == rank || x.dim() == rank - 1, "[", fn, "] expected a ", rank, "-D [N, C, ",
             spatial == 1 ? "L" : "D, H, W", "] or ", rank - 1, "-D unbatched input, got ",
             x.type_str(), ". Fix: reshape the input.");
  unbatched = x.dim() == rank - 1;
  return unbatched ? x.unsqueeze(0) : x;
}

void check_weight(const Tensor& w, size_t spatial, const char* fn, const char* layout) {
  KILN_CHECK(w.defined() && w.dim() == static_cast<int64_t>(spatial) + 2, "[", fn,
             "] expected a ", spatial + 2, "-D weight ", layout, ", got ",
             w.defined() ? w.type_str() : "undefined", ".");
}

Tensor add_bias(const Tensor& y, const Tensor& bias) {
  if (!bias.defined()) return y;
  std::vector<int64_t> shape(static_cast<size_t>(y.dim()), 1);
  shape[1] = bias.numel();
  return y + bias.reshape(shape);
}

// [N, C, D, R...] -> [N * D, C, R...] and back.
Tensor depth_into_batch(const Tensor& x) {
  std::vector<int64_t> rest(x.sizes().begin() + 3, x.sizes().end());
  std::vector<int64_t> shape{x.size(0) * x.size(2), x.size(1)};
  shape.insert(shape.end(), rest.begin(), rest.end());
  return x.transpose(1, 2).reshape(shape);
}
Tensor depth_out_of_batch(const Tensor& y, int64_t batch) {
  std::vector<int64_t> shape{batch, y.size(0) / batch};
  shape.insert(shape.end(), y.sizes().begin() + 1, y.sizes().end());
  return y.reshape(shape).transpose(1, 2);
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride,
              IntList padding, IntList dilation, int64_t groups) {
  bool unbatched = false;
  Tensor x3 = batched(x, 1, "conv1d", unbatched);
  check_weight(weight, 1, "conv1d", "[out_channels, in_channels / groups, kernel]");
  Shape s = per_dim(stride, 1, "stride", "conv1d", 1), p = per_dim(padding, 1, "padding", "conv1d", 0),
        d = per_dim(dilation, 1, "dilation", "conv1d", 1);
  const Shape stride2{1, s[0]}, padding2{0, p[0]}, dilation2{1, d[0]};
  Tensor y = conv2d(x3.unsqueeze(2), weight.unsqueeze(2), bias, stride2, padding2, dilation2,
                    groups)
                 .squeeze(2);
  return unbatched ? y.squeeze(0) : y;
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride,
              IntList padding, IntList dilation, int64_t groups) {
  bool unbatched = false;
  Tensor x5 = batched(x, 3, "conv3d", unbatched);
  check_weight(weight, 3, "conv3d", "[out_channels, in_channels / groups, kd, kh, kw]");
  Shape s = per_dim(stride, 3, "stride", "conv3d", 1), p = per_dim(padding, 3, "padding", "conv3d", 0),
        d = per_dim(dilation, 3, "dilation", "conv3d", 1);
  KILN_CHECK(x5.size(1) == weight.size(1) * groups, "[conv3d] expected ", weight.size(1) * groups,
             " input channels (weight ", weight.type_str(), ", groups ", groups, "), got ",
             x.type_str(), ". Fix: match the weight's in_channels / groups.");
  const int64_t kd = weight.size(2);
  Tensor xp = p[0] > 0 ? pad(x5, {0, 0, 0, 0, p[0], p[0]}) : x5;
  const int64_t depth = (xp.size(2) - d[0] * (kd - 1) - 1) / s[0] + 1;
  KILN_CHECK(xp.size(2) - d[0] * (kd - 1) - 1 >= 0, "[conv3d] the input depth ", x5.size(2),
             " (padded ", xp.size(2), ") is smaller than the kernel's reach ", d[0] * (kd - 1) + 1,
             ". Fix: pad the input or use a smaller kernel.");
  Tensor sum;
  for (int64_t tap = 0; tap < kd; ++tap) {
    // The depth slices this tap reads for output depths 0, 1, ...: tap * dilation + o * stride.
    Tensor slab = slice(xp, 2, tap * d[0], tap * d[0] + (depth - 1) * s[0] + 1, s[0]);
    const Shape stride2{s[1], s[2]}, padding2{p[1], p[2]}, dilation2{d[1], d[2]};
    Tensor y = conv2d(depth_into_batch(slab), weight.select(2, tap), Tensor(), stride2, padding2,
                      dilation2, groups);
    sum = sum.defined() ? sum + y : y;
  }
  Tensor y = add_bias(depth_out_of_batch(sum, x5.size(0)), bias);
  return unbatched ? y.squeeze(0) : y;
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        IntList stride, IntList padding, IntList output_padding, int64_t groups,
                        IntList dilation) {
  bool unbatched = false;
  Tensor x4 = batched(x, 2, "conv_transpose2d", unbatched);
  check_weight(weight, 2, "conv_transpose2d", "[in_channels, out_channels / groups, kh, kw]");
  Shape s = per_dim(stride, 2, "stride", "conv_transpose2d", 1),
        p = per_dim(padding, 2, "padding", "conv_transpose2d", 0),
        op = per_dim(output_padding, 2, "output_padding", "conv_transpose2d", 0),
        d = per_dim(dilation, 2, "dilation", "conv_transpose2d", 1);
  KILN_CHECK(groups > 0 && x4.size(1) == weight.size(0) && weight.size(0) % groups == 0,
             "[conv_transpose2d] expected ", weight.size(0), " input channels (the weight ",
             weight.type_str(), " is [in_channels, out_channels / groups, kh, kw], groups ", groups,
             "), got ", x.type_str(), ". Fix: match the weight's first dim.");
  std::vector<int64_t> size{x4.size(0), weight.size(1) * groups, 0, 0};
  for (size_t i = 0; i < 2; ++i) {
    KILN_CHECK(op[i] >= 0 && op[i] < s[i], "[conv_transpose2d] expected output_padding below the "
               "stride in every dim, got output_padding ", shape_str(op), " with stride ",
               shape_str(s), ". Fix: output_padding only picks among the output sizes a stride "
               "allows, so use 0 <= output_padding < stride.");
    size[2 + i] = (x4.size(static_cast<int64_t>(2 + i)) - 1) * s[i] - 2 * p[i] +
                  d[i] * (weight.size(static_cast<int64_t>(2 + i)) - 1) + op[i] + 1;
    KILN_CHECK(size[2 + i] > 0, "[conv_transpose2d] the output would have size ", size[2 + i],
               " in spatial dim ", i, " (input ", x.type_str(), ", padding ", shape_str(p),
               "). Fix: use less padding.");
  }
  ops::Conv2dGradAttrs a;
  a.stride = s, a.padding = p, a.dilation = d, a.groups = groups, a.size = Shape(size);
  Tensor y = add_bias(kiln::detail::call1(ops::conv2d_input_grad, {x4, weight}, a), bias);
  return unbatched ? y.squeeze(0) : y;
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        IntList stride, IntList padding, IntList output_padding, int64_t groups,
                        IntList dilation) {
  bool unbatched = false;
  Tensor x3 = batched(x, 1, "conv_transpose1d", unbatched);
  check_weight(weight, 1, "conv_transpose1d", "[in_channels, out_channels / groups, kernel]");
  const char* fn = "conv_transpose1d";
  Shape s = per_dim(stride, 1, "stride", fn, 1), p = per_dim(padding, 1, "padding", fn, 0),
        op = per_dim(output_padding, 1, "output_padding", fn, 0),
        d = per_dim(dilation, 1, "dilation", fn, 1);
  Tensor y = conv_transpose2d(x3.unsqueeze(2), weight.unsqueeze(2), bias, {1, s[0]}, {0, p[0]},
                              {0, op[0]}, groups, {1, d[0]})
                 .squeeze(2);
  return unbatched ? y.squeeze(0) : y;
}

Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        IntList stride, IntList padding, IntList output_padding, int64_t groups,
                        IntList dilation) {
  bool unbatched = false;
  const char* fn = "conv_transpose3d";
  Tensor x5 = batched(x, 3, fn, unbatched);
  check_weight(weight, 3, fn, "[in_channels, out_channels / groups, kd, kh, kw]");
  Shape s = per_dim(stride, 3, "stride", fn, 1), p = per_dim(padding, 3, "padding", fn, 0),
        op = per_dim(output_padding, 3, "output_padding", fn, 0),
        d = per_dim(dilation, 3, "dilation", fn, 1);
  KILN_CHECK(op[0] >= 0 && op[0] < s[0], "[conv_transpose3d] expected output_padding below the "
             "stride in every dim, got output_padding ", shape_str(op), " with stride ",
             shape_str(s), ". Fix: use 0 <= output_padding < stride.");
  const int64_t batch = x5.size(0), depth = x5.size(2), kd = weight.size(2);
  // Every tap's contribution before cropping the padding: depth (D - 1) s + d (kd - 1) + 1,
  // plus output_padding at the end.
  const int64_t full = (depth - 1) * s[0] + d[0] * (kd - 1) + 1 + op[0];
  const int64_t out_depth = full - 2 * p[0];
  KILN_CHECK(out_depth > 0, "[conv_transpose3d] the output would have depth ", out_depth,
             " (input ", x.type_str(), ", padding ", shape_str(p), "). Fix: use less padding.");
  Tensor planes = depth_into_batch(x5);  // [N * D, C, H, W]
  Tensor sum;
  for (int64_t tap = 0; tap < kd; ++tap) {
    // [N, OC, D, OH, OW]: input depth i lands at output depth i * stride + tap * dilation.
    Tensor y = depth_out_of_batch(
        conv_transpose2d(planes, weight.select(2, tap), Tensor(), {s[1], s[2]}, {p[1], p[2]},
                         {op[1], op[2]}, groups, {d[1], d[2]}),
        batch);
    if (s[0] > 1) {  // spread out: stride - 1 zero planes after each input plane
      std::vector<int64_t> shape(y.sizes().begin(), y.sizes().end());
      shape.insert(shape.begin() + 3, 1);
      Tensor one = y.reshape(shape);
      shape[3] = s[0] - 1;
      Tensor gaps = zeros(shape, TensorOptions(y.dtype()).with_device(y.device()));
      std::vector<int64_t> spread(y.sizes().begin(), y.sizes().end());
      spread[2] = depth * s[0];
      y = slice(cat({one, gaps}, 3).reshape(spread), 2, 0, (depth - 1) * s[0] + 1);
    }
    const int64_t before = tap * d[0];
    y = pad(y.transpose(2, 4), {before, full - before - y.size(2)}).transpose(2, 4);
    sum = sum.defined() ? sum + y : y;
  }
  Tensor y = add_bias(slice(sum, 2, p[0], p[0] + out_depth), bias);
  return unbatched ? y.squeeze(0) : y;
}

}  // namespace kiln::nn::functional
