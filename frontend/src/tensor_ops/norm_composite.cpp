// group_norm, instance_norm and rms_norm: normalizations composed from table ops (mean, var,
// rsqrt and broadcasting arithmetic), so they run on every device, differentiate through their
// parts, and fuse under compile into reductions with elementwise epilogues.
#include <limits>

#include "kiln/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/reduction.h"

namespace kiln::nn::functional {

namespace {

// [C] -> [1, C, 1, ...] against x's rank, for per-channel parameters and statistics.
Tensor per_channel(const Tensor& t, const Tensor& x) {
  Shape shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return t.reshape(shape);
}

void check_channels(const Tensor& x, const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) return;
  KILN_CHECK(t.dim() == 1 && t.size(0) == x.size(1), "[", op, "] expected ", what, " of shape [", x.size(1),
             "] (one per channel of ", x.type_str(), "), got ", t.type_str(), ". Fix: build it with num_channels = ",
             x.size(1), ".");
}

Tensor affine(Tensor y, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.defined()) y = y * per_channel(weight, x);
  if (bias.defined()) y = y + per_channel(bias, x);
  return y;
}

// The dims after the channel dim.
Shape positions(const Tensor& x) {
  Shape dims;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

}  // namespace

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  KILN_CHECK(x.defined(), "[group_norm] the input is undefined.");
  KILN_CHECK(x.dim() >= 2, "[group_norm] expected an input [N, C, *], got ", x.type_str(),
             ". Fix: add the batch dim (x.unsqueeze(0)).");
  KILN_CHECK(num_groups > 0 && x.size(1) % num_groups == 0, "[group_norm] expected num_groups to divide the ",
             x.size(1), " channels of ", x.type_str(), ", got num_groups = ", num_groups,
             ". Fix: pick a divisor of the channel count.");
  check_channels(x, weight, "group_norm", "weight");
  check_channels(x, bias, "group_norm", "bias");
  const Tensor grouped = x.reshape({x.size(0), num_groups, -1});
  const Tensor mean = grouped.mean({2}, true);
  const Tensor var = grouped.var({2}, /*correction=*/0, true);
  const Tensor y = ((grouped - mean) * rsqrt(var + eps)).reshape(x.sizes());
  return affine(y, x, weight, bias);
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  KILN_CHECK(x.defined(), "[instance_norm] the input is undefined.");
  KILN_CHECK(x.dim() >= 3, "[instance_norm] expected an input [N, C, *] with at least one position dim, got ",
             x.type_str(), ". Fix: add the batch dim (x.unsqueeze(0)).");
  for (const auto& [t, what] : {std::pair{&running_mean, "running_mean"}, {&running_var, "running_var"},
                                {&weight, "weight"}, {&bias, "bias"}})
    check_channels(x, *t, "instance_norm", what);
  KILN_CHECK(running_mean.defined() == running_var.defined(), "[instance_norm] got one running statistic without "
             "the other. Fix: pass both running_mean and running_var, or neither.");
  const Shape dims = positions(x);
  if (!use_input_stats) {
    KILN_CHECK(running_mean.defined(), "[instance_norm] use_input_stats = false needs running_mean and running_var. "
               "Fix: pass them (track_running_stats = true), or normalize with the input's statistics.");
    return affine((x - per_channel(running_mean, x)) * rsqrt(per_channel(running_var, x) + eps), x, weight, bias);
  }
  const Tensor mean = x.mean(dims, true);
  const Tensor var = x.var(dims, /*correction=*/0, true);
  if (running_mean.defined()) {
    // As PyTorch (batch_norm over [1, N * C, *]): each running statistic moves toward the
    // batch average of the per-sample ones, the variance unbiased.
    NoGradGuard no_grad;
    int64_t count = 1;
    for (int64_t d : dims) count *= x.size(d);
    const double unbias = count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
    Tensor mean_buffer = running_mean, var_buffer = running_var;
    mean_buffer.copy_(running_mean * (1 - momentum) + mean.detach().reshape({x.size(0), x.size(1)}).mean({0}) * momentum);
    var_buffer.copy_(running_var * (1 - momentum) +
                     var.detach().reshape({x.size(0), x.size(1)}).mean({0}) * (momentum * unbias));
  }
  return affine((x - mean) * rsqrt(var + eps), x, weight, bias);
}

Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight, std::optional<double> eps) {
  KILN_CHECK(x.defined(), "[rms_norm] the input is undefined.");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool matches = k >= 1 && k <= x.dim();
  for (int64_t i = 0; matches && i < k; ++i) matches = x.size(x.dim() - k + i) == normalized_shape[static_cast<size_t>(i)];
  KILN_CHECK(matches, "[rms_norm] expected the input's trailing dims to be normalized_shape ",
             shape_str(normalized_shape), ", got ", x.type_str(), ". Fix: build RMSNorm with the input's last dims.");
  if (weight.defined())
    KILN_CHECK(Shape(weight.sizes()) == Shape(normalized_shape), "[rms_norm] expected a weight of shape ",
               shape_str(normalized_shape), ", got ", weight.type_str(), ".");
  Shape dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  const double epsilon = eps ? *eps
                             : x.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                     : static_cast<double>(std::numeric_limits<float>::epsilon());
  Tensor y = x * rsqrt((x * x).mean(dims, true) + epsilon);
  return weight.defined() ? y * weight : y;
}

}  // namespace kiln::nn::functional
