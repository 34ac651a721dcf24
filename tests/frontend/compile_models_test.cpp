// Differential tests of kiln::compile on every seed model and layer: eager == compiled (the
// interp reference backend) bitwise in eval mode, in training mode (dropout draws and
// BatchNorm running statistics included) and across Adam steps taken from gradients of the
// compiled output; each traced graph verifies and prints -> parses -> prints identically,
// and the parsed graph still computes the eager result. The compiled CPU backend (passes
// and generated kernels) matches eager within 1e-5 in eval and training mode.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "frontend/compare_bits.h"
#include "kiln/cpu/gemm/conv2d.h"
#include "kiln/interp/interp.h"
#include "kiln/kiln.h"
#include "kiln/models.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace F = nn::functional;

// Every parameter and buffer of `a` equals the one at the same path in `b`.
void expect_same_state(nn::Module& a, nn::Module& b, const std::string& when) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  auto ba = a.named_buffers(), bb = b.named_buffers();
  ASSERT_EQ(pa.size(), pb.size()) << when;
  ASSERT_EQ(ba.size(), bb.size()) << when;
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(same_bits(pa[i].second, pb[i].second)) << when << ": " << pa[i].first;
  for (size_t i = 0; i < ba.size(); ++i)
    EXPECT_TRUE(same_bits(ba[i].second, bb[i].second)) << when << ": buffer " << ba[i].first;
}

// Runs a graph through the interp backend with the module's live parameters and buffers.
std::vector<Tensor> run_graph(std::shared_ptr<const ir::Graph> graph, nn::Module& model,
                              const std::vector<Tensor>& user_inputs) {
  std::map<std::string, Tensor> state;
  for (const auto& [path, t] : model.named_parameters()) state[path] = t;
  for (const auto& [path, t] : model.named_buffers()) state[path] = t;
  std::vector<Tensor> args;
  size_t next = 0;
  for (const ir::GraphInput& in : graph->inputs()) {
    if (in.kind == ir::InputKind::Input)
      args.push_back(user_inputs.at(next++));
    else if (in.kind == ir::InputKind::Constant)
      args.push_back(Tensor());
    else
      args.push_back(state.at(in.name));
  }
  interp::Executable exe(std::move(graph));
  return exe.run(args);
}

