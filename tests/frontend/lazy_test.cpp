// Lazy layers and Module::build: uninitialized parameters (listed, optimizable, refusing
// every shape/data read with the remedy), LazyLinear / LazyConv2d materializing with the
// same draws as Linear / Conv2d and turning into them, an optimizer built before the dry run
// training the materialized weights, and build()'s shape-only pass (same weights as a dry
// run, no activation memory, no state change, data reads and in-place writes refused).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/nn/layers/lazy_conv.h"
#include "kiln/nn/layers/lazy_linear.h"
#include "kiln/nn/uninitialized.h"
#include "kiln/optim/adam.h"
#include "kiln/serialize/safetensors.h"
#include "test_util.h"

namespace kiln {
namespace {

using nn::LazyConv2d;
using nn::LazyLinear;

const char* const kLinearFix =
    "run one forward pass (a dry run) or call model.build({input shape}) on the model that "
    "holds it (e.g. model.build({{-1, 784}}) for [N, 784] inputs) first";

// Two LazyConv2d + pool stages and a LazyLinear head: 28x28 inputs reach the head as
// 16 * 7 * 7 = 784 features.
std::shared_ptr<nn::Sequential> lazy_cnn() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<LazyConv2d>(8, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<LazyConv2d>(16, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Flatten>(), std::make_shared<LazyLinear>(10));
}

void expect_same_values(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(Shape(a.sizes()), Shape(b.sizes()));
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

// ---- uninitialized parameters ----

TEST(Lazy, UninitializedParametersAreRegisteredButHaveNoShape) {
  LazyLinear fc(10);
  ASSERT_EQ(fc.parameters().size(), 2u);
  EXPECT_TRUE(fc.parameters()[0].is_same(fc.weight));
  EXPECT_TRUE(fc.parameters()[1].is_same(fc.bias));
  EXPECT_TRUE(nn::is_uninitialized(fc.weight));
  EXPECT_TRUE(nn::has_uninitialized_parameters(fc));
  EXPECT_TRUE(fc.weight.requires_grad());
  EXPECT_TRUE(fc.weight.is_floating_point());
  EXPECT_EQ(fc.weight.dtype(), kFloat32);
  EXPECT_FALSE(fc.initialized());

  const Tensor& w = fc.weight;
  for (auto [fn, what] : std::vector<std::pair<std::function<void()>, const char*>>{
           {[&] { (void)w.sizes(); }, "sizes()"},
           {[&] { (void)w.dim(); }, "dim()"},
           {[&] { (void)w.numel(); }, "numel()"},
           {[&] { (void)w.size(0); }, "size()"},
           {[&] { (void)w.shape(); }, "shape()"},
           {[&] { (void)w.nbytes(); }, "numel()"}}) {
    expect_error(fn, {"[LazyLinear] parameter 'weight' is uninitialized", what, kLinearFix});
  }
  expect_error([&] { (void)fc.bias.to_vector<float>(); },
               {"[LazyLinear] parameter 'bias' is uninitialized", kLinearFix});
  expect_error([&] { (void)w.item<float>(); },
               {"parameter 'weight' is uninitialized", "item() has no data to read yet"});
  expect_error([&] { (void)w.data_ptr<float>(); },
               {"parameter 'weight' is uninitialized", "data_ptr()"});
  // An op on it (infer reads the shape) and an in-place write.
  expect_error([&] { (void)(w + 1); }, {"parameter 'weight' is uninitialized", kLinearFix});
  expect_error(
      [&] {
        NoGradGuard g;
        w.detach().zero_();
      },
      {"parameter 'weight' is uninitialized"});
  // Saving: the file writer refuses a tensor without data, with the remedy.
  expect_error(
      [&] {
        (void)safetensors_bytes({{"fc.weight", fc.weight}});
      },
      {"fc.weight", "parameter 'weight' is uninitialized", kLinearFix});
  // Printing does not throw: it says what the tensor is.
  EXPECT_EQ(w.str(), "tensor(<uninitialized parameter 'weight' of LazyLinear>)");
}

TEST(Lazy, ErrorsInsideAModuleNameItsPath) {
  struct Net : nn::Module {
    nn::ModulePtr<LazyLinear> head = register_module("head", std::make_shared<LazyLinear>(3));
    Tensor forward(const Tensor& x) override { return x + head->weight.sum(); }
  } net;
  expect_error(
      [&] {
        (void)net(kiln::ones({2, 4}));
      },
      {"[LazyLinear] parameter 'weight' is uninitialized", kLinearFix,
       "(in the root module, Net)"});
}

TEST(Lazy, ConstructionDrawsNothing) {
  manual_seed(3);
  uint64_t before = default_generator().offset();
  LazyLinear a(10);
  LazyLinear b(10, false);
  LazyConv2d c(16, 3);
  EXPECT_EQ(default_generator().offset(), before);
}

TEST(Lazy, ConstructorAndFirstInputErrors) {
  expect_error([] { LazyLinear(-1); }, {"[LazyLinear]", "non-negative out_features", "-1"});
  expect_error([] { LazyConv2d(5, 3, {.groups = 2}); },
               {"[LazyConv2d]", "divisible by groups (2)", "got 5"});
  LazyLinear fc(4);
  expect_error([&] { (void)fc(kiln::ones({})); },
               {"[LazyLinear] expected an input with at least one dim", "float32[]"});
  EXPECT_FALSE(fc.initialized());  // a refused input leaves the layer lazy
  LazyConv2d conv(4, 3);
  expect_error(
      [&] {
        (void)conv(kiln::ones({2, 5}));
      },
      {"[LazyConv2d] expected a 4D [N, C, H, W] or 3D [C, H, W] input", "float32[2, 5]"});
  LazyConv2d grouped(4, 1, {.groups = 2});
  expect_error(
      [&] {
        (void)grouped(kiln::ones({1, 3, 4, 4}));
      },
      {"[LazyConv2d] the first input has 3 channels", "groups=2"});
}

// ---- LazyLinear / LazyConv2d ----

TEST(Lazy, LinearMaterializesLikeLinearAndBecomesOne) {
  Tensor x = kiln::ones({2, 20});
  manual_seed(11);
  LazyLinear lazy(10);
  EXPECT_EQ(lazy.type_name(), "LazyLinear");
  EXPECT_EQ(lazy.repr(), "LazyLinear(in_features=0, out_features=10, bias=true)");
  Tensor w = lazy.weight;  // a handle taken before materialization
  Tensor y = lazy(x);
  EXPECT_EQ(y.shape(), (Shape{2, 10}));
  EXPECT_TRUE(lazy.initialized());
  EXPECT_FALSE(nn::has_uninitialized_parameters(lazy));
  EXPECT_EQ(lazy.type_name(), "Linear");
  EXPECT_EQ(lazy.repr(), "Linear(in_features=20, out_features=10, bias=true)");
  EXPECT_EQ(lazy.in_features, 20);
  EXPECT_TRUE(w.is_same(lazy.weight));
  EXPECT_EQ(w.shape(), (Shape{10, 20}));
  EXPECT_TRUE(lazy.weight.requires_grad() && lazy.weight.is_leaf());

  manual_seed(11);
  nn::Linear ref(20, 10);
  expect_same_values(lazy.weight, ref.weight);
  expect_same_values(lazy.bias, ref.bias);
  expect_same_values(y, ref(x));

  LazyLinear no_bias(3, false);
  EXPECT_EQ(no_bias.repr(), "LazyLinear(in_features=0, out_features=3, bias=false)");
  EXPECT_EQ(no_bias(kiln::ones({5})).shape(), (Shape{3}));
  EXPECT_EQ(no_bias.repr(), "Linear(in_features=5, out_features=3, bias=false)");
  EXPECT_EQ(no_bias.parameters().size(), 1u);
}

TEST(Lazy, LinearRefusesAnotherWidthLater) {
  LazyLinear fc(10);
  (void)fc(kiln::ones({2, 20}));
  expect_error(
      [&] {
        (void)fc(kiln::ones({2, 30}));
      },
      {"[Linear] expected an input whose last dim is in_features = 20",
       "taken from the first input of this LazyLinear", "float32[2, 30]",
       "Fix: pass [..., 20] inputs"});
}

TEST(Lazy, Conv2dMaterializesLikeConv2dAndBecomesOne) {
  Tensor x = kiln::ones({2, 3, 8, 8});
  manual_seed(5);
  LazyConv2d lazy(6, 3, {.stride = 2, .padding = 1});
  EXPECT_EQ(lazy.repr(), "LazyConv2d(0, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))");
  Tensor y = lazy(x);
  EXPECT_EQ(y.shape(), (Shape{2, 6, 4, 4}));
  EXPECT_EQ(lazy.type_name(), "Conv2d");
  EXPECT_EQ(lazy.repr(), "Conv2d(3, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))");
  manual_seed(5);
  nn::Conv2d ref(3, 6, 3, {.stride = 2, .padding = 1});
  expect_same_values(lazy.weight, ref.weight);
  expect_same_values(lazy.bias, ref.bias);
  expect_same_values(y, ref(x));

  expect_error(
      [&] {
        (void)lazy(kiln::ones({2, 4, 8, 8}));
      },
      {"[Conv2d] expected an input with in_channels = 3",
       "taken from the first input of this LazyConv2d", "float32[2, 4, 8, 8]"});

  LazyConv2d grouped(4, 1, {.groups = 2, .bias = false});
  EXPECT_EQ(grouped(kiln::ones({6, 2, 2})).shape(), (Shape{4, 2, 2}));  // [C, H, W] input
  EXPECT_EQ(grouped.weight.shape(), (Shape{4, 3, 1, 1}));
  EXPECT_FALSE(grouped.bias.defined());
}

TEST(Lazy, MaterializesUnderNoGradGuard) {
  LazyLinear fc(2);
  {
    NoGradGuard g;
    EXPECT_EQ(fc(kiln::ones({1, 3})).shape(), (Shape{1, 2}));
  }
  EXPECT_TRUE(fc.weight.requires_grad());
  fc(kiln::ones({1, 3})).sum().backward();
  EXPECT_EQ(fc.weight.grad().shape(), (Shape{2, 3}));
}

TEST(Lazy, AdamBuiltBeforeTheDryRunTrainsTheMaterializedWeights) {
  manual_seed(2);
  auto model = std::make_shared<nn::Sequential>(std::make_shared<LazyLinear>(8),
                                                std::make_shared<nn::Tanh>(),
                                                std::make_shared<LazyLinear>(1));
  optim::Adam opt(model->parameters(), {.lr = 0.05});
  // Target: y = x0 - 2 x1 + 0.5 x2 on a fixed grid.
  std::vector<float> xs, ys;
  for (int i = 0; i < 16; ++i) {
    float a = (i % 4) / 3.0f - 0.5f, b = (i / 4) / 3.0f - 0.5f, c = (i % 3) / 2.0f - 0.5f;
    xs.insert(xs.end(), {a, b, c});
    ys.push_back(a - 2 * b + 0.5f * c);
  }
  Tensor x = Tensor::from_vector(xs, {16, 3}), target = Tensor::from_vector(ys, {16, 1});
  (void)(*model)(x);  // the dry run
  Tensor w0 = model->at<LazyLinear>(0)->weight.clone();
  auto loss_of = [&] { return nn::functional::mse_loss((*model)(x), target); };
  double first = loss_of().item<double>();
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    Tensor loss = loss_of();
    loss.backward();
    opt.step();
  }
  double last = loss_of().item<double>();
  EXPECT_LT(last, 0.2 * first);
  Tensor w1 = model->at<LazyLinear>(0)->weight;
  EXPECT_NE(w0.to_vector<float>(), w1.to_vector<float>());
  // The optimizer holds the very handles the layers use.
  EXPECT_TRUE(opt.param_groups()[0].params[0].is_same(w1));
}

// A tracer stand-in: records the ops it sees and answers them with fresh concrete tensors.
struct RecordingInterceptor : DispatchInterceptor {
  std::vector<std::string> ops;
  Tensors intercept(const OpDef& op, TensorSpan, const Attrs&, TensorTypes&& types) override {
    ops.push_back(op.name);
    Tensors out;
    for (const TensorType& t : types) out.push_back(Tensor::empty(t.shape, t.dtype));
    return out;
  }
};

TEST(Lazy, InitializationRunsEagerlyUnderAnInterceptor) {
  manual_seed(9);
  LazyLinear lazy(4);
  Tensor x = kiln::ones({2, 6});
  RecordingInterceptor rec;
  DispatchInterceptor* prev = set_interceptor(&rec);
  (void)lazy(x);
  set_interceptor(prev);
  // Only the layer's own computation reached the interceptor, not its initialization.
  for (const std::string& name : rec.ops) {
    EXPECT_NE(name, "rand");
    EXPECT_NE(name, "clone");
  }
  EXPECT_FALSE(rec.ops.empty());
  manual_seed(9);
  nn::Linear ref(6, 4);
  expect_same_values(lazy.weight, ref.weight);
}

// ---- Module::build ----

TEST(Lazy, BuildDrawsWhatADryRunDraws) {
  manual_seed(21);
  auto built = lazy_cnn();
  built->build({{-1, 1, 28, 28}});
  manual_seed(21);
  auto dry = lazy_cnn();
  (void)(*dry)(kiln::zeros({2, 1, 28, 28}));
  auto head = built->at<LazyLinear>(7);
  EXPECT_EQ(head->in_features, 784);
  EXPECT_EQ(head->weight.shape(), (Shape{10, 784}));
  EXPECT_FALSE(nn::has_uninitialized_parameters(*built));
  auto a = built->named_parameters(), b = dry->named_parameters();
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    expect_same_values(a[i].second, b[i].second);
  }
  EXPECT_EQ(built->repr(), dry->repr());
  EXPECT_NE(built->repr().find("(7): Linear(in_features=784, out_features=10, bias=true)"),
            std::string::npos);
  // The built model runs for real.
  EXPECT_EQ((*built)(kiln::ones({3, 1, 28, 28})).shape(), (Shape{3, 10}));
}

// Converting a lazy model before its first forward sets the dtype it materializes in.
TEST(Lazy, ToDtypeBeforeTheFirstForwardSetsTheMaterializedDtype) {
  LazyLinear fc(3);
  fc.to(kFloat64);
  EXPECT_EQ(fc.weight.dtype(), kFloat64);
  EXPECT_FALSE(fc.initialized());
  Tensor y = fc(kiln::ones({2, 4}, kFloat64));
  EXPECT_EQ(y.dtype(), kFloat64);
  EXPECT_EQ(fc.weight.dtype(), kFloat64);
  EXPECT_EQ(fc.weight.shape(), (Shape{3, 4}));
}

// As in PyTorch, a state dict materializes lazy layers that have not run: a checkpoint loads
// into a freshly built lazy model without a dry run, and draws nothing from the generator.
TEST(Lazy, LoadStateDictMaterializesFromTheStateShapes) {
  manual_seed(5);
  auto trained = lazy_cnn();
  Tensor x = kiln::randn({2, 1, 28, 28});
  Tensor expected = (*trained)(x);
  auto fresh = lazy_cnn();
  const uint64_t offset = default_generator().offset();
  EXPECT_TRUE(fresh->load_state_dict(trained->state_dict()).missing_keys.empty());
  EXPECT_EQ(default_generator().offset(), offset);
  EXPECT_FALSE(nn::has_uninitialized_parameters(*fresh));
  EXPECT_EQ(fresh->at<LazyLinear>(7)->in_features, 784);
  EXPECT_EQ(fresh->at<LazyConv2d>(3)->in_channels, 8);
  EXPECT_EQ(fresh->at<LazyLinear>(7)->type_name(), "Linear");
  expect_same_values((*fresh)(x), expected);
}

TEST(Lazy, LoadStateDictChecksLazyShapesBeforeChangingAnything) {
  LazyLinear fc(10);
  nn::NamedTensors wrong = {{"weight", kiln::zeros({5, 4})}, {"bias", kiln::zeros({10})}};
  expect_error([&] { fc.load_state_dict(wrong); },
               {"shape mismatch for \"weight\": the LazyLinear expects [10, in_features], the "
                "state dict has [5, 4]",
                "nothing was loaded"});
  EXPECT_FALSE(fc.initialized());
  nn::NamedTensors bias_only = {{"bias", kiln::zeros({10})}};
  expect_error([&] { fc.load_state_dict(bias_only, /*strict=*/false); },
               {"\"bias\" belongs to a lazy layer that has not run, and the state dict has no "
                "\"weight\" to give it its input width"});
  EXPECT_FALSE(fc.initialized());
  LazyConv2d conv(4, 3);
  nn::NamedTensors bad_kernel = {{"weight", kiln::zeros({4, 2, 5, 5})}, {"bias", kiln::zeros({4})}};
  expect_error([&] { conv.load_state_dict(bad_kernel); },
               {"the LazyConv2d expects [4, in_channels / groups, 3, 3], the state dict has "
                "[4, 2, 5, 5]"});
  EXPECT_FALSE(conv.initialized());
}

TEST(Lazy, BuildAllocatesNoActivations) {
  auto model = std::make_shared<nn::Sequential>(std::make_shared<LazyLinear>(256),
                                                std::make_shared<nn::ReLU>(),
                                                std::make_shared<LazyLinear>(10));
  auto& alloc = CpuAllocator::instance();
  alloc.reset_peak();
  size_t before = alloc.stats().allocated_bytes;
  model->build({{int64_t{1} << 20, 784}});  // a 3 GiB input, were it real
  // The weights and their initialization's temporaries (rand, scale, shift: ~4x the
  // weights), against 1 GiB for the first activation alone.
  size_t weights = (784 * 256 + 256 + 256 * 10 + 10) * sizeof(float);
  EXPECT_LE(alloc.stats().peak_allocated_bytes - before, 6 * weights);
  EXPECT_EQ(model->at<LazyLinear>(2)->in_features, 256);
}

TEST(Lazy, BuildKeepsTrainingFlagsAndBatchNormState) {
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<LazyConv2d>(4, 3), std::make_shared<nn::BatchNorm2d>(4),
      std::make_shared<nn::Dropout>(0.5), std::make_shared<nn::Flatten>(),
      std::make_shared<LazyLinear>(2));
  model->train();
  model->at<nn::Dropout>(2)->eval();  // mixed flags survive
  auto bn = model->at<nn::BatchNorm2d>(1);
  std::vector<float> mean = bn->running_mean.to_vector<float>();
  std::vector<float> var = bn->running_var.to_vector<float>();
  int64_t tracked = bn->num_batches_tracked.item<int64_t>();
  bool grad_mode = grad_mode_enabled();
  model->build({{-1, 3, 6, 6}});
  EXPECT_TRUE(model->is_training());
  EXPECT_TRUE(bn->is_training());
  EXPECT_FALSE(model->at<nn::Dropout>(2)->is_training());
  EXPECT_EQ(bn->running_mean.to_vector<float>(), mean);
  EXPECT_EQ(bn->running_var.to_vector<float>(), var);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), tracked);
  EXPECT_EQ(grad_mode_enabled(), grad_mode);
  EXPECT_EQ(current_interceptor(), nullptr);
  EXPECT_EQ(model->at<LazyLinear>(4)->in_features, 4 * 4 * 4);
}

