// kiln::nn::functional: the neural-network functions (softmax, losses, convolution,
// pooling, normalization, dropout, embedding, pad, one_hot, attention) with torch.nn.functional's
// argument names, defaults and numerics. Window parameters (kernel_size, stride, padding,
// dilation) take one value for both spatial dims or two (height, width).
//
//   namespace F = kiln::nn::functional;
//   auto loss = F::cross_entropy(logits, target, {.ignore_index = 0, .label_smoothing = 0.1});
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/generator.h"
#include "kiln/tensor.h"

namespace kiln::nn::functional {

// ---- softmax ----

// exp(x) / sum(exp(x)) along dim, computed stably; `dtype` casts x first.
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// log(softmax(x)) along dim without forming softmax (stable for large |x|).
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

// ---- activations beyond the elementwise ops (relu, gelu, silu, leaky_relu, elu, ...) ----

// log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (as PyTorch).
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
// x * tanh(softplus(x)).
Tensor mish(const Tensor& x);
// x * relu6(x + 3) / 6 and relu6(x + 3) / 6.
Tensor hardswish(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);
// The first half of x along dim times the sigmoid of the second half (dim's size is even).
Tensor glu(const Tensor& x, int64_t dim = -1);
// x where x >= 0, else weight * x; weight has one element, or one per channel (dim 1 of x,
// dim 0 for a 1-D x).
Tensor prelu(const Tensor& x, const Tensor& weight);

// ---- losses ----
// reduction: "mean" (default), "sum" or "none" (one loss per element).

struct NllLossOptions {
  Tensor weight{};              // [C] per-class weights; undefined: all 1
  int64_t ignore_index = -100;  // targets with this value add nothing (nor to the mean's divisor)
  std::string reduction = "mean";
};
// input [N, C] / [N, C, d1, ...] / [C] log-probabilities, target [N] / [N, d1, ...] / [] int64.
// "mean" divides by the summed weights of the non-ignored targets.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options = {});

struct CrossEntropyOptions {
  Tensor weight{};              // [C] per-class weights; undefined: all 1
  int64_t ignore_index = -100;  // class-index targets only
  std::string reduction = "mean";
  double label_smoothing = 0.0;  // in [0, 1]: mixes the target with the uniform distribution
};
// log_softmax over dim 1 (dim 0 for a [C] input) followed by nll_loss, with PyTorch's label
// smoothing. target: int64 class indices ([N] / [N, d1, ...]) or floating class
// probabilities of the input's shape.
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options = {});

// mean/sum of (input - target)^2; the shapes broadcast.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// mean/sum of |input - target|; the shapes broadcast.
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// -w (t log x + (1 - t) log(1 - x)) for probabilities x in [0, 1] (each log clamped at -100).
// weight broadcasts against the input.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const Tensor& weight = Tensor(), const std::string& reduction = "mean");
// The same loss on sigmoid(input), computed stably from the logits; pos_weight (e.g. [C])
// weighs the positive term.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = Tensor(),
                                        const std::string& reduction = "mean",
                                        const Tensor& pos_weight = Tensor());

// ---- dropout ----

// Training: zeroes each element with probability p and scales the others by 1 / (1 - p),
// drawing from `generator` (default_generator() when null). The backward reuses the same
// mask. Not training, or p = 0: returns x. p must lie in [0, 1].
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true,
               Generator* generator = nullptr);
// Channel dropout: zeroes whole channels (every element of x[n, c]) with probability p and
// scales the others by 1 / (1 - p). x is [N, C, L] or [C, L] (1d), [N, C, H, W] or [C, H, W]
// (2d), [N, C, D, H, W] or [C, D, H, W] (3d).
Tensor dropout1d(const Tensor& x, double p = 0.5, bool training = true, Generator* generator = nullptr);
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true, Generator* generator = nullptr);
Tensor dropout3d(const Tensor& x, double p = 0.5, bool training = true, Generator* generator = nullptr);

// ---- normalization ----

// Normalizes over the trailing normalized_shape dims: (x - mean) / sqrt(var + eps) * weight + bias.
Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// x [N, C] or [N, C, *], per channel C. training: normalizes with the batch statistics and,
// when running_mean/running_var are given, updates them in place (momentum, unbiased
// variance) without recording gradients. Not training: normalizes with the running stats.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);
// x [N, C, *]: the channels split into num_groups groups, each (sample, group) normalized over
// its channels and positions (biased variance); then weight and bias [C] per channel.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// x [N, C, *]: each (sample, channel) normalized over its positions. use_input_stats: with the
// input's statistics, and running_mean/running_var [C] (when given) updated in place with the
// batch average of the per-sample statistics (unbiased variance), as PyTorch does; otherwise
// with the running statistics.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = Tensor(), const Tensor& running_var = Tensor(),
                     const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
// x / sqrt(mean(x^2 over the trailing normalized_shape dims) + eps) * weight; eps defaults to
// the machine epsilon of x's dtype (torch.finfo(x.dtype).eps).
Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

// ---- embedding and one_hot ----

// Rows of weight [num_embeddings, D] at `input` (int64 indices of any shape) -> [*input, D].
// The padding_idx row (negative counts from the end) receives no gradient.
Tensor embedding(const Tensor& input, const Tensor& weight,
                 std::optional<int64_t> padding_idx = std::nullopt);