// The trace of model(x) verifies, round-trips through its text form, and the parsed graph
// computes `expected` (eval mode: no buffer writes, no random draws).
void check_graph(nn::Module& model, const Tensor& x, const Tensor& expected) {
  auto graph = trace(model, x);
  ir::verify(*graph);
  std::string text = ir::print_graph(*graph);
  std::shared_ptr<const ir::Graph> parsed = ir::parse_graph(text);
  ir::verify(*parsed);
  EXPECT_EQ(ir::print_graph(*parsed), text);
  EXPECT_EQ(ir::structural_hash(*parsed), ir::structural_hash(*graph));
  if (!expected.defined()) return;
  std::vector<Tensor> out = run_graph(parsed, model, {x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(same_bits(out[0], expected)) << "the parsed graph computes another result";
}

// A model under test: how to build it (the same weights for the same seed) and its inputs.
struct ModelCase {
  std::function<std::shared_ptr<nn::Module>()> make;
  std::function<Tensor(int)> input;  // input number i (all of one shape)
  bool lazy = false;                 // parameters exist only after the first call
  // Training-mode forward reads a value on the host (BatchNorm's cumulative average reads
  // num_batches_tracked): compiled calls run it as a graph break and must still match.
  bool breaks_in_training = false;
};

// Two models with identical weights: one run eagerly, one through compile().
struct Twins {
  std::shared_ptr<nn::Module> eager, twin;
  explicit Twins(const ModelCase& c) {
    manual_seed(1234);
    eager = c.make();
    manual_seed(1234);
    twin = c.make();
    if (!c.lazy) expect_same_state(*eager, *twin, "after construction");
  }
};

void check_eval(const ModelCase& c) {
  Twins m(c);
  m.eager->eval();
  m.twin->eval();
  auto compiled = compile(m.twin);
  for (int i = 0; i < 3; ++i) {
    Tensor x = c.input(i);
    manual_seed(50 + i);  // a lazy layer draws its initial weights on the first call
    Tensor want = (*m.eager)(x);
    manual_seed(50 + i);
    Tensor got = compiled(x);
    EXPECT_TRUE(same_bits(got, want)) << "call " << i;
  }
  expect_same_state(*m.eager, *m.twin, "after eval calls");
  ExplainReport report = explain(compiled);
  EXPECT_EQ(report.entries.size(), 1u) << report.str();
  EXPECT_EQ(report.graph_break_count(), 0u) << report.str();
  Tensor x = c.input(0);
  check_graph(*m.twin, x, (*m.eager)(x));
}

void check_training(const ModelCase& c) {
  Twins m(c);
  m.eager->train();
  m.twin->train();
  auto compiled = compile(m.twin);
  for (int i = 0; i < 3; ++i) {
    Tensor x = c.input(i);
    manual_seed(70 + i);
    Tensor want = (*m.eager)(x);
    uint64_t eager_offset = default_generator().offset();
    manual_seed(70 + i);
    Tensor got = compiled(x);
    EXPECT_TRUE(same_bits(got, want)) << "call " << i;
    // The compiled call took as much of the random stream as the eager one.
    EXPECT_EQ(default_generator().offset(), eager_offset) << "call " << i;
  }
  // Running statistics (BatchNorm) were written back after each compiled call.
  expect_same_state(*m.eager, *m.twin, "after training calls");
  ExplainReport report = explain(compiled);
  EXPECT_EQ(report.entries.size(), 1u) << report.str();
  EXPECT_EQ(report.graph_break_count(), c.breaks_in_training ? 1u : 0u) << report.str();
  if (c.breaks_in_training) {
    EXPECT_THROW(trace(*m.twin, c.input(0)), GraphBreakError);
  } else {
    check_graph(*m.twin, c.input(0), Tensor());
  }
}

// Two Adam steps each: one from eager gradients, one from gradients of the compiled output.
void check_adam(const ModelCase& c) {
  Twins m(c);
  m.eager->train();
  m.twin->train();
  auto compiled = compile(m.twin);
  std::unique_ptr<optim::Adam> opt_eager, opt_twin;
  for (int step = 0; step < 2; ++step) {
    Tensor x = c.input(step);
    manual_seed(90 + step);
    Tensor want = (*m.eager)(x);
    manual_seed(90 + step);
    Tensor got = compiled(x);
    ASSERT_TRUE(same_bits(got, want)) << "step " << step;
    // Lazy layers have parameters only now.
    if (!opt_eager) opt_eager = std::make_unique<optim::Adam>(m.eager->parameters());
    if (!opt_twin) opt_twin = std::make_unique<optim::Adam>(m.twin->parameters());
    opt_eager->zero_grad();
    opt_twin->zero_grad();
    square(want).mean().backward();
    square(got).mean().backward();
    auto pe = m.eager->named_parameters(), pt = m.twin->named_parameters();
    ASSERT_EQ(pe.size(), pt.size());
    for (size_t i = 0; i < pe.size(); ++i) {
      ASSERT_TRUE(pt[i].second.grad().defined()) << pt[i].first << " got no gradient";
      EXPECT_TRUE(same_bits(pt[i].second.grad(), pe[i].second.grad()))
          << "step " << step << ": grad of " << pe[i].first;
    }
    opt_eager->step();
    opt_twin->step();
    expect_same_state(*m.eager, *m.twin, "after step " + std::to_string(step));
  }
  // The updated parameters are read from the live module: no recompile.
  ExplainReport report = explain(compiled);
  EXPECT_EQ(report.entries.size(), 1u) << report.str();
  EXPECT_TRUE(report.recompile_reasons.empty()) << report.str();
}

// The compiled CPU backend (generated kernels) under NoGradGuard: within 1e-5 of eager, in
// eval mode and in training mode (dropout draws, BatchNorm statistics written back).
void check_cpu(const ModelCase& c, bool training) {
  Twins m(c);
  m.eager->train(training);
  m.twin->train(training);
  NoGradGuard no_grad;
  CompileOptions options;
  options.backend = "cpu";
  auto compiled = compile(m.twin, options);
  for (int i = 0; i < 3; ++i) {
    Tensor x = c.input(i);
    manual_seed(110 + i);
    Tensor want = (*m.eager)(x);
    uint64_t eager_offset = default_generator().offset();
    manual_seed(110 + i);
    Tensor got = compiled(x);
    EXPECT_TRUE(close_to(got, want)) << "call " << i;
    EXPECT_EQ(default_generator().offset(), eager_offset) << "call " << i;
  }
  auto be = m.eager->named_buffers(), bt = m.twin->named_buffers();
  for (size_t i = 0; i < be.size(); ++i)
    EXPECT_TRUE(close_to(bt[i].second, be[i].second)) << "buffer " << be[i].first;
  ExplainReport report = explain(compiled);
  ASSERT_EQ(report.entries.size(), 1u) << report.str();
  if (report.entries[0].graph_break.empty()) {
    EXPECT_EQ(report.entries[0].backend.rfind("cpu: ", 0), 0u) << report.str();
  }
}

#define KILN_MODEL_TESTS(Name, case_fn)    \
  TEST(CompileModels, Name##Eval) {        \
    check_eval(case_fn());                 \
  }                                        \
  TEST(CompileModels, Name##Training) {    \
    check_training(case_fn());             \
  }                                        \
  TEST(CompileModels, Name##AdamSteps) {   \
    check_adam(case_fn());                 \
  }                                        \
  TEST(CompileModels, Name##CpuEval) {     \
    check_cpu(case_fn(), false);           \
  }                                        \
  TEST(CompileModels, Name##CpuTraining) { \
    check_cpu(case_fn(), true);            \
  }

std::function<Tensor(int)> randn_inputs(std::vector<int64_t> shape) {
  return [shape](int i) {
    Generator gen(1000 + static_cast<uint64_t>(i));
    return randn(shape, {}, &gen);
  };
}

// ---- the seed models ----

ModelCase residual_mlp() {
  return {[] {
            return models::build(models::MLPConfig{12, 16, 2, 5});
          },
          randn_inputs({3, 1, 3, 4})};  // flattens to [3, 12]
}
KILN_MODEL_TESTS(ResidualMlp, residual_mlp)

ModelCase fashion_mlp() {
  return {[] {
            return models::build(models::FashionMLPConfig{12, 16, 5, 0.3});
          },
          randn_inputs({4, 12})};
}
KILN_MODEL_TESTS(FashionMlp, fashion_mlp)

ModelCase lazy_cnn() {
  // Compiled before its first forward: the trace materializes the lazy layers.
  return {[] {
            return models::build(models::LazyCNNConfig{4, 6, 5});
          },
          randn_inputs({2, 3, 8, 8}),
          /*lazy=*/true};
}
KILN_MODEL_TESTS(LazyCnn, lazy_cnn)

ModelCase batch_norm_cnn() {
  return {[] {
            return models::build(models::BatchNormCNNConfig{1, 8, 4, 6, 16, 5, 0.25});
          },
          randn_inputs({3, 1, 8, 8})};
}
KILN_MODEL_TESTS(BatchNormCnn, batch_norm_cnn)

// Convolutions with a bias, BatchNorm, an average and a max pooling, a strided grouped
// convolution: on the cpu backend an image chain (direct convolutions, the norm and ReLU
// in their stores, both poolings), on five images.
ModelCase conv_stack() {
  return {[] {
            using namespace nn;
            return std::make_shared<Sequential>(
                std::make_shared<Conv2d>(3, 8, 3, Conv2dOptions{.padding = 1}),
                std::make_shared<BatchNorm2d>(8), std::make_shared<ReLU>(),
                std::make_shared<AvgPool2d>(2),
                std::make_shared<Conv2d>(8, 12, 3,
                                         Conv2dOptions{.stride = 2, .padding = 1, .groups = 2}),
                std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
                std::make_shared<Flatten>(), std::make_shared<Linear>(12 * 3 * 3, 4));
          },
          randn_inputs({5, 3, 24, 24})};
}
KILN_MODEL_TESTS(ConvStack, conv_stack)

TEST(CompileModels, ConvStackRunsAsOneImageChain) {
  if (!cpu::gemm::has_direct_conv()) GTEST_SKIP() << "no direct-convolution kernel for this CPU";
  std::shared_ptr<nn::Module> model = conv_stack().make();
  model->eval();
  NoGradGuard no_grad;
  CompileOptions options;
  options.backend = "cpu";
  auto compiled = compile(model, options);
  Tensor x = conv_stack().input(0);
  EXPECT_TRUE(close_to(compiled(x), (*model)(x)));
  const std::string backend = explain(compiled).entries.at(0).backend;
  EXPECT_NE(backend.find("1 image chain"), std::string::npos) << backend;
  // Both convolutions' groups (norm and ReLU, ReLU) and the Linear's bias are epilogues.
  EXPECT_NE(backend.find("3 epilogues"), std::string::npos) << "backend: " << backend;
}

ModelCase transformer_classifier() {
  return {[] {
            return models::build(models::TransformerClassifierConfig{.image_size = 6,
                                                                     .d_model = 8,
                                                                     .nhead = 2,
                                                                     .num_layers = 2,
                                                                     .dim_feedforward = 16,
                                                                     .dropout = 0.1,
                                                                     .num_classes = 4});
          },
          randn_inputs({2, 1, 6, 6})};
}
KILN_MODEL_TESTS(TransformerClassifier, transformer_classifier)

// ---- layers ----

ModelCase encoder_layer() {
  return {[] {
            return std::make_shared<nn::TransformerEncoderLayer>(
                8, 2,
                nn::TransformerEncoderLayerOptions{
                    .dim_feedforward = 16, .dropout = 0.2, .batch_first = true});
          },
          randn_inputs({2, 5, 8})};
}
KILN_MODEL_TESTS(TransformerEncoderLayer, encoder_layer)

// Pre-norm, gelu, a causal mask and a key padding mask (registered buffers).
struct MaskedEncoderLayer : nn::Module {
  nn::ModulePtr<nn::TransformerEncoderLayer> layer = register_module(
      "layer", std::make_shared<nn::TransformerEncoderLayer>(
                   8, 2,
                   nn::TransformerEncoderLayerOptions{.dim_feedforward = 16,
                                                      .dropout = 0.2,
                                                      .activation = nn::TransformerActivation::GELU,
                                                      .batch_first = true,
                                                      .norm_first = true}));
  Tensor causal = register_buffer("causal", triu(ones({5, 5}), 1) > 0);
  Tensor padding = register_buffer(
      "padding", Tensor::from_vector<float>({0, 0, 0, 1, 1, 0, 0, 0, 0, 1}).reshape({2, 5}) > 0);
  Tensor forward(const Tensor& x) override { return nn::call(*layer, x, causal, padding); }
};

ModelCase masked_encoder_layer() {
  return {[] { return std::make_shared<MaskedEncoderLayer>(); }, randn_inputs({2, 5, 8})};
}
KILN_MODEL_TESTS(MaskedTransformerEncoderLayer, masked_encoder_layer)

// MultiheadAttention's output and its head-averaged weights, side by side.
struct SelfAttention : nn::Module {
  nn::ModulePtr<nn::MultiheadAttention> mha = register_module(
      "mha", std::make_shared<nn::MultiheadAttention>(
                 8, 2, nn::MultiheadAttentionOptions{.dropout = 0.25, .batch_first = true}));
  Tensor padding = register_buffer(
      "padding", Tensor::from_vector<float>({0, 0, 0, 1, 0, 0, 1, 1}).reshape({2, 4}) > 0);
  Tensor forward(const Tensor& x) override {
    auto [out, weights] = nn::call(*mha, x, x, x, nn::MhaCallOptions{.key_padding_mask = padding});
    return cat({out.flatten(1), weights.flatten(1)}, 1);
  }
};

ModelCase self_attention() {
  return {[] { return std::make_shared<SelfAttention>(); }, randn_inputs({2, 4, 8})};
}
KILN_MODEL_TESTS(MultiheadAttention, self_attention)

// x + scale * fc(x), the scale a non-persistent buffer (it moves with to(), stays out of the
// checkpoint) and a host number (a literal in the graph).
struct ScaledResidual : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  Tensor scale = register_buffer("scale", full({}, 0.1), /*persistent=*/false);
  double literal = 0.3;
  Tensor forward(const Tensor& x) override { return x + scale * fc(x) + literal * x; }
};

ModelCase scaled_residual() {
  return {[] { return std::make_shared<ScaledResidual>(); }, randn_inputs({3, 4})};
}
KILN_MODEL_TESTS(ScaledResidual, scaled_residual)

// Conv2d (zeros and reflect padding), MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten,
// LayerNorm, Dropout and Linear in one stack.
ModelCase conv_pool_stack() {
  return {[] {
            return std::make_shared<nn::Sequential>(
                std::make_shared<nn::Conv2d>(3, 4, 3, nn::Conv2dOptions{.padding = 1}),
                std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
                std::make_shared<nn::Conv2d>(
                    4, 6, 3, nn::Conv2dOptions{.padding = 1, .padding_mode = "reflect"}),
                std::make_shared<nn::AvgPool2d>(
                    3, nn::AvgPool2dOptions{.stride = 2, .padding = 1, .count_include_pad = false}),
                std::make_shared<nn::AdaptiveAvgPool2d>(2), std::make_shared<nn::Flatten>(),
                std::make_shared<nn::LayerNorm>(24), std::make_shared<nn::Dropout>(0.3),
                std::make_shared<nn::Linear>(24, 5));
          },
          randn_inputs({2, 3, 8, 8})};
}
KILN_MODEL_TESTS(ConvPoolStack, conv_pool_stack)

// Embedding (with a padding row) -> LayerNorm -> Dropout -> mean over tokens -> Linear.
struct TokenClassifier : nn::Module {
  nn::ModulePtr<nn::Embedding> embed = register_module(
      "embed", std::make_shared<nn::Embedding>(11, 6, nn::EmbeddingOptions{.padding_idx = 0}));
  nn::ModulePtr<nn::LayerNorm> norm = register_module("norm", std::make_shared<nn::LayerNorm>(6));
  nn::ModulePtr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.2));
  nn::ModulePtr<nn::Linear> head = register_module("head", std::make_shared<nn::Linear>(6, 3));
  Tensor forward(const Tensor& tokens) override {
    return head(drop(norm(embed(tokens))).mean({1}));
  }
};

