// A complete training loop on a synthetic problem (three Gaussian blobs in 2-D, so no dataset
// is needed): DataLoader, Adam with two parameter groups, StepLR, gradient clipping, eval()
// under NoGradGuard, and a training checkpoint that resumes bit-exactly. docs/modules.md
// quotes this program and its output.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "example_checks.h"
#include "kiln/data/loader.h"
#include "kiln/kiln.h"
#include "kiln/serialize/checkpoint.h"

namespace nn = kiln::nn;
namespace F = kiln::nn::functional;
using kiln::Tensor;

struct Classifier : nn::Module {
  nn::ModulePtr<nn::Sequential> body = register_module(
      "body", std::make_shared<nn::Sequential>(
                  std::make_shared<nn::Linear>(2, 32), std::make_shared<nn::ReLU>(),
                  std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::ReLU>()));
  nn::ModulePtr<nn::Linear> head = register_module("head", std::make_shared<nn::Linear>(32, 3));
  Tensor forward(const Tensor& x) override { return head(body(x)); }
};

namespace {

// n points around three centres (unit noise, so the classes overlap a little), labels 0..2.
std::pair<Tensor, Tensor> blobs(int64_t n) {
  Tensor centres = kiln::tensor({2.0, 0.0, -1.0, 1.7, -1.0, -1.7}).reshape({3, 2});
  Tensor labels = kiln::randint(0, 3, {n});
  Tensor x = F::one_hot(labels, 3).to(kiln::kFloat32).matmul(centres) + kiln::randn({n, 2});
  return {x, labels};
}

double accuracy(nn::Module& model, const Tensor& x, const Tensor& y) {
  kiln::NoGradGuard no_grad;
  model.eval();
  double acc = kiln::eq(model(x).argmax(1), y).to(kiln::kFloat64).mean().item<double>();
  model.train();
  return acc;
}

}  // namespace

int main() {
  kiln::manual_seed(0);
  auto [train_x, train_y] = blobs(512);
  auto [test_x, test_y] = blobs(256);

  // [example: loop]
  Classifier model;
  // Two parameter groups: the head learns at half the body's rate.
  kiln::optim::Adam opt(
      {{model.body->parameters(), {.lr = 1e-2}}, {model.head->parameters(), {.lr = 5e-3}}});
  kiln::optim::StepLR sched(opt, /*step_size=*/4, /*gamma=*/0.5);
  kiln::Generator shuffle(42);  // the loader's own stream: the same order on every machine
  kiln::data::DataLoader loader(train_x, train_y, {.batch_size = 32, .generator = &shuffle});

  std::vector<double> epoch_loss;
  for (int epoch = 0; epoch < 12; ++epoch) {
    double total = 0;
    for (auto [x, y] : loader) {
      Tensor loss = F::cross_entropy(model(x), y);
      opt.zero_grad();
      loss.backward();
      nn::utils::clip_grad_norm_(model.parameters(), /*max_norm=*/5.0);
      opt.step();
      total += loss.item<double>();
    }
    epoch_loss.push_back(total / static_cast<double>(loader.size()));
    if (epoch % 4 == 0 || epoch == 11)
      std::printf("epoch %2d  loss %.4f  lr %.4g / %.4g\n", epoch + 1, epoch_loss.back(), opt.lr(0),
                  opt.lr(1));
    sched.step();
  }
  std::printf("test accuracy %.4f\n", accuracy(model, test_x, test_y));
  // [end]
  check(epoch_loss.back() < 0.5 * epoch_loss.front(), "the loss falls");
  check(accuracy(model, test_x, test_y) > 0.85, "the classes are mostly separated");
  check(sched.get_last_lr() == std::vector<double>{1e-2 * 0.125, 5e-3 * 0.125},
        "StepLR halved both groups every 4 epochs");

  // [example: resume]
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_training_loop_" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  kiln::save_training(path, model, opt, kiln::json::Object{{"hidden", 32}}, {{"epoch", "12"}});
  auto step = [&](nn::Module& m, kiln::optim::Optimizer& o) {
    Tensor loss = F::cross_entropy(m(train_x), train_y);
    o.zero_grad();
    loss.backward();
    o.step();
  };
  step(model, opt);  // one more step here ...

  Classifier resumed;
  kiln::optim::Adam resumed_opt(
      {{resumed.body->parameters(), {}}, {resumed.head->parameters(), {}}});
  kiln::CheckpointInfo info = kiln::load_training(path, resumed, resumed_opt);
  step(resumed, resumed_opt);  // ... and the same step from the file
  bool same = true;
  for (size_t i = 0; i < model.state_dict().size(); ++i)
    same &= model.state_dict()[i].second.to_vector<float>() ==
            resumed.state_dict()[i].second.to_vector<float>();
  std::cout << "resumed from epoch " << info.metadata.at("epoch") << " (" << info.optimizer
            << ", lr " << resumed_opt.lr(0)
            << "): identical after one more step: " << std::boolalpha << same << "\n";
  // [end]
  check(same, "resuming is bit-exact");
  std::filesystem::remove(path);

  return finish("training_loop");
}
