// `kiln demo`: trains a two-layer MLP on Fashion-MNIST written with raw tensors and
// autograd (no module system yet), with Adam written out by hand, and reports the test
// accuracy. It exercises the whole eager stack: data loading, matmul, broadcasting,
// cross-entropy, backward and in-place updates under NoGradGuard.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

#include "commands.h"
#include "kiln/data/idx.h"
#include "kiln/data/loader.h"
#include "kiln/kiln.h"

namespace kiln::cli {

namespace {

struct DemoOptions {
  int epochs = 3;
  int64_t hidden = 256;
  int64_t batch = 128;
  double lr = 1e-3;
  uint64_t seed = 0;
};

DemoOptions parse(const std::vector<std::string>& args) {
  DemoOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      KILN_CHECK(i + 1 < args.size(), "kiln demo: ", args[i], " needs a value.");
      return args[++i];
    };
    const std::string& a = args[i];
    try {
      if (a == "--epochs") o.epochs = std::stoi(value());
      else if (a == "--hidden") o.hidden = std::stoll(value());
      else if (a == "--batch") o.batch = std::stoll(value());
      else if (a == "--lr") o.lr = std::stod(value());
      else if (a == "--seed") o.seed = std::stoull(value());
      else KILN_FAIL("kiln demo: unknown option '", a, "'. Options: --epochs --hidden --batch --lr --seed.");
    } catch (const std::logic_error&) {
      KILN_FAIL("kiln demo: ", a, " expects a number, got '", args[i], "'.");
    }
  }
  KILN_CHECK(o.epochs > 0 && o.hidden > 0 && o.batch > 0 && o.lr > 0,
             "kiln demo: --epochs, --hidden, --batch and --lr must be positive.");
  return o;
}

// Adam (Kingma & Ba) over a list of parameters, written with in-place kiln ops.
class Adam {
 public:
  Adam(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
    for (const Tensor& p : params_) {
      m_.push_back(zeros_like(p));
      v_.push_back(zeros_like(p));
    }
  }
  void step() {
    NoGradGuard no_grad;
    ++t_;
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const double c1 = 1 - std::pow(b1, t_), c2 = 1 - std::pow(b2, t_);
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor g = params_[i].grad();
      if (!g.defined()) continue;
      m_[i].mul_(b1).add_(g, 1 - b1);
      v_[i].mul_(b2).add_(g * g, 1 - b2);
      Tensor update = (m_[i] / c1) / (sqrt(v_[i] / c2) + eps);
      params_[i].sub_(update, lr_);
    }
  }
  void zero_grad() {
    for (Tensor& p : params_) p.set_grad(Tensor());
  }

 private:
  std::vector<Tensor> params_, m_, v_;
  double lr_;
  int t_ = 0;
};

struct Mlp {
  Tensor w1, b1, w2, b2;
  explicit Mlp(int64_t in, int64_t hidden, int64_t out) {
    // Kaiming-uniform-like init, as torch.nn.Linear: U(-1/sqrt(in), 1/sqrt(in)).
    auto uniform = [](IntList shape, double bound) {
      return ((rand(shape) * 2 - 1) * bound).detach().requires_grad_();
    };
    w1 = uniform({hidden, in}, 1 / std::sqrt(double(in)));
    b1 = uniform({hidden}, 1 / std::sqrt(double(in)));
    w2 = uniform({out, hidden}, 1 / std::sqrt(double(hidden)));
    b2 = uniform({out}, 1 / std::sqrt(double(hidden)));
  }
  Tensor forward(const Tensor& x) const { return linear(relu(linear(x, w1, b1)), w2, b2); }
  std::vector<Tensor> parameters() const { return {w1, b1, w2, b2}; }
};

void progress(int epoch, int epochs, int64_t done, int64_t total, double loss, double rate, bool tty) {
  if (!tty && done != total) return;
  const int width = 30;
  int filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
  std::printf("%sepoch %d/%d [%s%s] %lld/%lld  loss %.4f  %.0f samples/s%s", tty ? "\r" : "", epoch, epochs,
              std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
              static_cast<long long>(done), static_cast<long long>(total), loss, rate, done == total ? "\n" : "");
  std::fflush(stdout);
}

double accuracy(const Mlp& model, const Tensor& images, const Tensor& labels) {
  NoGradGuard no_grad;
  int64_t n = images.size(0), correct = 0;
  for (int64_t start = 0; start < n; start += 1000) {
    int64_t len = std::min<int64_t>(1000, n - start);
    Tensor x = images.narrow(0, start, len).reshape({len, -1});
    Tensor pred = model.forward(x).argmax(1);
    correct += (pred == labels.narrow(0, start, len)).sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace

int run_demo(const std::vector<std::string>& args) {
  DemoOptions o = parse(args);
  manual_seed(o.seed);
  std::cout << "kiln demo: a " << 784 << "-" << o.hidden << "-10 MLP on Fashion-MNIST (raw tensors + autograd, Adam lr "
            << o.lr << ", batch " << o.batch << ", " << num_threads() << " threads)\n";
  auto t0 = std::chrono::steady_clock::now();
  data::FashionMnist train = data::load_fashion_mnist(data::Split::Train);
  data::FashionMnist test = data::load_fashion_mnist(data::Split::Test);
  // Normalize with the training set's mean and std (as torchvision's Normalize would).
  double mean = train.images.mean().item<double>();
  double stddev = std::sqrt(((train.images - mean) * (train.images - mean)).mean().item<double>());
  Tensor train_x = ((train.images - mean) / stddev).reshape({train.images.size(0), -1});
  Tensor test_x = ((test.images - mean) / stddev).reshape({test.images.size(0), -1});
  std::cout << "loaded " << train_x.size(0) << " training and " << test_x.size(0) << " test images in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";

  Mlp model(784, o.hidden, 10);
  Adam optimizer(model.parameters(), o.lr);
  data::DataLoader loader(train_x, train.labels, {.batch_size = o.batch});
  bool tty = isatty(fileno(stdout));
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    auto start = std::chrono::steady_clock::now();
    int64_t seen = 0;
    double loss_sum = 0;
    int64_t batches = 0;
    for (auto [x, y] : loader) {
      Tensor loss = nn::functional::cross_entropy(model.forward(x), y);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      seen += x.size(0);
      loss_sum += loss.item<double>();
      ++batches;
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (batches % 20 == 0 || seen == train_x.size(0))
        progress(epoch, o.epochs, seen, train_x.size(0), loss_sum / batches, seen / std::max(secs, 1e-9), tty);
    }
    std::cout << "  test accuracy after epoch " << epoch << ": " << accuracy(model, test_x, test.labels) << "\n";
  }
  double acc = accuracy(model, test_x, test.labels);
  std::printf("final test accuracy: %.4f\n", acc);
  return 0;
}

}  // namespace kiln::cli
