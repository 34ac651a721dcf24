// fit / evaluate: the shared classifier training loop.
#include "kiln/models/training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "kiln/autograd.h"
#include "kiln/data/idx.h"
#include "kiln/data/loader.h"
#include "kiln/generator.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/utils.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/cosine_annealing_lr.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/reduction.h"
#include "kiln/tensor_ops/view.h"

namespace kiln::models {

namespace {

Tensor normalize(const Tensor& images) {
  return (images - kFashionMnistMean) / kFashionMnistStd;
}

Tensor first(const Tensor& t, int64_t n) {
  return n > 0 && n < t.size(0) ? t.narrow(0, 0, n).contiguous() : t;
}

void check_pair(const Tensor& images, const Tensor& labels, const char* where) {
  KILN_CHECK(images.defined() && labels.defined() && images.dim() >= 1 && labels.dim() == 1 &&
                 images.size(0) == labels.size(0),
             "[", where, "] expected images [N, ...] and labels [N] with the same N, found ",
             images.defined() ? images.type_str() : "undefined", " and ",
             labels.defined() ? labels.type_str() : "undefined",
             ". Fix: pass one label per image.");
  KILN_CHECK(labels.dtype() == DType::Int64, "[", where, "] expected int64 class labels, found ",
             labels.type_str(), ". Fix: convert them with labels.to(kiln::DType::Int64).");
}

// Where a model's weights live (the first parameter or buffer's device; the cpu without any):
// fit and evaluate move each batch there, so a model moved with to(kCUDA) trains on the GPU.
Device device_of(nn::Module& model) {
  for (const Tensor& p : model.parameters())
    if (p.defined()) return p.device();
  for (const Tensor& b : model.buffers())
    if (b.defined()) return b.device();
  return kCPU;
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  return (logits.argmax(1) == labels).sum().item<int64_t>();
}

}  // namespace

ClassificationData load_classification_data(const std::string& dir, int64_t max_train,
                                            int64_t max_test) {
  const std::string folder = dir.empty() ? data::default_fashion_mnist_dir() : dir;
  data::FashionMnist train = data::load_fashion_mnist(folder, data::Split::Train);
  data::FashionMnist test = data::load_fashion_mnist(folder, data::Split::Test);
  return {normalize(first(train.images, max_train)), first(train.labels, max_train),
          normalize(first(test.images, max_test)), first(test.labels, max_test)};
}

ClassificationData load_test_data(const std::string& dir, int64_t max_test) {
  const std::string folder = dir.empty() ? data::default_fashion_mnist_dir() : dir;
  data::FashionMnist test = data::load_fashion_mnist(folder, data::Split::Test);
  return {Tensor(), Tensor(), normalize(first(test.images, max_test)), first(test.labels, max_test)};
}

std::vector<FitProgress> fit(nn::Module& model, optim::Optimizer& optimizer, const Tensor& images,
                             const Tensor& labels, const FitOptions& options,
                             const FitCallback& on_progress) {
  check_pair(images, labels, "fit");
  KILN_CHECK(options.epochs > 0 && options.batch_size > 0,
             "[fit] expected epochs > 0 and batch_size > 0, found epochs = ", options.epochs,
             ", batch_size = ", options.batch_size, ". Fix: pass positive values.");
  manual_seed(options.seed);
  data::DataLoader loader(images, labels,
                          {.batch_size = options.batch_size,
                           .shuffle = options.sampler == nullptr,
                           .drop_last = options.drop_last,
                           .sampler = options.sampler});
  std::vector<FitProgress> history;
  model.train();
  const Device device = device_of(model);
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    FitProgress p{.epoch = epoch, .epochs = options.epochs, .samples_total = loader.num_samples()};
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t batches = 0, correct = 0;
    for (auto [host_x, host_y] : loader) {
      const Tensor x = host_x.to(device), y = host_y.to(device);
      Tensor logits = model(x);
      Tensor loss = nn::functional::cross_entropy(logits, y);
      // A NaN or infinite loss stops training before its step would write NaN gradients
      // into every weight: the model keeps the last finite weights.
      const double loss_value = loss.item<double>();
      if (!std::isfinite(loss_value)) {
        std::string lrs;
        for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
          lrs += (g ? ", " : "") + kiln::detail::str_cat(optimizer.lr(g));
        KILN_FAIL("[fit] the loss became ", loss_value, " at epoch ", epoch, ", step ", batches + 1,
                  " of ", loader.size(), " (", optimizer.name(), ", learning rate ", lrs,
                  "): training diverged. The model keeps the weights of the step before. Fix: "
                  "lower the learning rate (e.g. 10x), clip the gradients "
                  "(FitOptions::clip_grad_norm), or check the data for NaN or inf.");
      }
      optimizer.zero_grad();
      loss.backward();
      if (options.clip_grad_norm > 0)
        nn::utils::clip_grad_norm_(model.parameters(), options.clip_grad_norm);
      optimizer.step();
      loss_sum += loss_value;
      {
        NoGradGuard no_grad;
        correct += count_correct(logits, y);
      }
      ++batches;
      p.samples_done += x.size(0);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      p.mean_loss = loss_sum / static_cast<double>(batches);
      p.train_accuracy = static_cast<double>(correct) / static_cast<double>(p.samples_done);
      p.samples_per_second = static_cast<double>(p.samples_done) / std::max(secs, 1e-9);
      p.epoch_done = batches == loader.size();
      if (on_progress) on_progress(p);
    }
    history.push_back(p);
  }
  return history;
}

