// End-to-end accuracy on Fashion-MNIST with fixed seeds: the figures the demo and the docs
// claim. FashionMLP runs the demo's full recipe (10 epochs, ~10 s on 2 cores); the
// BatchNorm CNN runs a reduced recipe here (one epoch on 20,000 images) and its full figure
// (>= 0.91 after 3 epochs) is recorded in docs/modules.md. Skipped when the dataset is not
// installed (./run.sh installs it), and under the sanitizers (KILN_SKIP_SLOW=1), where
// training takes minutes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <filesystem>

#include "kiln/data/idx.h"
#include "kiln/kiln.h"
#include "kiln/models/batch_norm_cnn.h"
#include "kiln/models/fashion_mlp.h"
#include "kiln/models/training.h"

namespace kiln {
namespace {

bool skip_reason(std::string& why) {
  if (const char* slow = std::getenv("KILN_SKIP_SLOW"); slow && *slow && *slow != '0') {
    why = "KILN_SKIP_SLOW is set";
    return true;
  }
  const std::string dir = data::default_fashion_mnist_dir();
  if (!std::filesystem::exists(dir + "/t10k-labels-idx1-ubyte.gz") &&
      !std::filesystem::exists(dir + "/t10k-labels-idx1-ubyte")) {
    why = "Fashion-MNIST not installed in " + dir;
    return true;
  }
  return false;
}

TEST(Accuracy, FashionMLPReaches088WithTheDemoRecipe) {
  std::string why;
  if (skip_reason(why)) GTEST_SKIP() << why;
  manual_seed(0);
  auto model = models::build(models::FashionMLPConfig{});
  models::ClassificationData data = models::load_classification_data();
  models::train_classifier(*model, data.train_images, data.train_labels,
                           {.fit = {.epochs = 10, .batch_size = 128}, .lr = 1e-3});
  const double acc = models::evaluate(*model, data.test_images, data.test_labels);
  EXPECT_GE(acc, 0.88);
  // Evaluation is deterministic: the same weights score the same figure again.
  EXPECT_EQ(models::evaluate(*model, data.test_images, data.test_labels), acc);
}

TEST(Accuracy, BatchNormCNNLearnsInOneShortEpoch) {
  std::string why;
  if (skip_reason(why)) GTEST_SKIP() << why;
  manual_seed(0);
  auto model = models::build(models::BatchNormCNNConfig{});
  models::ClassificationData data = models::load_classification_data("", 20000, 5000);
  models::train_classifier(*model, data.train_images, data.train_labels,
                           {.fit = {.epochs = 1, .batch_size = 128}, .lr = 3e-3});
  // ~0.83 with this seed on 2 threads (0.81-0.85 across seeds), far above chance (0.10): a
  // broken conv, pooling or BatchNorm (batch statistics in training, running ones in eval)
  // fails it.
  EXPECT_GE(models::evaluate(*model, data.test_images, data.test_labels), 0.80);
}

// Conv2d encoder to [32, 7, 7], ConvTranspose2d decoder (stride 2, output_padding 1) back to
// [1, 28, 28], trained on reconstruction (MSE) for 400 steps on 12,800 images.
TEST(Accuracy, ConvTransposeAutoencoderReconstructsFashionMnist) {
  std::string why;
  if (skip_reason(why)) GTEST_SKIP() << why;
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(1, 16, 3, nn::Conv2dOptions{.stride = 2, .padding = 1}),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Conv2d>(16, 32, 3, nn::Conv2dOptions{.stride = 2, .padding = 1}),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::ConvTranspose2d>(
          32, 16, 3, nn::ConvTransposeOptions{.stride = 2, .padding = 1, .output_padding = 1}),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::ConvTranspose2d>(
          16, 1, 3, nn::ConvTransposeOptions{.stride = 2, .padding = 1, .output_padding = 1}),
      std::make_shared<nn::Sigmoid>());
  data::FashionMnist train = data::load_fashion_mnist(data::Split::Train);
  data::FashionMnist test = data::load_fashion_mnist(data::Split::Test);
  Tensor images = train.images.slice(0, 0, 12800), held_out = test.images.slice(0, 0, 2000);
  optim::Adam adam(model->parameters(), {.lr = 2e-3});
  auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < 400; ++step) {
    const int64_t first = (step * 64) % images.size(0);
    Tensor batch = images.slice(0, first, first + 64);
    Tensor loss = nn::functional::mse_loss((*model)(batch), batch);
    adam.zero_grad();
    loss.backward();
    adam.step();
  }
  NoGradGuard no_grad;
  model->eval();
  const double mse = nn::functional::mse_loss((*model)(held_out), held_out).item<double>();
  // Predicting every test image as the mean training image scores about 0.07.
  const double baseline =
      nn::functional::mse_loss(images.mean({0}, true).expand(held_out.sizes()), held_out)
          .item<double>();
  std::cout << "[autoencoder] test reconstruction MSE " << mse << " (mean image " << baseline
            << "), trained in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";
  EXPECT_LT(mse, 0.015);
}

}  // namespace
}  // namespace kiln