ModelCase token_classifier() {
  return {[] { return std::make_shared<TokenClassifier>(); },
          [](int i) {
            Generator gen(2000 + static_cast<uint64_t>(i));
            return randint(0, 11, {3, 5}, kInt64, &gen);
          }};
}
KILN_MODEL_TESTS(EmbeddingLayerNorm, token_classifier)

// BatchNorm2d without affine parameters, BatchNorm1d without running statistics (batch
// statistics in eval mode too).
ModelCase batch_norm_variants() {
  return {[] {
            return std::make_shared<nn::Sequential>(
                std::make_shared<nn::BatchNorm2d>(3, nn::BatchNormOptions{.affine = false}),
                std::make_shared<nn::Flatten>(),
                std::make_shared<nn::BatchNorm1d>(
                    12, nn::BatchNormOptions{.track_running_stats = false}),
                std::make_shared<nn::Linear>(12, 2));
          },
          randn_inputs({4, 3, 2, 2})};
}
KILN_MODEL_TESTS(BatchNormVariants, batch_norm_variants)

// momentum = none: a cumulative average, whose factor 1 / num_batches_tracked is read on the
// host, so training-mode calls are graph breaks.
ModelCase cumulative_batch_norm() {
  return {
      [] {
        return std::make_shared<nn::Sequential>(
            std::make_shared<nn::BatchNorm1d>(4, nn::BatchNormOptions{.momentum = std::nullopt}),
            std::make_shared<nn::Linear>(4, 2));
      },
      randn_inputs({5, 4}), /*lazy=*/false, /*breaks_in_training=*/true};
}
KILN_MODEL_TESTS(CumulativeBatchNorm, cumulative_batch_norm)

