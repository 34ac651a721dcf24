// Lazy layers (LazyConv2d, LazyLinear) that read their input width from the first input,
// Module::build materializing them without data, and kiln::nn::summary's table. An optimizer
// built before build() trains the materialized weights. docs/modules.md quotes this program
// and its output.
#include <iostream>
#include <string>

#include "example_checks.h"
#include "kiln/kiln.h"
#include "kiln/nn/layers/lazy_conv.h"
#include "kiln/nn/layers/lazy_linear.h"
#include "kiln/nn/summary.h"
#include "kiln/nn/uninitialized.h"

namespace nn = kiln::nn;
using kiln::Tensor;

// [example: define]
// No layer is told its input width: 28x28 single-channel images reach the head as
// 16 * 7 * 7 = 784 features, but any [N, C, H, W] input would do.
struct LazyNet : nn::Module {
  nn::ModulePtr<nn::Sequential> features = register_module(
      "features", std::make_shared<nn::Sequential>(
                      std::make_shared<nn::LazyConv2d>(8, 3, nn::Conv2dOptions{.padding = 1}),
                      std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::ReLU>(),
                      std::make_shared<nn::MaxPool2d>(2),
                      std::make_shared<nn::LazyConv2d>(16, 3, nn::Conv2dOptions{.padding = 1}),
                      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
                      std::make_shared<nn::Flatten>()));
  nn::ModulePtr<nn::LazyLinear> head =
      register_module("head", std::make_shared<nn::LazyLinear>(10));
  Tensor forward(const Tensor& x) override { return head(features(x)); }
};
// [end]

int main() {
  std::cout << std::boolalpha;
  kiln::manual_seed(0);
  // [example: before]
  LazyNet model;
  std::cout << model << "\n";
  // Parameters exist before the shapes are known, so an optimizer can be built now.
  kiln::optim::Adam opt(model.parameters(), {.lr = 1e-2});
  std::cout << "parameters: " << model.parameters().size()
            << ", uninitialized: " << nn::has_uninitialized_parameters(model) << "\n";
  try {
    (void)model.head->weight.shape();
  } catch (const kiln::Error& e) {
    std::cout << "error: " << e.what() << "\n";
  }
  // [end]
  check(model.parameters().size() == 8, "8 parameters before build");
  check(model.head->type_name() == "LazyLinear", "still lazy");

  // [example: build]
  model.build({{-1, 1, 28, 28}});  // Keras's build((None, 1, 28, 28)): no data, no kernels
  std::cout << "\nafter build: " << model.head->repr() << ", "
            << model.features->at<nn::Conv2d>(4)->repr() << "\n\n";
  std::cout << nn::summary(model, {{-1, 1, 28, 28}});
  // [end]
  check(!nn::has_uninitialized_parameters(model), "build materialized every lazy layer");
  check(model.head->in_features == 784, "head reads 784 features");
  check(model.head->type_name() == "Linear", "a materialized LazyLinear is a Linear");

  nn::Summary s = nn::summary(model, {{-1, 1, 28, 28}});
  // Conv 1->8 (3x3): 80; BatchNorm(8): 16; conv 8->16: 1,168; Linear 784->10: 7,850.
  const int64_t want = (1 * 8 * 9 + 8) + 2 * 8 + (8 * 16 * 9 + 16) + (784 * 10 + 10);
  check(s.total_params == want, "summary total = hand count");
  check(s.buffer_elements == 8 + 8 + 1, "BatchNorm buffers: running mean, var and the counter");
  check(s.rows.back().output_shapes.at(0) == kiln::Shape{-1, 10}, "head output [-1, 10]");

  // [example: train]
  // The optimizer built before build() holds the same tensors, now with data.
  Tensor x = kiln::randn({4, 1, 28, 28});
  Tensor target = kiln::tensor({1, 3, 5, 7}, kiln::kInt64);
  auto loss_of = [&] { return nn::functional::cross_entropy(model(x), target); };
  double first = loss_of().item<double>();
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    loss_of().backward();
    opt.step();
  }
  double last = loss_of().item<double>();
  std::cout << "loss " << first << " -> " << last << " after 5 Adam steps\n";
  // [end]
  check(last < first, "the optimizer built before build() trains the lazy layers");

  return finish("lazy_and_summary");
}
