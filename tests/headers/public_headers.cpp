// The public headers in user code: this file includes <kiln/kiln.h> (and the demo model
// catalog, <kiln/models.h>) and uses the common API the way a user program does (a Module
// subclass, containers, an optimizer, compile with designated initializers, explain, export,
// every options struct). ctest compiles it with -Wall -Wextra -Wpedantic -Werror and none of
// kiln's own warning exceptions (tests/CMakeLists.txt: public_headers, and public_headers_clang
// with clang where one is installed), so a header that warns, or an options struct whose
// designated initializers warn, fails that test. It is checked for syntax only, never linked
// or run.
#include <kiln/kiln.h>
#include <kiln/models.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace nn = kiln::nn;
namespace F = kiln::nn::functional;
using kiln::Tensor;

namespace {

// A plain module class: children registered once, no holder macros.
struct Block : nn::Module {
  explicit Block(int64_t width)
      : fc(register_module("fc", std::make_shared<nn::Linear>(width, width))),
        norm(register_module("norm",
                             std::make_shared<nn::LayerNorm>(std::vector<int64_t>{width},
                                                             nn::LayerNormOptions{.eps = 1e-6}))) {}
  Tensor forward(const Tensor& x) override { return x + norm(fc(x)).relu(); }

  nn::ModulePtr<nn::Linear> fc;
  nn::ModulePtr<nn::LayerNorm> norm;
};

struct Net : nn::Module {
  Net(int64_t d_in, int64_t width, int64_t d_out) {
    stem = register_module("stem", std::make_shared<nn::Linear>(d_in, width));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < 2; ++i) blocks->push_back(std::make_shared<Block>(width));
    head = register_module(
        "head", std::make_shared<nn::Sequential>(std::make_shared<nn::Dropout>(0.1),
                                                 std::make_shared<nn::Linear>(width, d_out)));
    scale = register_buffer("scale", kiln::full({d_out}, 0.5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = stem(x).relu();
    for (const auto& block : *blocks) h = (*block)(h);
    return head(h) * scale;
  }

  nn::ModulePtr<nn::Linear> stem;
  nn::ModulePtr<nn::ModuleList> blocks;
  nn::ModulePtr<nn::Sequential> head;
  Tensor scale;
};

// Two tensors in, as ExportOptions::forward calls it. The using-declaration keeps Module's
// single-tensor forward visible beside this overload (clang's -Woverloaded-virtual).
struct AddPair : nn::Module {
  using nn::Module::forward;
  Tensor forward(const Tensor& a, const Tensor& b) { return a + b; }
};

void train(Net& model) {
  Tensor data = kiln::randn({64, 6});
  Tensor target = kiln::randint(0, 3, {64});
  kiln::data::DataLoader loader(data, target, {.batch_size = 16, .shuffle = true});
  kiln::optim::Adam optimizer(model.parameters(), {.lr = 1e-2, .weight_decay = 1e-4});
  kiln::optim::StepLR schedule(optimizer, /*step_size=*/1, /*gamma=*/0.5);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (const kiln::data::Batch& batch : loader) {
      Tensor loss = F::cross_entropy(model(batch.data), batch.target, {.label_smoothing = 0.1});
      optimizer.zero_grad();
      loss.backward();
      kiln::nn::utils::clip_grad_norm_(model.parameters(), /*max_norm=*/1.0);
      optimizer.step();
    }
    schedule.step();
  }
  kiln::optim::SGD sgd({{.params = model.stem->parameters(), .options = {.lr = 0.1}}},
                       {.lr = 0.01, .momentum = 0.9});
  (void)sgd;
}

// Every options struct with designated initializers that name only some members: a member
// without a default member initializer warns (-Wmissing-field-initializers).
void options_with_designated_initializers() {
  nn::MaxPool2d max_pool(2, {.padding = 1});
  nn::AvgPool2d avg_pool(2, {.count_include_pad = false});
  nn::Embedding embedding(10, 4, {.padding_idx = 0});
  nn::MultiheadAttention attention(8, 2);
  Tensor q = kiln::randn({3, 1, 8});
  attention.forward(q, q, q, {.need_weights = false});
  kiln::models::TrainOptions train_options{.lr = 1e-2};
  (void)max_pool;
  (void)avg_pool;
  (void)embedding;
  (void)train_options;
}

}  // namespace

int main() {
  options_with_designated_initializers();
  kiln::manual_seed(0);
  auto model = std::make_shared<Net>(6, 8, 3);
  train(*model);
  model->eval();
  Tensor x = kiln::randn({4, 6});

  // compile with designated initializers, inline and as a variable.
  auto frozen = kiln::compile(model, {.freeze = true});
  Tensor y = frozen(x);
  kiln::CompileOptions options{.fullgraph = true, .dynamic = kiln::CompileOptions::Dynamic::On};
  auto compiled = kiln::compile(model, options);
  compiled(x);
  kiln::ExplainReport report = kiln::explain(compiled);
  std::cout << report.str() << report.graph_count() << " graphs\n";
  {
    kiln::NoGradGuard no_grad;
    std::cout << (y - (*model)(x)).abs().max().item<float>() << "\n";
  }

  // export with designated initializers, including a forward over several inputs.
  kiln::ExportResult r = kiln::export_model(
      model, {x}, "net.kiln", {.dynamic_batch = true, .max_batch = 64, .tolerance = 1e-3});
  std::cout << r.summary();
  auto pair = std::make_shared<AddPair>();
  pair->eval();
  kiln::ExportOptions pair_options{
      .input_names = {"a", "b"},
      .forward = [pair](const std::vector<Tensor>& in) -> std::vector<Tensor> {
        return {nn::call(*pair, in.at(0), in.at(1))};
      },
  };
  kiln::export_model(pair, {x, x}, "pair.kiln", pair_options);
  return 0;
}