// ---- calls beyond one fixed signature ----

// A training loop whose last batch is smaller: the batch dim turns dynamic on the recompile,
// and results and the random stream must still follow eager call for call.
TEST(CompileModels, FashionMlpTrainingWithSmallerBatches) {
  ModelCase c = fashion_mlp();
  Twins m(c);
  m.eager->train();
  m.twin->train();
  auto compiled = compile(m.twin);
  int i = 0;
  for (int64_t batch : {4, 4, 3, 4, 2}) {
    Generator gen(3000 + static_cast<uint64_t>(i));
    Tensor x = randn({batch, 12}, {}, &gen);
    manual_seed(300 + i);
    Tensor want = (*m.eager)(x);
    uint64_t eager_offset = default_generator().offset();
    manual_seed(300 + i);
    Tensor got = compiled(x);
    EXPECT_TRUE(same_bits(got, want)) << "call " << i << ", batch " << batch;
    EXPECT_EQ(default_generator().offset(), eager_offset) << "call " << i << ", batch " << batch;
    ++i;
  }
}

// MultiheadAttention returns (output, weights); without need_weights the weights are an
// undefined tensor, which the compiled call must return as such.
struct AttentionPair : nn::Module {
  nn::ModulePtr<nn::MultiheadAttention> mha =
      register_module("mha", std::make_shared<nn::MultiheadAttention>(
                                 8, 2, nn::MultiheadAttentionOptions{.batch_first = true}));
  std::pair<Tensor, Tensor> forward(const Tensor& x, bool need_weights) {
    return nn::call(*mha, x, x, x, nn::MhaCallOptions{.need_weights = need_weights});
  }
};