// The pass runs in eval mode: Dropout draws nothing, so build() matches a dry run in eval
// mode (a dry run in training mode would draw the dropout mask before the head's weights).
TEST(Lazy, BuildDrawsNothingForDropout) {
  auto make = [] {
    return std::make_shared<nn::Sequential>(std::make_shared<nn::Dropout>(0.5),
                                            std::make_shared<LazyLinear>(3));
  };
  manual_seed(4);
  auto built = make();
  built->build({{-1, 5}});
  uint64_t built_offset = default_generator().offset();
  manual_seed(4);
  auto dry = make();
  dry->eval();
  (void)(*dry)(kiln::ones({2, 5}));
  EXPECT_EQ(built_offset, default_generator().offset());
  expect_same_values(built->at<LazyLinear>(1)->weight, dry->at<LazyLinear>(1)->weight);
  EXPECT_TRUE(built->at<nn::Dropout>(0)->is_training());
}

TEST(Lazy, BuildShapeErrors) {
  auto model = lazy_cnn();
  expect_error([&] { model->build({}); }, {"[Module::build] expected the shape", "got none"});
  expect_error(
      [&] {
        model->build({{-1, 1, 28, 28}, {-1, 4}});
      },
      {"[Module::build] got 2 input shapes", "single-tensor forwards",
       "kiln::nn::call(model, x, y)"});
  expect_error(
      [&] {
        model->build({{-1, -1, 28, 28}});
      },
      {"[Module::build] the input shape [-1, -1, 28, 28] has -1 in dim 1",
       "only the leading (batch) dim may be -1"});
  // An error from forward names the module, and the thread is restored afterwards.
  expect_error(
      [&] {
        model->build({{-1, 5}});
      },
      {"[LazyConv2d] expected a 4D", "float32[1, 5]", "(in module 0, LazyConv2d)"});
  EXPECT_EQ(current_interceptor(), nullptr);
  EXPECT_TRUE(grad_mode_enabled());
  EXPECT_TRUE(model->is_training());
}