// int64 [*, num_classes]; num_classes = -1 uses max(indices) + 1.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
// nn::EmbeddingBag's computation: bags of rows of weight reduced by mode ("sum", "mean",
// "max"); a 2-D input is one bag per row (offsets undefined), a 1-D input needs offsets.
Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets = Tensor(),
                     const std::string& mode = "mean", const Tensor& per_sample_weights = Tensor(),
                     bool include_last_offset = false,
                     std::optional<int64_t> padding_idx = std::nullopt);

// ---- convolution and pooling ([N, C, H, W], or [C, H, W] without a batch) ----

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              IntList stride = {1}, IntList padding = {0}, IntList dilation = {1},
              int64_t groups = 1);
// conv2d's padding by name: "valid" (none) or "same" (output size = input size; stride 1).
// A distinct type, so that braced numbers such as {0} never convert to it.
struct PaddingMode {
  template <size_t N>
  PaddingMode(const char (&mode)[N]) : name(mode) {}
  static PaddingMode from(std::string_view mode) { return PaddingMode(mode, 0); }
  std::string_view name;

 private:
  PaddingMode(std::string_view mode, int) : name(mode) {}
};
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride,
              PaddingMode padding, IntList dilation = {1}, int64_t groups = 1);

// stride defaults (empty) to kernel_size.
Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0},
                  IntList dilation = {1}, bool ceil_mode = false);
// Also returns the argmax indices (flat h * W + w within each input plane, int64).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntList kernel_size,
                                                  IntList stride = {}, IntList padding = {0},
                                                  IntList dilation = {1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// output_size: one value or (OH, OW); -1 keeps that input dim (PyTorch's None).
Tensor adaptive_avg_pool2d(const Tensor& x, IntList output_size);

// ---- 1-D and 3-D convolution and pooling, transposed convolution ----
// [N, C, L] / [N, C, D, H, W] (or without N); window arguments take one value or one per
// spatial dim. Composed from the 2-D ops (src/tensor_ops/conv_nd.cpp, pool_nd.cpp).

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              IntList stride = {1}, IntList padding = {0}, IntList dilation = {1},
              int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              IntList stride = {1}, IntList padding = {0}, IntList dilation = {1},
              int64_t groups = 1);
// weight [in_channels, out_channels / groups, *kernel]; output size per dim
// (in - 1) stride - 2 padding + dilation (kernel - 1) + output_padding + 1, with
// 0 <= output_padding < stride. PyTorch's argument order.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntList stride = {1}, IntList padding = {0}, IntList output_padding = {0},
                        int64_t groups = 1, IntList dilation = {1});
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntList stride = {1}, IntList padding = {0}, IntList output_padding = {0},
                        int64_t groups = 1, IntList dilation = {1});
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntList stride = {1}, IntList padding = {0}, IntList output_padding = {0},
                        int64_t groups = 1, IntList dilation = {1});

Tensor max_pool1d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0},
                  IntList dilation = {1}, bool ceil_mode = false);
Tensor max_pool3d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0},
                  IntList dilation = {1}, bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool3d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);
// The maxima only (no indices); output_size: one value or (OH, OW), -1 keeps that dim.
Tensor adaptive_max_pool2d(const Tensor& x, IntList output_size);
// The inverse of max_pool2d_with_indices: each value at its argmax, zeros elsewhere. The
// output is [N, C, (H - 1) stride - 2 padding + kernel, ...] unless output_size gives (H, W).
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, IntList kernel_size,
                    IntList stride = {}, IntList padding = {0}, IntList output_size = {});

// ---- resampling ----

// [*, C * r^2, H, W] -> [*, C, H * r, W * r]: each group of r^2 channels becomes an r x r patch.
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
// The inverse: [*, C, H * r, W * r] -> [*, C * r^2, H, W].
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);

struct InterpolateOptions {
  std::vector<int64_t> size;         // the output's spatial size: one per spatial dim, or one for all
  std::vector<double> scale_factor;  // or a scale: one per spatial dim, or one for all
  std::string mode = "nearest";      // "nearest", "linear" (3-D x), "bilinear" (4-D), "trilinear" (5-D)
  std::optional<bool> align_corners;  // linear modes only; false when unset
};
// Resizes the spatial dims of x [N, C, *] (1 to 3 of them) as torch.nn.functional.interpolate
// does: "nearest" reads the input at floor(out * in / out_size) (1 / scale_factor when given);
// the linear modes weigh the two nearest inputs along each dim, at (out + 0.5) * scale - 0.5
// (clamped at 0), or at out * (in - 1) / (out_size - 1) with align_corners. Differentiable in x.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

// ---- padding ----

// pad lists (left, right) pairs from the last dim backwards: {1, 2} pads the last dim by 1
// before and 2 after; {1, 1, 2, 2} also pads the dim before it by 2. Negative amounts crop
// (constant mode). mode: "constant" (fill `value`), "reflect", "replicate", "circular".
Tensor pad(const Tensor& x, IntList pad, const std::string& mode = "constant", double value = 0);

// ---- attention ----

// softmax(query key^T * scale + mask) value, as torch.nn.functional.scaled_dot_product_attention:
// query [..., L, E], key [..., S, E], value [..., S, Ev] (batch dims broadcast) -> [..., L, Ev].
// attn_mask broadcasts to [..., L, S]; bool: true means "may attend" (the opposite of
// MultiheadAttention's masks); floating: added to the scores. is_causal: query i attends to
// keys 0..i (then attn_mask must be undefined). dropout_p drops attention weights (always, as
// in PyTorch: pass 0 at inference). scale defaults to 1 / sqrt(E). A query row whose keys are
// all masked gives zeros (PyTorch's safe softmax), with zero gradients.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace kiln::nn::functional
