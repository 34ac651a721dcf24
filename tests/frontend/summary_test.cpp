// kiln::nn::summary: the Keras-style table (rows in call order with nested paths, output
// shapes with -1 where the batch was given as -1, own parameter counts), totals against
// hand-computed counts (shared modules counted once, frozen parameters, buffers), lazy
// layers materialized by the pass, no kernel run and no memory allocated for activations,
// the model left as it was, and the errors.
#include "kiln/nn/summary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/nn/layers/lazy_conv.h"
#include "kiln/nn/layers/lazy_linear.h"
#include "test_util.h"

namespace kiln {
namespace {

using nn::LazyConv2d;
using nn::LazyLinear;

std::shared_ptr<nn::Sequential> mlp() {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(784, 256),
                                          std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(256, 10));
}

std::vector<std::string> layer_names(const nn::Summary& s) {
  std::vector<std::string> out;
  for (const auto& r : s.rows) out.push_back(r.path + " (" + r.type + ")");
  return out;
}

TEST(Summary, MlpTableAndTotals) {
  auto model = mlp();
  nn::Summary s = nn::summary(*model, {{-1, 784}});
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(layer_names(s), (std::vector<std::string>{"0 (Linear)", "1 (ReLU)", "2 (Linear)"}));
  EXPECT_EQ(s.rows[0].output_shapes, (std::vector<Shape>{{-1, 256}}));
  EXPECT_EQ(s.rows[2].output_shapes, (std::vector<Shape>{{-1, 10}}));
  EXPECT_EQ(s.rows[0].params, 784 * 256 + 256);
  EXPECT_EQ(s.rows[1].params, 0);
  EXPECT_EQ(s.rows[2].params, 256 * 10 + 10);
  EXPECT_EQ(s.total_params, 203530);
  EXPECT_EQ(s.trainable_params, 203530);
  EXPECT_EQ(s.non_trainable_params, 0);
  EXPECT_EQ(s.param_bytes, 203530 * 4);
  EXPECT_EQ(s.buffer_bytes, 0);
  EXPECT_EQ(s.model_type, "Sequential");
  const std::string want =
      "Model: \"Sequential\"\n"
      "_________________________________________\n"
      " Layer (type)    Output Shape    Param #\n"
      "=========================================\n"
      " 0 (Linear)      [-1, 256]       200,960\n"
      " 1 (ReLU)        [-1, 256]             0\n"
      " 2 (Linear)      [-1, 10]          2,570\n"
      "=========================================\n"
      "Total params: 203,530 (795.04 KB)\n"
      "Trainable params: 203,530 (795.04 KB)\n"
      "Non-trainable params: 0 (0.00 B)\n"
      "_________________________________________\n";
  EXPECT_EQ(s.to_string(), want);
  std::ostringstream os;
  os << s;
  EXPECT_EQ(os.str(), want);
}

TEST(Summary, KerasSizesInMegabytes) {
  // 784*512+512 + 512*512+512 + 512*10+10 = 669,706 parameters (2.55 MB of float32).
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(784, 512), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(512, 512), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(512, 10));
  std::string text = nn::summary(*model, {{32, 784}}).to_string();
  EXPECT_NE(text.find("Total params: 669,706 (2.55 MB)"), std::string::npos) << text;
  // A batch given as a number is shown as that number.
  EXPECT_NE(text.find("[32, 512]"), std::string::npos) << text;
}

struct Block : nn::Module {
  nn::ModulePtr<nn::Linear> up = register_module("up", std::make_shared<nn::Linear>(8, 16));
  nn::ModulePtr<nn::Linear> down = register_module("down", std::make_shared<nn::Linear>(16, 8));
  Tensor forward(const Tensor& x) override { return x + down(up(x).relu()); }
};

struct Tower : nn::Module {
  nn::ModulePtr<nn::ModuleList> blocks = register_module(
      "blocks",
      std::make_shared<nn::ModuleList>(std::make_shared<Block>(), std::make_shared<Block>()));
  nn::ModulePtr<nn::Linear> shared = register_module("shared", std::make_shared<nn::Linear>(8, 8));
  nn::ModulePtr<nn::Linear> head = register_module("head", std::make_shared<nn::Linear>(8, 3));
  Tensor forward(const Tensor& x) override {
    Tensor h = shared(x);
    for (const auto& b : *blocks) h = (*b)(h);
    return head(shared(h));  // `shared` runs twice
  }
};