TEST(Lazy, BuildRefusesDataReadsAndStateWrites) {
  struct ReadsData : nn::Module {
    nn::ModulePtr<LazyLinear> fc = register_module("fc", std::make_shared<LazyLinear>(2));
    Tensor forward(const Tensor& x) override {
      Tensor y = fc(x);
      if (y.sum().item<float>() > 0) return y;  // data-dependent control flow
      return -y;
    }
  } reads;
  expect_error(
      [&] {
        reads.build({{-1, 3}});
      },
      {"[Module::build] item() read the data of a tensor at", "lazy_test.cpp", "shape-only pass",
       "run a real forward (a dry run)"});
  EXPECT_EQ(current_interceptor(), nullptr);

  struct CountsCalls : nn::Module {
    Tensor calls = register_buffer("calls", kiln::zeros({1}));
    nn::ModulePtr<LazyLinear> fc = register_module("fc", std::make_shared<LazyLinear>(2));
    Tensor forward(const Tensor& x) override {
      calls.add_(1);
      return fc(x);
    }
  } counts;
  expect_error(
      [&] {
        counts.build({{-1, 3}});
      },
      {"[add_] in-place ops cannot run under a trace or a shape-only pass", "a parameter or buffer",
       "out-of-place form"});
  EXPECT_EQ(counts.calls.to_vector<float>(), std::vector<float>{0});
}

