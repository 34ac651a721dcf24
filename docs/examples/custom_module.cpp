// A model defined as a plain class: registration, the tree and its dotted paths, printing,
// hooks, freezing, and a state-dict round trip through a safetensors file that gives a fresh
// model the same outputs. docs/modules.md quotes this program and its output.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "example_checks.h"
#include "kiln/kiln.h"
#include "kiln/serialize/checkpoint.h"

namespace nn = kiln::nn;
using kiln::Tensor;

// [example: define]
// x + down(relu(up(x))): both Linears keep the width, so blocks stack.
struct Block : nn::Module {
  explicit Block(int64_t width)
      : up(register_module("up", std::make_shared<nn::Linear>(width, 2 * width))),
        down(register_module("down", std::make_shared<nn::Linear>(2 * width, width))) {}
  Tensor forward(const Tensor& x) override { return x + down(up(x).relu()); }

  nn::ModulePtr<nn::Linear> up;
  nn::ModulePtr<nn::Linear> down;
};

struct Net : nn::Module {
  Net(int64_t d_in, int64_t width, int64_t num_blocks, int64_t d_out) {
    stem = register_module("stem", std::make_shared<nn::Linear>(d_in, width));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < num_blocks; ++i) blocks->push_back(std::make_shared<Block>(width));
    head = register_module("head", std::make_shared<nn::Linear>(width, d_out));
    // Non-trainable state: saved in the state dict, moved by to(), never optimized.
    scale = register_buffer("scale", kiln::full({d_out}, 0.5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = stem(x).relu();
    for (const auto& block : *blocks) h = (*block)(h);
    return head(h) * scale;
  }

  nn::ModulePtr<nn::Linear> stem;
  nn::ModulePtr<nn::ModuleList> blocks;
  nn::ModulePtr<nn::Linear> head;
  Tensor scale;
};
// [end]

// [example: tied]
// An output layer that reuses the embedding matrix (weight tying, as in language models).
struct TiedLm : nn::Module {
  nn::ModulePtr<nn::Embedding> embed =
      register_module("embed", std::make_shared<nn::Embedding>(10, 4));
  nn::ModulePtr<nn::Linear> out =
      register_module("out", std::make_shared<nn::Linear>(4, 10, /*bias=*/false));
  TiedLm() {
    // Both the member forward reads and the registered slot must hold the shared tensor.
    out->weight = embed->weight;
    *out->find_parameter("weight") = embed->weight;
  }
  Tensor forward(const Tensor& tokens) override { return out(embed(tokens)); }
};
// [end]

namespace {

std::vector<std::string> keys(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [key, tensor] : named) out.push_back(key);
  return out;
}

}  // namespace

int main() {
  std::cout << std::boolalpha;
  kiln::manual_seed(0);
  // [example: tree]
  Net model(/*d_in=*/6, /*width=*/8, /*num_blocks=*/2, /*d_out=*/3);
  std::cout << model << "\n\n";
  for (const auto& [path, p] : model.named_parameters())
    std::cout << path << " " << p.type_str() << "\n";
  std::cout << "\nmodules:";
  for (const auto& [path, m] : model.named_modules())
    std::cout << " '" << path << "'(" << m->type_name() << ")";
  std::cout << "\nstate dict: " << model.state_dict().size() << " tensors, last '"
            << model.state_dict().back().first << "'\n";
  // [end]
  check(
      keys(model.named_parameters()) ==
          std::vector<std::string>{"stem.weight", "stem.bias", "blocks.0.up.weight",
                                   "blocks.0.up.bias", "blocks.0.down.weight", "blocks.0.down.bias",
                                   "blocks.1.up.weight", "blocks.1.up.bias", "blocks.1.down.weight",
                                   "blocks.1.down.bias", "head.weight", "head.bias"},
      "named_parameters paths");
  check(model.parameters().size() == 12, "12 parameters");
  check(keys(model.state_dict()).front() == "scale", "own buffers come before the children");
  check(model.state_dict().size() == 13, "12 parameters + 1 buffer in the state dict");
  check(model.blocks->at<Block>(1)->up->weight.is_same(model.named_parameters()[6].second),
        "walks return the module's own tensors");

  // [example: hooks]
  std::vector<std::string> seen;
  nn::HookHandle handle = model.blocks->at<Block>(0)->register_forward_hook(
      [&](nn::Module& m, const std::vector<Tensor>& in, const std::vector<Tensor>& out) {
        seen.push_back(nn::call_stack().back().path + " " + out[0].type_str());
      });
  Tensor x = kiln::randn({4, 6});
  Tensor y = model(x);
  handle.remove();
  std::cout << "hook saw: " << seen.at(0) << "\n";
  // [end]
  check(seen.size() == 1 && seen[0] == "blocks.0 float32[4, 8]", "the hook saw blocks.0");
  check(y.shape() == kiln::Shape{4, 3}, "output shape");

  // [example: freeze]
  model.stem->requires_grad_(false);  // freeze the stem; it stays registered and saved
  model(x).sum().backward();
  std::cout << "stem.weight grad defined: " << model.stem->weight.grad().defined()
            << ", head.weight grad defined: " << model.head->weight.grad().defined() << "\n";
  model.zero_grad();
  model.requires_grad_(true);
  // [end]
  check(!model.stem->weight.grad().defined(), "frozen stem gets no gradient");
  check(model.parameters().size() == 12, "frozen parameters stay registered");

  // [example: save]
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_custom_module_" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  kiln::json::Value config =
      kiln::json::Object{{"d_in", 6}, {"width", 8}, {"num_blocks", 2}, {"d_out", 3}};
  kiln::save(model, path, config);

  kiln::manual_seed(123);  // other initial weights: the load must overwrite all of them
  Net fresh(6, 8, 2, 3);
  kiln::load(fresh, path);  // strict: every key and shape must match
  model.eval();
  fresh.eval();
  Tensor a = model(x), b = fresh(x);
  std::cout << "reloaded outputs identical: " << (a.to_vector<float>() == b.to_vector<float>())
            << "\nconfig stored in the file: "
            << kiln::json::dump(kiln::load_checkpoint(path).config) << "\n";
  // [end]
  check(a.to_vector<float>() == b.to_vector<float>(), "reloaded model gives identical outputs");
  check(kiln::load_checkpoint(path).config == config, "config round trip");

  // [example: tied-run]
  TiedLm lm;
  std::cout << "\nTiedLm parameters(): " << lm.parameters().size() << ", state_dict():";
  for (const auto& [key, t] : lm.state_dict()) std::cout << " " << key;
  kiln::save(lm, path);
  TiedLm lm2;
  kiln::load(lm2, path);
  std::cout << "\nstill tied after load: " << lm2.out->weight.is_same(lm2.embed->weight) << "\n";
  // [end]
  check(lm.parameters().size() == 1, "a tied tensor is one parameter");
  check(keys(lm.state_dict()) == std::vector<std::string>{"embed.weight", "out.weight"},
        "a tied tensor is saved under both paths");
  check(lm2.out->weight.is_same(lm2.embed->weight) &&
            lm2.out->weight.to_vector<float>() == lm.embed->weight.to_vector<float>(),
        "loading keeps the tie and the values");
  std::filesystem::remove(path);

  return finish("custom_module");
}