TEST(CompileModels, MultiheadAttentionReturnsItsPair) {
  auto model = std::make_shared<AttentionPair>();
  model->eval();
  auto compiled = compile(model);
  Tensor x = randn({2, 3, 8});
  auto [out, weights] = compiled(x, true);
  auto [want_out, want_weights] = nn::call(*model, x, true);
  EXPECT_TRUE(same_bits(out, want_out));
  EXPECT_TRUE(same_bits(weights, want_weights));
  auto [out2, no_weights] = compiled(x, false);
  EXPECT_TRUE(same_bits(out2, nn::call(*model, x, false).first));
  EXPECT_FALSE(no_weights.defined());
}

// An optional tensor argument left undefined (no attention mask), as eager forwards accept.
struct EncoderWithMasks : nn::Module {
  nn::ModulePtr<nn::TransformerEncoderLayer> layer = register_module(
      "layer", std::make_shared<nn::TransformerEncoderLayer>(
                   8, 2,
                   nn::TransformerEncoderLayerOptions{
                       .dim_feedforward = 16, .dropout = 0.0, .batch_first = true}));
  Tensor forward(const Tensor& x, const Tensor& mask, const Tensor& padding) {
    return nn::call(*layer, x, mask, padding);
  }
};

TEST(CompileModels, EncoderLayerWithAnAbsentMask) {
  auto model = std::make_shared<EncoderWithMasks>();
  auto compiled = compile(model);
  Tensor x = randn({2, 3, 8});
  Tensor padding = Tensor::from_vector<float>({0, 0, 1, 0, 0, 0}).reshape({2, 3}) > 0;
  EXPECT_TRUE(same_bits(compiled(x, Tensor(), padding), nn::call(*model, x, Tensor(), padding)));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// How many kernels fusion makes of the catalog models, named and checked: a change in the
// passes that splits or merges groups shows up here first.
ExplainEntry compiled_entry(const std::string& name, const std::vector<int64_t>& input_shape) {
  manual_seed(0);
  std::shared_ptr<nn::Module> model = models::build_model(name);
  model->eval();
  NoGradGuard no_grad;
  auto compiled = compile(model, {.dynamic = CompileOptions::Dynamic::Off});
  compiled(randn(input_shape));
  return explain(compiled).entries.at(0);
}

TEST(CompileModels, ResidualMlpAtBatch64FusesIntoTenKernels) {
  // The stem's bias + ReLU (2 ops), per block the up-projection's bias + ReLU and the
  // down-projection's bias + residual add (4 ops, 4 blocks), the head's bias (1 op): 10
  // kernels of 19 ops, each run with the matmul before it as its epilogue.
  ExplainEntry e = compiled_entry("residual_mlp", {64, 1, 28, 28});
  EXPECT_NE(e.backend.find("10 kernels (19 ops)"), std::string::npos) << e.backend;
  EXPECT_NE(e.backend.find("10 epilogues"), std::string::npos) << e.backend;
}

TEST(CompileModels, TransformerLayerNormsAreRowKernelsWithTheirResidualAdds) {
  // Two encoder layers with two layer_norms each, and the encoder's final norm: 5 row
  // kernels, each with the residual (or positional) add before it. The attention itself is
  // one fused scaled_dot_product_attention node per layer, not a kernel.
  ExplainEntry e = compiled_entry("transformer_classifier", {4, 1, 28, 28});
  size_t rows = 0;
  for (size_t at = 0; (at = e.optimized_graph_text.find("kind=\"row\"", at)) != std::string::npos;
       ++at)
    ++rows;
  EXPECT_EQ(rows, 5u) << e.optimized_graph_text;
  EXPECT_NE(e.backend.find("11 kernels (73 ops)"), std::string::npos) << e.backend;
  int with_add = 0;
  for (const std::string& group : e.fusion_groups)
    with_add += group.rfind("add, add, sum, div, sub", 0) == 0;
  EXPECT_EQ(with_add, 5) << e.backend;
}

}  // namespace
}  // namespace kiln