double evaluate(nn::Module& model, const Tensor& images, const Tensor& labels, int64_t batch_size) {
  check_pair(images, labels, "evaluate");
  KILN_CHECK(batch_size > 0, "[evaluate] expected batch_size > 0, found ", batch_size, ".");
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  const int64_t n = images.size(0);
  const Device device = device_of(model);
  int64_t correct = 0;
  try {
    for (int64_t start = 0; start < n; start += batch_size) {
      const int64_t len = std::min(batch_size, n - start);
      correct += count_correct(model(images.narrow(0, start, len).to(device)),
                               labels.narrow(0, start, len).to(device));
    }
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
  return n == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(n);
}

std::vector<FitProgress> train_classifier(nn::Module& model, const Tensor& images,
                                          const Tensor& labels, const TrainOptions& options,
                                          const FitCallback& on_progress) {
  KILN_CHECK(options.lr > 0 && options.weight_decay >= 0,
             "[train_classifier] expected lr > 0 and weight_decay >= 0, found lr = ", options.lr,
             ", weight_decay = ", options.weight_decay, ".");
  optim::AdamW optimizer(model.parameters(),
                         {.lr = options.lr, .weight_decay = options.weight_decay});
  int64_t n = images.defined() && images.dim() >= 1 ? images.size(0) : 0;
  if (options.fit.sampler) n = options.fit.sampler->length(n);  // this rank's share
  const int64_t batch = std::max<int64_t>(options.fit.batch_size, 1);
  const int64_t per_epoch = options.fit.drop_last ? n / batch : (n + batch - 1) / batch;
  optim::CosineAnnealingLR schedule(optimizer,
                                    std::max<int64_t>(options.fit.epochs * per_epoch, 1));
  return fit(model, optimizer, images, labels, options.fit, [&](const FitProgress& p) {
    schedule.step();
    if (on_progress) on_progress(p);
  });
}

FitCallback progress_bar(bool terminal) {
  return [terminal](const FitProgress& p) {
    // Redrawing costs little, but a log file wants one line per epoch.
    if (!terminal && !p.epoch_done) return;
    const int width = 30;
    const int filled =
        static_cast<int>(width * p.samples_done / std::max<int64_t>(p.samples_total, 1));
    std::printf("%sepoch %d/%d [%s%s] %lld/%lld  loss %.4f  acc %.4f  %.0f samples/s%s",
                terminal ? "\r" : "", p.epoch, p.epochs, std::string(filled, '#').c_str(),
                std::string(width - filled, '.').c_str(), static_cast<long long>(p.samples_done),
                static_cast<long long>(p.samples_total), p.mean_loss, p.train_accuracy,
                p.samples_per_second, p.epoch_done ? "\n" : "");
    std::fflush(stdout);
  };
}

}  // namespace kiln::models
