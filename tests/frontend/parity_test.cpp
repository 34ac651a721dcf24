// Numerical parity with PyTorch: each tests/data/parity/<case>.safetensors (written by
// tests/data/parity/make_parity.py) holds a PyTorch module's state dict, inputs, outputs, the
// weights of a fixed scalar loss and its gradients. The kiln module loads the state dict by
// PyTorch's key names, runs forward and backward in float32, and every output, gradient and
// updated buffer must match to 1e-5 (max abs error).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/nn/layers/batch_norm.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers/conv.h"
#include "kiln/nn/layers/embedding.h"
#include "kiln/nn/layers/pooling.h"
#include "kiln/nn/layers/layer_norm.h"
#include "kiln/nn/layers/linear.h"
#include "kiln/nn/layers/multihead_attention.h"
#include "kiln/nn/layers/normalization.h"
#include "kiln/nn/layers/padding.h"
#include "kiln/nn/layers/recurrent.h"
#include "kiln/nn/layers/resample.h"
#include "kiln/nn/layers/transformer.h"
#include "kiln/nn/module.h"
#include "kiln/serialize/safetensors.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln {
namespace {

constexpr double kTolerance = 1e-5;

std::string parity_file(const std::string& name) {
  const char* dir = std::getenv("KILN_TEST_DATA");
  return std::string(dir ? dir : "tests/data") + "/parity/" + name + ".safetensors";
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The largest |a - b|, relative to |b| where |b| > 1 (float32 keeps about 7 digits, so a
// gradient of 20 cannot match to 1e-5 absolute); infinity when the shapes differ.
double max_abs_error(const Tensor& got, const Tensor& want) {
  if (Shape(got.sizes()) != Shape(want.sizes())) return INFINITY;
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double err = 0;
  for (size_t i = 0; i < g.size(); ++i) err = std::max(err, std::abs(g[i] - w[i]) / std::max(1.0, std::abs(w[i])));
  return err;
}

using Inputs = std::map<std::string, Tensor>;
using Outputs = std::vector<std::pair<std::string, Tensor>>;

// Loads `name`, copies its param.* entries into `module` by key, runs `forward` on its input.*
// tensors, backpropagates sum(output * loss_weight) and compares everything.
void check_parity(const std::string& name, nn::Module& module,
                  const std::function<Outputs(const Inputs&)>& forward) {
  SafetensorsFile file = load_safetensors(parity_file(name));
  auto want = [&](const std::string& key) -> const Tensor& {
    const Tensor* t = file.find(key);
    if (t == nullptr) throw std::runtime_error(name + " has no tensor " + key);
    return *t;
  };
  nn::NamedTensors state;
  Inputs inputs;
  for (const auto& [key, t] : file.tensors) {
    if (starts_with(key, "param.")) state.emplace_back(key.substr(6), t);
    if (starts_with(key, "input.")) {
      Tensor in = t.clone();
      if (file.find("grad." + key) != nullptr) in.requires_grad_(true);
      inputs.emplace(key.substr(6), in);
    }
  }
  module.load_state_dict(state, /*strict=*/true);

  double out_err = 0, grad_err = 0, buffer_err = 0;
  bool has_buffers = false;
  auto check = [&](const std::string& what, const Tensor& got, const Tensor& expected,
                   double& worst) {
    ASSERT_TRUE(got.defined()) << name << ": kiln has no " << what;
    double err = max_abs_error(got, expected);
    EXPECT_LE(err, kTolerance) << name << ": " << what << " " << got.type_str() << " vs PyTorch "
                               << expected.type_str();
    worst = std::max(worst, err);
  };
  Outputs outputs = forward(inputs);
  Tensor loss;
  for (const auto& [key, out] : outputs) {
    check("output " + key, out, want("output." + key), out_err);
    Tensor term = (out * want("loss_weight." + key)).sum();
    loss = loss.defined() ? loss + term : term;
  }
  loss.backward();

  std::map<std::string, Tensor> params, buffers;
  for (auto& [key, p] : module.named_parameters()) params.emplace(key, p);
  for (auto& [key, b] : module.named_buffers()) buffers.emplace(key, b);
  size_t param_grads = 0;
  for (const auto& [key, t] : file.tensors) {
    if (starts_with(key, "grad.input.")) {
      check("gradient of input " + key.substr(11), inputs.at(key.substr(11)).grad(), t, grad_err);
    } else if (starts_with(key, "grad.param.")) {
      ++param_grads;
      auto it = params.find(key.substr(11));
      ASSERT_NE(it, params.end()) << name << ": kiln has no parameter " << key.substr(11);
      check("gradient of " + key.substr(11), it->second.grad(), t, grad_err);
    } else if (starts_with(key, "buffer_after.")) {
      has_buffers = true;
      auto it = buffers.find(key.substr(13));
      ASSERT_NE(it, buffers.end()) << name << ": kiln has no buffer " << key.substr(13);
      check("buffer " + key.substr(13), it->second, t, buffer_err);
    }
  }
  EXPECT_EQ(param_grads, params.size()) << name << ": every parameter's gradient is checked";
  std::cout << "[parity] " << name << ": max abs error output " << out_err << ", gradients "
            << grad_err;
  if (has_buffers) std::cout << ", updated buffers " << buffer_err;
  std::cout << "\n";
}

Outputs single(nn::Module& m, const Inputs& in) {
  return {{"y", m(in.at("x"))}};
}

TEST(Parity, Linear) {
  nn::Linear fc(5, 3);
  check_parity("linear", fc, [&](const Inputs& in) { return single(fc, in); });
}

TEST(Parity, Conv2dStridePadding) {
  nn::Conv2d conv(3, 4, {3, 2}, {.stride = {2, 1}, .padding = {1, 1}});
  check_parity("conv2d", conv, [&](const Inputs& in) { return single(conv, in); });
}

TEST(Parity, BatchNorm2dTrainUpdatesRunningStats) {
  nn::BatchNorm2d bn(3);
  check_parity("batchnorm2d_train", bn, [&](const Inputs& in) { return single(bn, in); });
}

TEST(Parity, BatchNorm2dEval) {
  nn::BatchNorm2d bn(3);
  bn.eval();
  check_parity("batchnorm2d_eval", bn, [&](const Inputs& in) { return single(bn, in); });
}

TEST(Parity, LayerNorm) {
  nn::LayerNorm ln(std::vector<int64_t>{4, 5});
  check_parity("layernorm", ln, [&](const Inputs& in) { return single(ln, in); });
}

TEST(Parity, MultiheadAttentionKeyPadding) {
  nn::MultiheadAttention attn(8, 2);
  check_parity("mha_padding", attn, [&](const Inputs& in) {
    auto [out, weights] =
        nn::call(attn, in.at("query"), in.at("key"), in.at("value"),
                 nn::MhaCallOptions{.key_padding_mask = in.at("key_padding_mask")});
    return Outputs{{"out", out}, {"weights", weights}};
  });
}

TEST(Parity, MultiheadAttentionCausalBatchFirst) {
  nn::MultiheadAttention attn(8, 2, {.batch_first = true});
  check_parity("mha_causal", attn, [&](const Inputs& in) {
    const Tensor& x = in.at("x");
    auto [out, weights] = nn::call(
        attn, x, x, x,
        nn::MhaCallOptions{.attn_mask = in.at("attn_mask"), .average_attn_weights = false});
    return Outputs{{"out", out}, {"weights", weights}};
  });
}

void check_encoder_layer(bool norm_first, nn::TransformerActivation activation) {
  nn::TransformerEncoderLayer layer(8, 2,
                                    {.dim_feedforward = 16,
                                     .dropout = 0.0,
                                     .activation = activation,
                                     .batch_first = true,
                                     .norm_first = norm_first});
  std::string name = std::string("encoder_layer_") + (norm_first ? "pre_" : "post_") +
                     nn::transformer_activation_name(activation);
  check_parity(name, layer, [&](const Inputs& in) {
    return Outputs{{"y", nn::call(layer, in.at("src"), in.at("src_mask"),
                                  in.at("src_key_padding_mask"), /*is_causal=*/true)}};
  });
}

TEST(Parity, TransformerEncoderLayerPostNormRelu) {
  check_encoder_layer(false, nn::TransformerActivation::ReLU);
}
TEST(Parity, TransformerEncoderLayerPostNormGelu) {
  check_encoder_layer(false, nn::TransformerActivation::GELU);
}
TEST(Parity, TransformerEncoderLayerPreNormRelu) {
  check_encoder_layer(true, nn::TransformerActivation::ReLU);
}
TEST(Parity, TransformerEncoderLayerPreNormGelu) {
  check_encoder_layer(true, nn::TransformerActivation::GELU);
}


// A single-input layer checked eagerly (check_parity) and compiled: a fresh layer with the
// file's state, compiled, gives PyTorch's output and input gradient.
template <class M>
void check_layer(const std::string& name, const std::function<std::shared_ptr<M>()>& make) {
  std::shared_ptr<M> eager = make();
  check_parity(name, *eager, [&](const Inputs& in) { return single(*eager, in); });

  SafetensorsFile file = load_safetensors(parity_file(name));
  std::shared_ptr<M> layer = make();
  nn::NamedTensors state;
  for (const auto& [key, t] : file.tensors)
    if (starts_with(key, "param.")) state.emplace_back(key.substr(6), t);
  layer->load_state_dict(state, /*strict=*/true);
  auto compiled = kiln::compile(layer);
  Tensor x = file.find("input.x")->clone().requires_grad_(true);
  Tensor y = compiled(x);
  EXPECT_LE(max_abs_error(y, *file.find("output.y")), kTolerance) << name << " compiled output";
  (y * *file.find("loss_weight.y")).sum().backward();
  EXPECT_LE(max_abs_error(x.grad(), *file.find("grad.input.x")), kTolerance) << name << " compiled input gradient";
}

TEST(Parity, GroupNorm) {
  check_layer<nn::GroupNorm>("groupnorm", [] { return std::make_shared<nn::GroupNorm>(2, 6); });
}

TEST(Parity, InstanceNorm2dTrainUpdatesRunningStats) {
  check_layer<nn::InstanceNorm2d>("instancenorm2d_train", [] {
    return std::make_shared<nn::InstanceNorm2d>(3, nn::InstanceNormOptions{.affine = true, .track_running_stats = true});
  });
}

TEST(Parity, InstanceNorm1dEvalUsesRunningStats) {
  check_layer<nn::InstanceNorm1d>("instancenorm1d_eval", [] {
    auto m = std::make_shared<nn::InstanceNorm1d>(3, nn::InstanceNormOptions{.affine = true, .track_running_stats = true});
    m->eval();
    return m;
  });
}

TEST(Parity, InstanceNorm1dWithoutAffineOrStats) {
  check_layer<nn::InstanceNorm1d>("instancenorm1d_plain", [] { return std::make_shared<nn::InstanceNorm1d>(3); });
}

TEST(Parity, RMSNorm) {
  check_layer<nn::RMSNorm>("rmsnorm", [] { return std::make_shared<nn::RMSNorm>(std::vector<int64_t>{4, 5}); });
}

TEST(Parity, PixelShuffleAndUnshuffle) {
  check_layer<nn::PixelShuffle>("pixel_shuffle", [] { return std::make_shared<nn::PixelShuffle>(2); });
  check_layer<nn::PixelUnshuffle>("pixel_unshuffle", [] { return std::make_shared<nn::PixelUnshuffle>(2); });
}

TEST(Parity, UpsampleNearest) {
  check_layer<nn::Upsample>("upsample_nearest_scale",
                            [] { return std::make_shared<nn::Upsample>(nn::UpsampleOptions{.scale_factor = {2}}); });
  check_layer<nn::Upsample>("upsample_nearest_size",
                            [] { return std::make_shared<nn::Upsample>(nn::UpsampleOptions{.size = {7, 9}}); });
}

TEST(Parity, UpsampleLinearModes) {
  check_layer<nn::Upsample>("upsample_bilinear", [] {
    return std::make_shared<nn::Upsample>(nn::UpsampleOptions{.size = {7, 9}, .mode = "bilinear"});
  });
  check_layer<nn::Upsample>("upsample_bilinear_corners", [] {
    return std::make_shared<nn::Upsample>(
        nn::UpsampleOptions{.scale_factor = {2}, .mode = "bilinear", .align_corners = true});
  });
  check_layer<nn::Upsample>("upsample_bilinear_down", [] {
    return std::make_shared<nn::Upsample>(nn::UpsampleOptions{.size = {3, 2}, .mode = "bilinear"});
  });
  check_layer<nn::Upsample>("upsample_linear_scale", [] {
    return std::make_shared<nn::Upsample>(nn::UpsampleOptions{.scale_factor = {2.5}, .mode = "linear"});
  });
}

TEST(Parity, PaddingLayers) {
  check_layer<nn::ReflectionPad2d>("reflection_pad2d", [] {
    return std::make_shared<nn::ReflectionPad2d>(std::vector<int64_t>{1, 2, 2, 0});
  });
  check_layer<nn::ReplicationPad1d>("replication_pad1d",
                                    [] { return std::make_shared<nn::ReplicationPad1d>(std::vector<int64_t>{3, 1}); });
  check_layer<nn::ConstantPad3d>("constant_pad3d", [] { return std::make_shared<nn::ConstantPad3d>(1, 0.5); });
}

// Recurrent layers, eagerly and compiled under fullgraph (one graph, a scan per layer and
// direction): the output sequence, the final state, the gradients of the input, the initial
// state and every parameter. The *_lengths files ran PyTorch on a packed padded batch.
template <class M>
void check_recurrent(const std::string& name, const std::function<std::shared_ptr<M>()>& make) {
  for (bool compiled : {false, true}) {
    std::shared_ptr<M> layer = make();
    auto graph = kiln::compile(layer, {.fullgraph = true});
    check_parity(name, *layer, [&](const Inputs& in) {
      Tensor lengths = in.count("lengths") ? in.at("lengths") : Tensor();
      if constexpr (std::is_same_v<M, nn::LSTM>) {
        auto [y, state] = compiled ? graph(in.at("x"), in.at("h0"), in.at("c0"), lengths)
                                   : nn::call(*layer, in.at("x"), in.at("h0"), in.at("c0"), lengths);
        return Outputs{{"y", y}, {"h_n", state.first}, {"c_n", state.second}};
      } else {
        auto [y, h] = compiled ? graph(in.at("x"), in.at("h0"), lengths)
                               : nn::call(*layer, in.at("x"), in.at("h0"), lengths);
        return Outputs{{"y", y}, {"h_n", h}};
      }
    });
  }
}

TEST(Parity, RNN) {
  check_recurrent<nn::RNN>("rnn_tanh_2layer", [] {
    return std::make_shared<nn::RNN>(4, 6, nn::RNNOptions{.num_layers = 2});
  });
  check_recurrent<nn::RNN>("rnn_relu_bidirectional_batch_first", [] {
    return std::make_shared<nn::RNN>(
        4, 5, nn::RNNOptions{.nonlinearity = "relu", .batch_first = true, .bidirectional = true});
  });
  check_recurrent<nn::RNN>("rnn_tanh_lengths", [] {
    return std::make_shared<nn::RNN>(3, 4, nn::RNNOptions{.bidirectional = true});
  });
}

TEST(Parity, LSTM) {
  check_recurrent<nn::LSTM>("lstm_2layer_bidirectional", [] {
    return std::make_shared<nn::LSTM>(4, 6, nn::RNNOptions{.num_layers = 2, .bidirectional = true});
  });
  check_recurrent<nn::LSTM>("lstm_2layer_bidirectional_lengths", [] {
    return std::make_shared<nn::LSTM>(
        4, 6, nn::RNNOptions{.num_layers = 2, .batch_first = true, .bidirectional = true});
  });
  check_recurrent<nn::LSTM>("lstm_no_bias", [] {
    return std::make_shared<nn::LSTM>(3, 4, nn::RNNOptions{.bias = false});
  });
}

TEST(Parity, GRU) {
  check_recurrent<nn::GRU>("gru_2layer_bidirectional_lengths", [] {
    return std::make_shared<nn::GRU>(4, 6, nn::RNNOptions{.num_layers = 2, .bidirectional = true});
  });
  check_recurrent<nn::GRU>("gru_batch_first", [] {
    return std::make_shared<nn::GRU>(4, 5, nn::RNNOptions{.batch_first = true});
  });
}

TEST(Parity, RecurrentCells) {
  nn::RNNCell rnn(4, 5, {.nonlinearity = "relu"});
  check_parity("rnn_cell", rnn, [&](const Inputs& in) {
    return Outputs{{"h", nn::call(rnn, in.at("x"), in.at("h0"))}};
  });
  nn::LSTMCell lstm(4, 5);
  check_parity("lstm_cell", lstm, [&](const Inputs& in) {
    auto [h, c] = nn::call(lstm, in.at("x"), in.at("h0"), in.at("c0"));
    return Outputs{{"h", h}, {"c", c}};
  });
  nn::GRUCell gru(4, 5);
  check_parity("gru_cell", gru, [&](const Inputs& in) {
    return Outputs{{"h", nn::call(gru, in.at("x"), in.at("h0"))}};
  });
}

TEST(Parity, Conv1dAndConv3d) {
  check_layer<nn::Conv1d>("conv1d", [] {
    return std::make_shared<nn::Conv1d>(3, 4, 3, nn::Conv1dOptions{.stride = 2, .padding = 1});
  });
  check_layer<nn::Conv1d>("conv1d_reflect_dilation", [] {
    return std::make_shared<nn::Conv1d>(
        3, 4, 3, nn::Conv1dOptions{.padding = 2, .dilation = 2, .padding_mode = "reflect"});
  });
  check_layer<nn::Conv3d>("conv3d", [] {
    return std::make_shared<nn::Conv3d>(
        2, 4, nn::IntArg{3, 2, 2},
        nn::Conv3dOptions{.stride = {2, 1, 1}, .padding = {1, 0, 1}, .dilation = {1, 2, 1}});
  });
  check_layer<nn::Conv3d>("conv3d_groups", [] {
    return std::make_shared<nn::Conv3d>(4, 6, 2, nn::Conv3dOptions{.groups = 2, .bias = false});
  });
}

TEST(Parity, ConvTranspose) {
  check_layer<nn::ConvTranspose1d>("conv_transpose1d", [] {
    return std::make_shared<nn::ConvTranspose1d>(
        3, 4, 3, nn::ConvTransposeOptions{.stride = 2, .padding = 1, .output_padding = 1});
  });
  check_layer<nn::ConvTranspose2d>("conv_transpose2d_groups_output_padding", [] {
    return std::make_shared<nn::ConvTranspose2d>(
        4, 6, nn::IntArg{3, 2},
        nn::ConvTransposeOptions{
            .stride = {2, 3}, .padding = {1, 0}, .output_padding = {1, 2}, .groups = 2});
  });
  check_layer<nn::ConvTranspose2d>("conv_transpose2d_dilation", [] {
    return std::make_shared<nn::ConvTranspose2d>(
        3, 2, 3, nn::ConvTransposeOptions{.stride = 2, .padding = 2, .dilation = 2});
  });
  check_layer<nn::ConvTranspose3d>("conv_transpose3d", [] {
    return std::make_shared<nn::ConvTranspose3d>(
        4, 2, nn::IntArg{2, 3, 2},
        nn::ConvTransposeOptions{.stride = {2, 1, 2},
                                 .padding = {0, 1, 1},
                                 .output_padding = {1, 0, 1},
                                 .groups = 2,
                                 .dilation = {2, 1, 1}});
  });
}

TEST(Parity, Pools1dAnd3d) {
  check_layer<nn::MaxPool1d>("max_pool1d_ceil", [] {
    return std::make_shared<nn::MaxPool1d>(
        3, nn::MaxPool1dOptions{.stride = 2, .padding = 1, .ceil_mode = true});
  });
  check_layer<nn::AvgPool1d>("avg_pool1d_ceil_exclude_pad", [] {
    return std::make_shared<nn::AvgPool1d>(
        3, nn::AvgPool1dOptions{
               .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
  });
  check_layer<nn::MaxPool3d>("max_pool3d", [] {
    return std::make_shared<nn::MaxPool3d>(
        nn::IntArg{2, 3, 2},
        nn::MaxPool3dOptions{.stride = {2, 2, 1}, .padding = {1, 1, 0}, .dilation = {1, 1, 2}});
  });
  check_layer<nn::MaxPool3d>("max_pool3d_ceil", [] {
    return std::make_shared<nn::MaxPool3d>(
        3, nn::MaxPool3dOptions{.stride = 2, .padding = 1, .ceil_mode = true});
  });
  check_layer<nn::AvgPool3d>("avg_pool3d_ceil_exclude_pad", [] {
    return std::make_shared<nn::AvgPool3d>(
        3, nn::AvgPool3dOptions{
               .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
  });
  check_layer<nn::AvgPool3d>("avg_pool3d_include_pad", [] {
    return std::make_shared<nn::AvgPool3d>(
        nn::IntArg{2, 3, 3}, nn::AvgPool3dOptions{.stride = {1, 2, 2}, .padding = {1, 1, 1}});
  });
  check_layer<nn::AvgPool3d>("avg_pool3d_divisor", [] {
    return std::make_shared<nn::AvgPool3d>(2, nn::AvgPool3dOptions{.divisor_override = 3});
  });
}

TEST(Parity, AdaptivePoolsAndMaxUnpool) {
  check_layer<nn::AdaptiveAvgPool1d>("adaptive_avg_pool1d",
                                     [] { return std::make_shared<nn::AdaptiveAvgPool1d>(4); });
  check_layer<nn::AdaptiveMaxPool2d>("adaptive_max_pool2d", [] {
    return std::make_shared<nn::AdaptiveMaxPool2d>(nn::IntArg{3, 4});
  });
  nn::MaxUnpool2d unpool(2, {.stride = 2});
  check_parity("max_unpool2d", unpool, [&](const Inputs& in) {
    auto [values, indices] = nn::functional::max_pool2d_with_indices(in.at("x"), {2}, {2});
    return Outputs{{"y", nn::call(unpool, values, indices, IntList{5, 7})}};
  });
}

// Decoder layers: self-attention with a causal mask and the is_causal hint, cross-attention
// with a memory mask and padding on both sides; eager and compiled.
void check_decoder_layer(const std::string& name, nn::TransformerDecoderLayerOptions options) {
  for (bool compiled : {false, true}) {
    auto layer = std::make_shared<nn::TransformerDecoderLayer>(8, 2, options);
    auto graph = kiln::compile(layer, {.fullgraph = true});
    check_parity(name, *layer, [&](const Inputs& in) {
      const Tensor &tgt = in.at("tgt"), &memory = in.at("memory");
      const Tensor &tgt_mask = in.at("tgt_mask"), &memory_mask = in.at("memory_mask");
      const Tensor &tgt_pad = in.at("tgt_key_padding_mask"), &memory_pad = in.at("memory_key_padding_mask");
      Tensor y = compiled ? graph(tgt, memory, tgt_mask, memory_mask, tgt_pad, memory_pad, true, false)
                          : nn::call(*layer, tgt, memory, tgt_mask, memory_mask, tgt_pad, memory_pad,
                                     true, false);
      return Outputs{{"y", y}};
    });
  }
}

TEST(Parity, TransformerDecoderLayer) {
  check_decoder_layer("decoder_layer_post_relu",
                      {.dim_feedforward = 16, .dropout = 0.0, .batch_first = true});
  check_decoder_layer("decoder_layer_pre_gelu", {.dim_feedforward = 16,
                                                 .dropout = 0.0,
                                                 .activation = nn::TransformerActivation::GELU,
                                                 .norm_first = true});
}

TEST(Parity, Transformer) {
  nn::Transformer model(8, 2, {.num_encoder_layers = 2, .num_decoder_layers = 2,
                               .dim_feedforward = 16, .dropout = 0.0, .batch_first = true});
  check_parity("transformer", model, [&](const Inputs& in) {
    return Outputs{{"y", nn::call(model, in.at("src"), in.at("tgt"), Tensor(), in.at("tgt_mask"),
                                  Tensor(), in.at("src_key_padding_mask"), Tensor(),
                                  in.at("memory_key_padding_mask"))}};
  });
  // PyTorch's mask: 0 on and below the diagonal, -inf above.
  Tensor mask = nn::Transformer::generate_square_subsequent_mask(3);
  EXPECT_EQ(mask.to_vector<double>(),
            (std::vector<double>{0, -INFINITY, -INFINITY, 0, 0, -INFINITY, 0, 0, 0}));
}

TEST(Parity, EmbeddingBag) {
  auto check = [](const std::string& name, nn::EmbeddingBagOptions options) {
    for (bool compiled : {false, true}) {
      auto bag = std::make_shared<nn::EmbeddingBag>(10, 3, options);
      auto graph = kiln::compile(bag, {.fullgraph = true});
      check_parity(name, *bag, [&](const Inputs& in) {
        Tensor offsets = in.count("offsets") ? in.at("offsets") : Tensor();
        Tensor weights = in.count("per_sample_weights") ? in.at("per_sample_weights") : Tensor();
        Tensor y = compiled ? graph(in.at("input"), offsets, weights)
                            : nn::call(*bag, in.at("input"), offsets, weights);
        return Outputs{{"y", y}};
      });
    }
  };
  check("embedding_bag_sum_offsets_weights", {.mode = "sum"});
  check("embedding_bag_mean_2d_padding", {.mode = "mean", .padding_idx = 0});
  check("embedding_bag_max_last_offset", {.mode = "max", .include_last_offset = true});
}

}  // namespace
}  // namespace kiln
