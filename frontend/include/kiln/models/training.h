// A plain supervised training loop for classifiers, and a deterministic evaluation:
// what `kiln train`, `kiln eval`, the demo and the accuracy tests share.
//
//   auto data = kiln::models::load_classification_data();   // Fashion-MNIST, normalized
//   auto model = kiln::models::build(kiln::models::FashionMLPConfig{});
//   kiln::optim::Adam opt(model->parameters(), {.lr = 1e-3});
//   kiln::models::fit(*model, opt, data.train_images, data.train_labels, {.epochs = 5});
//   double acc = kiln::models::evaluate(*model, data.test_images, data.test_labels);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/data/loader.h"
#include "kiln/nn/module.h"
#include "kiln/optim/optimizer.h"
#include "kiln/tensor.h"

namespace kiln::models {

// Fashion-MNIST's training-set pixel mean and standard deviation (of pixel / 255): fixed
// constants rather than recomputed statistics, so a checkpoint evaluates identically on any
// machine and from any subset.
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

struct ClassificationData {
  Tensor train_images;  // float32 [N, 1, 28, 28], normalized
  Tensor train_labels;  // int64 [N]
  Tensor test_images;
  Tensor test_labels;
};

// Fashion-MNIST from `dir` (data::default_fashion_mnist_dir() when empty), normalized with
// the constants above. max_train / max_test > 0 keep only the first that many samples.
ClassificationData load_classification_data(const std::string& dir = "", int64_t max_train = 0,
                                            int64_t max_test = 0);
// Only the test split (train_images and train_labels stay undefined): what evaluating a
// trained model needs, so the training files need not be present.
ClassificationData load_test_data(const std::string& dir = "", int64_t max_test = 0);

struct FitOptions {
  int epochs = 1;
  int64_t batch_size = 128;
  uint64_t seed = 0;       // shuffling (and dropout draws) start from this seed
  bool drop_last = false;  // drop the final, smaller batch of each epoch
  // Clip the global gradient norm to this value before each step (0: no clipping).
  double clip_grad_norm = 0;
  // Picks each epoch's samples instead of a seeded shuffle of all of them (a
  // data::DistributedSampler: this rank's shard). Not owned.
  data::Sampler* sampler = nullptr;
};

// Where training stands, handed to the progress callback after every batch.
struct FitProgress {
  int epoch = 0;  // 1-based
  int epochs = 0;
  int64_t samples_done = 0;  // in this epoch
  int64_t samples_total = 0;
  double mean_loss = 0;       // over this epoch's batches so far
  double train_accuracy = 0;  // over this epoch's samples so far (training mode)
  double samples_per_second = 0;
  bool epoch_done = false;
};
using FitCallback = std::function<void(const FitProgress&)>;

// Trains `model` (in training mode) on (images, labels) with cross-entropy, calling
// `optimizer.zero_grad(); loss.backward(); optimizer.step()` per batch. Returns the final
// progress of each epoch. Leaves the model in training mode. A NaN or infinite loss throws
// kiln::Error naming the epoch, the step and the learning rate, before that step's update
// (the model keeps the last finite weights).
std::vector<FitProgress> fit(nn::Module& model, optim::Optimizer& optimizer, const Tensor& images,
                             const Tensor& labels, const FitOptions& options = {},
                             const FitCallback& on_progress = {});

// Fraction of correctly classified samples, computed in eval mode under NoGradGuard in
// batches of `batch_size`; restores the model's training mode. Deterministic: the same
// weights give the same figure on every run.
double evaluate(nn::Module& model, const Tensor& images, const Tensor& labels,
                int64_t batch_size = 1000);

struct TrainOptions {
  FitOptions fit{};
  double lr = 1e-3;
  double weight_decay = 0;
};

// The recipe `kiln train`, the demo and the accuracy tests share: AdamW (which computes
// exactly Adam's update when weight_decay is 0) with the learning rate decayed to 0 along a cosine
// over all steps.
std::vector<FitProgress> train_classifier(nn::Module& model, const Tensor& images,
                                          const Tensor& labels, const TrainOptions& options,
                                          const FitCallback& on_progress = {});

// A one-line progress bar ("epoch 1/5 [#####.....] 30000/60000  loss 0.5123  acc 0.8120
// 25312 samples/s"), redrawn in place on a terminal, printed once per epoch otherwise.
FitCallback progress_bar(bool terminal);

}  // namespace kiln::models