TEST(Summary, NestedPathsCallOrderAndSharedModules) {
  Tower tower;
  nn::Summary s = nn::summary(tower, {{-1, 8}});
  EXPECT_EQ(layer_names(s),
            (std::vector<std::string>{"shared (Linear)", "blocks.0 (Block)", "blocks.0.up (Linear)",
                                      "blocks.0.down (Linear)", "blocks.1 (Block)",
                                      "blocks.1.up (Linear)", "blocks.1.down (Linear)",
                                      "shared (Linear)", "head (Linear)"}));
  EXPECT_EQ(s.rows[1].params, 0);  // a block's own parameters: none (its children hold them)
  EXPECT_EQ(s.rows[0].params, 72);
  EXPECT_EQ(s.rows[7].params, 72);
  // Totals: each tensor once, the shared Linear included once.
  int64_t block = (8 * 16 + 16) + (16 * 8 + 8);
  EXPECT_EQ(s.total_params, 2 * block + 72 + (8 * 3 + 3));
  EXPECT_NE(s.to_string().find(" blocks.0.up (Linear)"), std::string::npos);
}

TEST(Summary, FrozenParametersAndBuffers) {
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(3, 4, 3), std::make_shared<nn::BatchNorm2d>(4),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(4 * 4 * 4, 2));
  model->at<nn::Conv2d>(0)->requires_grad_(false);
  model->train();
  auto bn = model->at<nn::BatchNorm2d>(1);
  std::vector<float> mean = bn->running_mean.to_vector<float>();
  nn::Summary s = nn::summary(*model, {{-1, 3, 6, 6}});
  int64_t conv = 4 * 3 * 9 + 4, norm = 8, fc = 64 * 2 + 2;
  EXPECT_EQ(s.total_params, conv + norm + fc);
  EXPECT_EQ(s.non_trainable_params, conv);
  EXPECT_EQ(s.trainable_params, norm + fc);
  EXPECT_FALSE(s.rows[0].trainable);
  EXPECT_TRUE(s.rows[1].trainable);
  EXPECT_EQ(s.buffer_elements, 4 + 4 + 1);
  EXPECT_EQ(s.buffer_bytes, (4 + 4) * 4 + 8);
  EXPECT_EQ(s.rows[0].output_shapes, (std::vector<Shape>{{-1, 4, 4, 4}}));
  EXPECT_EQ(s.rows[2].output_shapes, (std::vector<Shape>{{-1, 64}}));
  std::string text = s.to_string();
  EXPECT_NE(text.find("Non-trainable params: 112 (448.00 B)"), std::string::npos) << text;
  EXPECT_NE(text.find("Buffers: 9 (40.00 B)"), std::string::npos) << text;
  // The model is as it was: training mode and running statistics.
  EXPECT_TRUE(model->is_training() && bn->is_training());
  EXPECT_EQ(bn->running_mean.to_vector<float>(), mean);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 0);
}

TEST(Summary, MaterializesLazyLayers) {
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<LazyConv2d>(8, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<LazyConv2d>(16, 3, nn::Conv2dOptions{.padding = 1}),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Flatten>(), std::make_shared<LazyLinear>(10));
  nn::Summary s = nn::summary(*model, {{-1, 1, 28, 28}});
  EXPECT_EQ(s.rows[0].type, "Conv2d");
  EXPECT_EQ(s.rows[7].type, "Linear");
  EXPECT_EQ(s.rows[6].output_shapes, (std::vector<Shape>{{-1, 784}}));
  EXPECT_EQ(s.rows[7].output_shapes, (std::vector<Shape>{{-1, 10}}));
  int64_t c1 = 8 * 1 * 9 + 8, c2 = 16 * 8 * 9 + 16, head = 784 * 10 + 10;
  EXPECT_EQ(s.rows[0].params, c1);
  EXPECT_EQ(s.rows[3].params, c2);
  EXPECT_EQ(s.rows[7].params, head);
  EXPECT_EQ(s.total_params, c1 + c2 + head);
  EXPECT_EQ(model->at<LazyLinear>(7)->in_features, 784);
}