TEST(Lazy, BuildRunsInPlaceOpsOnActivations) {
  struct Residual : nn::Module {
    nn::ModulePtr<LazyLinear> fc = register_module("fc", std::make_shared<LazyLinear>(5));
    Tensor forward(const Tensor& x) override {
      Tensor h = fc(x);
      h.add_(x.sum({1}, true));  // writes a tensor made in this forward
      h.clamp_(0, std::nullopt);
      return h;
    }
  } model;
  model.build({{-1, 7}});
  EXPECT_EQ(model.fc->in_features, 7);
  Tensor y = model(kiln::ones({2, 7}));
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  // The shape checks of in-place ops still run in the pass.
  struct Grows : nn::Module {
    nn::ModulePtr<LazyLinear> fc = register_module("fc", std::make_shared<LazyLinear>(1));
    Tensor forward(const Tensor& x) override {
      Tensor h = fc(x);
      h.add_(x);
      return h;
    }
  } grows;
  expect_error(
      [&] {
        grows.build({{-1, 4}});
      },
      {"[add_] the result has shape [1, 4] but the tensor written in place has shape "
       "[1, 1]"});
}

TEST(Lazy, ShapeOnlyTensorsOutliveTheirPassLoudly) {
  struct Keeps : nn::Module {
    Tensor kept;
    nn::ModulePtr<LazyLinear> fc = register_module("fc", std::make_shared<LazyLinear>(2));
    Tensor forward(const Tensor& x) override {
      kept = fc(x);
      return kept;
    }
  } keeps;
  keeps.build({{-1, 3}});
  EXPECT_TRUE(keeps.kept.is_symbolic());
  EXPECT_EQ(keeps.kept.shape(), (Shape{1, 2}));  // shapes stay readable
  expect_error([&] { (void)(keeps.kept + 1); },
               {"[Module::build] the add kernel read the data of a tensor made by a shape-only "
                "pass that has ended",
                "do not keep tensors made inside Module::build's forward"});
  expect_error([&] { (void)keeps.kept.to_vector<float>(); },
               {"to_vector() read the data", "pass that has ended"});
  expect_error(
      [&] {
        NoGradGuard g;
        keeps.kept.zero_();
      },
      {"[clone_] in-place ops cannot run on a symbolic tensor outside the trace that made it"});
}

}  // namespace
}  // namespace kiln
