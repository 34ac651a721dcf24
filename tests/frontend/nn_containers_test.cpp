// kiln::nn containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict —
// state paths as PyTorch's (blocks.0.up.weight, layers.layer1.bias), indexing, slicing,
// insertion, iteration, printing and every error message.
#include <gtest/gtest.h>

#include "test_util.h"

#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln {
namespace {

using nn::Linear;
using nn::Module;
using nn::ModulePtr;

std::vector<std::string> keys(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [k, v] : named) out.push_back(k);
  return out;
}

std::vector<std::string> child_names(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m.named_children()) out.push_back(k);
  return out;
}

void expect_close(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-6) << "at " << i;
}

// ---- Sequential ----

TEST(NnContainers, SequentialChainsChildren) {
  auto fc1 = std::make_shared<Linear>(3, 4);
  auto fc2 = std::make_shared<Linear>(4, 2);
  nn::Sequential seq(fc1, std::make_shared<nn::ReLU>(), fc2);
  EXPECT_EQ(child_names(seq), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(seq.size(), 3u);
  Tensor x = kiln::randn({5, 3});
  expect_close(seq(x), (*fc2)(kiln::relu((*fc1)(x))));
  EXPECT_EQ(keys(seq.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(seq[0], fc1);
  EXPECT_EQ(seq[-1], fc2);
  EXPECT_EQ(seq.at<Linear>(2), fc2);
  size_t n = 0;
  for (const auto& m : seq) n += m != nullptr;
  EXPECT_EQ(n, 3u);
  seq.push_back(std::make_shared<nn::Tanh>());
  EXPECT_EQ(child_names(seq).back(), "3");
  seq.push_back("out", std::make_shared<nn::Identity>());
  EXPECT_EQ(child_names(seq).back(), "out");
}

TEST(NnContainers, SequentialNamedAndSliced) {
  nn::Sequential seq(nn::NamedModules{{"fc", std::make_shared<Linear>(2, 2)},
                                      {"act", std::make_shared<nn::ReLU>()},
                                      {"head", std::make_shared<Linear>(2, 1)}});
  EXPECT_EQ(keys(seq.named_parameters()),
            (std::vector<std::string>{"fc.weight", "fc.bias", "head.weight", "head.bias"}));
  auto tail = seq.slice(1, 3);
  EXPECT_EQ(child_names(*tail), (std::vector<std::string>{"act", "head"}));  // keeps names
  EXPECT_EQ((*tail)[1], seq[2]);                                             // shares modules
  EXPECT_EQ(seq.slice(-1, 100)->size(), 1u);
  EXPECT_EQ(seq.slice(2, 1)->size(), 0u);
  EXPECT_EQ((*tail)(kiln::randn({4, 2})).shape(), (Shape{4, 1}));
}

TEST(NnContainers, SequentialErrors) {
  nn::Sequential seq(std::make_shared<Linear>(2, 2));
  expect_error([&] { (void)seq[1]; }, {"[Sequential[]] index 1 is out of range for 1 element",
                                       "Fix: use an index in [-1, 1)"});
  expect_error([&] { seq.at<nn::ReLU>(0); },
               {"[Sequential::at] the element is a Linear, not a ReLU", "Fix:"});
  expect_error([&] { seq.push_back("a.b", std::make_shared<nn::ReLU>()); }, {"contains '.'"});
  // A child without a single-tensor forward is named in the error.
  struct TwoArgs : Module {
    Tensor forward(const Tensor& a, const Tensor& b) { return a + b; }
  };
  seq.push_back(std::make_shared<TwoArgs>());
  expect_error(
      [&] {
        seq(kiln::ones({1, 2}));
      },
      {"TwoArgs has no single-tensor forward", "(in module 1, TwoArgs)"});
}

// ---- ModuleList ----

struct Block : Module {
  ModulePtr<Linear> up = register_module("up", std::make_shared<Linear>(4, 8));
  ModulePtr<Linear> down = register_module("down", std::make_shared<Linear>(8, 4));
  Tensor forward(const Tensor& x) override { return x + down(kiln::relu(up(x))); }
};

struct ResidualStack : Module {
  ModulePtr<nn::ModuleList> blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  explicit ResidualStack(int n) {
    for (int i = 0; i < n; ++i) blocks->push_back(std::make_shared<Block>());
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const auto& block : *blocks) h = (*block)(h);
    return h;
  }
};

TEST(NnContainers, ModuleListPaths) {
  ResidualStack m(2);
  EXPECT_EQ(
      keys(m.named_parameters()),
      (std::vector<std::string>{"blocks.0.up.weight", "blocks.0.up.bias", "blocks.0.down.weight",
                                "blocks.0.down.bias", "blocks.1.up.weight", "blocks.1.up.bias",
                                "blocks.1.down.weight", "blocks.1.down.bias"}));
  EXPECT_EQ(m(kiln::randn({3, 4})).shape(), (Shape{3, 4}));
  // Growing the list after a run: the registration check sees the new block.
  m.blocks->push_back(std::make_shared<Block>());
  EXPECT_NO_THROW(m(kiln::randn({3, 4})));
  EXPECT_EQ(m.parameters().size(), 12u);
}

TEST(NnContainers, ModuleListEditing) {
  auto a = std::make_shared<nn::ReLU>();
  auto b = std::make_shared<nn::Tanh>();
  auto c = std::make_shared<nn::Sigmoid>();
  nn::ModuleList list(a, c);
  list.insert(1, b);
  EXPECT_EQ(child_names(list), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(list[0], a);
  EXPECT_EQ(list[1], b);
  EXPECT_EQ(list[2], c);
  list.insert(-100, c);  // clamps like Python's list.insert
  EXPECT_EQ(list[0], c);
  list.insert(100, a);
  EXPECT_EQ(list[-1], a);
  EXPECT_EQ(list.size(), 5u);
  nn::ModuleList other;
  other.extend({a, b});
  other.extend(other);  // extending with itself doubles it
  EXPECT_EQ(other.size(), 4u);
  EXPECT_EQ(child_names(other), (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(other.at<nn::Tanh>(3), b);
}

TEST(NnContainers, ModuleListErrors) {
  nn::ModuleList list;
  expect_error([&] { list(kiln::ones({1})); },
               {"[ModuleList] a ModuleList has no forward", "for (auto& layer : *layers)"});
  expect_error([&] { (void)list[0]; }, {"[ModuleList[]] index 0 is out of range for 0 elements"});
  expect_error([&] { list.push_back(nullptr); }, {"is null"});
}

// ---- ModuleDict ----

TEST(NnContainers, ModuleDictPaths) {
  struct Net : Module {
    ModulePtr<nn::ModuleDict> layers =
        register_module("layers", std::make_shared<nn::ModuleDict>(nn::NamedModules{
                                      {"layer1", std::make_shared<Linear>(2, 3)},
                                      {"act", std::make_shared<nn::ReLU>()},
                                      {"layer0", std::make_shared<Linear>(3, 1)}}));
    Tensor forward(const Tensor& x) override {
      Tensor h = (*layers)["layer1"](x);  // ModulePtr: call syntax
      h = (*(*layers)["act"])(h);
      return layers->at<Linear>("layer0")(h);
    }
  };
  Net net;
  // Insertion order, not alphabetical (as PyTorch's ModuleDict).
  EXPECT_EQ(keys(net.named_parameters()),
            (std::vector<std::string>{"layers.layer1.weight", "layers.layer1.bias",
                                      "layers.layer0.weight", "layers.layer0.bias"}));
  EXPECT_EQ(net.layers->keys(), (std::vector<std::string>{"layer1", "act", "layer0"}));
  EXPECT_EQ(net(kiln::randn({4, 2})).shape(), (Shape{4, 1}));
  std::vector<std::string> seen;
  for (const auto& [key, m] : *net.layers) seen.push_back(key + "=" + m->type_name());
  EXPECT_EQ(seen, (std::vector<std::string>{"layer1=Linear", "act=ReLU", "layer0=Linear"}));
}

TEST(NnContainers, ModuleDictEditingAndErrors) {
  nn::ModuleDict dict;
  auto relu = std::make_shared<nn::ReLU>();
  dict.insert("a", relu).insert("b", std::make_shared<nn::Tanh>());
  EXPECT_TRUE(dict.contains("a"));
  EXPECT_EQ(dict.size(), 2u);
  dict.insert("a", std::make_shared<nn::Sigmoid>());  // replaces in place
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(dict["a"]->type_name(), "Sigmoid");
  auto popped = dict.pop("b");
  EXPECT_EQ(popped->type_name(), "Tanh");
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"a"}));
  expect_error([&] { (void)dict["zzz"]; },
               {"[ModuleDict] no module under key 'zzz'; the keys are: 'a'", "Fix:"});
  expect_error([&] { dict.insert("x.y", relu); }, {"contains '.'"});
  expect_error([&] { dict(kiln::ones({1})); }, {"[ModuleDict] a ModuleDict has no forward"});
  expect_error([&] { dict.at<Linear>("a"); }, {"is a Sigmoid, not a Linear"});
}

// ---- ParameterList / ParameterDict ----

TEST(NnContainers, ParameterList) {
  struct Mixture : Module {
    ModulePtr<nn::ParameterList> params =
        register_module("params", std::make_shared<nn::ParameterList>());
    Mixture() {
      params->push_back(kiln::ones({3}));
      params->push_back(kiln::zeros({2, 2}));
    }
  };
  Mixture m;
  EXPECT_EQ(keys(m.named_parameters()), (std::vector<std::string>{"params.0", "params.1"}));
  EXPECT_EQ(m.params->size(), 2u);
  EXPECT_TRUE((*m.params)[-1].requires_grad());
  EXPECT_EQ((*m.params)[1].shape(), (Shape{2, 2}));
  EXPECT_EQ(m.params->values().size(), 2u);
  expect_error([&] { (void)(*m.params)[2]; }, {"[ParameterList[]] index 2 is out of range"});
  EXPECT_EQ(m.params->repr(),
            "ParameterList(\n"
            "  (0): Parameter containing: [float32 of size 3]\n"
            "  (1): Parameter containing: [float32 of size 2x2]\n"
            ")");
}

TEST(NnContainers, ParameterDict) {
  nn::ParameterDict dict(nn::NamedTensors{{"alpha", kiln::ones({1})}, {"beta", kiln::ones({2})}});
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_TRUE(dict.contains("beta"));
  EXPECT_EQ(dict["beta"].shape(), (Shape{2}));
  EXPECT_TRUE(dict["alpha"].requires_grad());
  dict.insert("gamma", kiln::zeros({1}), /*requires_grad=*/false);
  EXPECT_FALSE(dict["gamma"].requires_grad());
  EXPECT_EQ(dict.items().size(), 3u);
  expect_error([&] { (void)dict["delta"]; },
               {"[ParameterDict] no parameter under key 'delta'; the keys are: 'alpha', 'beta', "
                "'gamma'"});
  expect_error([&] { dict.insert("alpha", kiln::ones({1})); },
               {"already has a parameter named 'alpha'"});
  expect_error([&] { dict.insert("u", Tensor()); }, {"undefined"});
}

TEST(NnContainers, PrintsNestedContainers) {
  ResidualStack m(1);
  EXPECT_EQ(m.repr(),
            "ResidualStack(\n"
            "  (blocks): ModuleList(\n"
            "    (0): Block(\n"
            "      (up): Linear(in_features=4, out_features=8, bias=true)\n"
            "      (down): Linear(in_features=8, out_features=4, bias=true)\n"
            "    )\n"
            "  )\n"
            ")");
}

}  // namespace
}  // namespace kiln