TEST(Summary, UncalledLazyLayersAreReported) {
  struct Partly : nn::Module {
    nn::ModulePtr<LazyLinear> used = register_module("used", std::make_shared<LazyLinear>(4));
    nn::ModulePtr<LazyLinear> unused = register_module("unused", std::make_shared<LazyLinear>(4));
    Tensor forward(const Tensor& x) override { return used(x); }
  } model;
  nn::Summary s = nn::summary(model, {{-1, 5}});
  EXPECT_EQ(s.total_params, 5 * 4 + 4);
  EXPECT_EQ(s.uninitialized_params, 2);
  EXPECT_NE(s.to_string().find("Uninitialized parameters: 2 (lazy layers that forward did not "
                               "call; not counted above)"),
            std::string::npos);
}

TEST(Summary, NoKernelRunsAndNoMemoryIsAllocated) {
  auto model = mlp();
  auto& alloc = CpuAllocator::instance();
  AllocatorStats before = alloc.stats();
  alloc.reset_peak();
  // A [2^20, 784] float32 input is 3 GiB, its first activation 1 GiB.
  nn::Summary s = nn::summary(*model, {{int64_t{1} << 20, 784}});
  AllocatorStats after = alloc.stats();
  EXPECT_EQ(after.cache_hits + after.cache_misses, before.cache_hits + before.cache_misses);
  EXPECT_EQ(after.peak_allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(s.rows[0].output_shapes, (std::vector<Shape>{{int64_t{1} << 20, 256}}));
}

TEST(Summary, BatchDimsFollowTheBatch) {
  struct Shapes : nn::Module {
    nn::ModulePtr<nn::Flatten> all = register_module("all", std::make_shared<nn::Flatten>(0));
    nn::ModulePtr<nn::Identity> id = register_module("id", std::make_shared<nn::Identity>());
    Tensor forward(const Tensor& x) override {
      Tensor flat = all(x);                      // [N * 4]: follows the batch
      return id(x.sum({0}, true)) + flat.sum();  // [1, 4]: a true 1, not the batch
    }
  } model;
  nn::Summary s = nn::summary(model, {{-1, 4}});
  EXPECT_EQ(s.rows[0].output_shapes, (std::vector<Shape>{{-1}}));
  EXPECT_EQ(s.rows[1].output_shapes, (std::vector<Shape>{{1, 4}}));
}

TEST(Summary, SingleLayerModel) {
  nn::Linear fc(4, 2);
  nn::Summary s = nn::summary(fc, {{-1, 4}});
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].path, "");
  EXPECT_EQ(s.rows[0].params, 10);
  EXPECT_NE(s.to_string().find(" Linear "), std::string::npos);
}

TEST(Summary, Errors) {
  auto model = mlp();
  expect_error([&] { (void)nn::summary(*model, {}); }, {"[nn::summary] expected the shape"});
  expect_error(
      [&] {
        (void)nn::summary(*model, {{-1, 784}, {-1, 3}});
      },
      {"[nn::summary] got 2 input shapes", "single-tensor forwards"});
  expect_error(
      [&] {
        (void)nn::summary(*model, {{-1, 100}});
      },
      {"[Linear] expected an input whose last dim is in_features = 784", "(in module 0, Linear)"});
  struct Reads : nn::Module {
    Tensor forward(const Tensor& x) override { return x * x.max().item<float>(); }
  } reads;
  expect_error(
      [&] {
        (void)nn::summary(reads, {{-1, 3}});
      },
      {"[nn::summary] item() read the data of a tensor at", "summary_test.cpp",
       "run a real forward (a dry run) instead of nn::summary"});
  EXPECT_EQ(current_interceptor(), nullptr);
  EXPECT_TRUE(grad_mode_enabled());
  // Hooks are removed after a failed pass too.
  EXPECT_FALSE(model->at<nn::Linear>(0)->has_forward_hooks());
}

}  // namespace
}  // namespace kiln
