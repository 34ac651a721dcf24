// The mistakes kiln makes loud: layers kept in a std::vector (PyTorch trains nothing and says
// nothing), tensors kept as plain members (found by kiln::nn::audit), errors that name the
// module path, and a state dict that does not fit. docs/modules.md quotes this program and
// its output.
#include <iostream>
#include <string>
#include <vector>

#include "example_checks.h"
#include "kiln/kiln.h"
#include "kiln/nn/audit.h"

namespace nn = kiln::nn;
using kiln::Tensor;

// [example: vector]
// The mistake: the layers live in a std::vector, so the tree does not know them.
struct VectorStack : nn::Module {
  std::vector<std::shared_ptr<nn::Linear>> layers{std::make_shared<nn::Linear>(4, 4),
                                                  std::make_shared<nn::Linear>(4, 4)};
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& layer : layers) h = (*layer)(h).relu();
    return h;
  }
};

// The fix: a ModuleList registers them as layers.0 and layers.1.
struct ListStack : nn::Module {
  nn::ModulePtr<nn::ModuleList> layers = register_module(
      "layers", std::make_shared<nn::ModuleList>(std::make_shared<nn::Linear>(4, 4),
                                                 std::make_shared<nn::Linear>(4, 4)));
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const auto& layer : *layers) h = (*layer)(h).relu();
    return h;
  }
};
// [end]

// [example: audit-model]
// A trainable scale kept as a raw member: it receives gradients, but parameters() does not
// list it, so no optimizer trains it.
struct RawScale : nn::Module {
  Tensor scale = kiln::full({4}, 2.0).requires_grad_();
  Tensor forward(const Tensor& x) override { return x * scale; }
};

// A constant kept as a plain member (to() will not move it, state_dict() will not save it),
// and a registered parameter that forward never uses.
struct Model : nn::Module {
  nn::ModulePtr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
  nn::ModulePtr<RawScale> gate = register_module("gate", std::make_shared<RawScale>());
  Tensor shift = kiln::full({4}, 0.5);
  Tensor unused = register_parameter("unused", kiln::zeros({3}));
  Tensor forward(const Tensor& x) override { return gate(fc(x)) + shift; }
};
// [end]

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the kiln::Error `fn` throws ("" when it does not throw).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

int main() {
  kiln::manual_seed(0);
  Tensor x = kiln::randn({3, 4});

  // [example: vector-run]
  VectorStack wrong;
  std::cout << "VectorStack parameters: " << wrong.parameters().size() << "\n";
  std::string message = error_of([&] { wrong(x); });
  std::cout << message << "\n";
  ListStack right;
  std::cout << "ListStack parameters: " << right.parameters().size() << "\n\n";
  // [end]
  check(wrong.parameters().empty(), "the std::vector hides the layers");
  check(contains(message, "called a Linear") && contains(message, "ModuleList"),
        "the std::vector mistake is caught with the fix");
  check(right.parameters().size() == 4, "ModuleList registers both layers");
  check(right(x).shape() == kiln::Shape{3, 4}, "the fixed model runs");

  // [example: audit]
  Model model;
  nn::AuditReport report = nn::audit(model, x);
  std::cout << report << "\n";
  // [end]
  check(!report.ok(), "the audit finds problems");
  check(report.of(nn::AuditCheck::GradientOnUnregistered).size() == 1, "raw trainable member");
  check(report.of(nn::AuditCheck::GradientOnUnregistered).at(0).module_path == "gate",
        "named by its path");
  check(report.of(nn::AuditCheck::UnregisteredTensor).size() == 1, "plain constant member");
  check(report.of(nn::AuditCheck::NoGradient).size() == 1, "unused parameter");
  check(!model.gate->scale.grad().defined(), "the audit leaves no gradients behind");

  // [example: context]
  struct Blocks : nn::Module {
    nn::ModulePtr<nn::Sequential> blocks = register_module(
        "blocks", std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
                                                   std::make_shared<nn::Linear>(6, 2)));
    Tensor forward(const Tensor& x) override { return blocks(x); }
  } blocks;
  message = error_of([&] { blocks(x); });
  std::cout << message << "\n\n";
  // [end]
  check(contains(message, "(in module blocks.1, Linear)"), "shape errors name the module path");

  // [example: load]
  nn::NamedTensors state = right.state_dict();
  state.erase(state.begin() + 1);                              // drop layers.0.bias
  state.emplace_back("layers.2.weight", kiln::zeros({4, 4}));  // and add a stray key
  message = error_of([&] { right.load_state_dict(state); });
  std::cout << message << "\n";
  // [end]
  check(contains(message, "nothing was loaded") && contains(message, "\"layers.0.bias\"") &&
            contains(message, "\"layers.2.weight\""),
        "a strict load lists missing and unexpected keys");

  return finish("diagnostics");
}
