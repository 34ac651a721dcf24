// The Module API beyond registration and walks, as libtorch's module tests exercise it:
// replace_module, unregister_module, named_modules without the root, apply with paths, the
// containers' clear/pop/update/extend, and load_state_dict with renamed keys.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

struct Net : nn::Module {
  Net() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    act = register_module("act", std::make_shared<nn::ReLU>());
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(3, 2));
  }
  Tensor forward(const Tensor& x) override { return fc2(act(fc1(x))); }
  nn::ModulePtr<nn::Linear> fc1;
  nn::ModulePtr<nn::ReLU> act;
  nn::ModulePtr<nn::Linear> fc2;
};

std::vector<std::string> keys_of(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [k, t] : named) out.push_back(k);
  return out;
}

TEST(ModuleApi, ReplaceModuleKeepsThePlaceAndUnknownNamesAreErrors) {
  Net net;
  auto tanh = net.replace_module("act", std::make_shared<nn::Tanh>());  // Net::act still holds the ReLU
  auto fc1 = net.replace_module("fc1", std::make_shared<nn::Linear>(4, 3, /*bias=*/false));
  net.fc1 = fc1;
  EXPECT_EQ(keys_of(net.state_dict()), (std::vector<std::string>{"fc1.weight", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(net.named_children()[1].second.get(), tanh.get());
  EXPECT_EQ(Shape(net(zeros({2, 4})).sizes()), Shape({2, 2}));
  expect_error([&] { net.replace_module("fc3", std::make_shared<nn::ReLU>()); },
               {"[Module::replace_module] Net has no child 'fc3'", "fc1, act, fc2"});
}

TEST(ModuleApi, UnregisterModuleDropsItsStateFromEveryWalk) {
  Net net;
  net.unregister_module("fc2");
  EXPECT_EQ(keys_of(net.named_parameters()), (std::vector<std::string>{"fc1.weight", "fc1.bias"}));
  EXPECT_EQ(net.named_modules().size(), 3u);
  expect_error([&] { net.unregister_module("fc2"); }, {"has no child 'fc2'", "(its children: fc1, act)"});
}

TEST(ModuleApi, NamedModulesCanLeaveOutTheRootAndApplyGivesPaths) {
  Net net;
  auto inner = net.named_modules("", true, /*include_self=*/false);
  ASSERT_EQ(inner.size(), 3u);
  EXPECT_EQ(inner[0].first, "fc1");
  std::vector<std::string> visited;
  net.apply([&](const std::string& path, nn::Module& m) { visited.push_back(path + ":" + m.type_name()); }, "net");
  EXPECT_EQ(visited, (std::vector<std::string>{"net.fc1:Linear", "net.act:ReLU", "net.fc2:Linear", "net:Net"}));
}

TEST(ModuleApi, ContainersClearPopUpdateAndExtend) {
  nn::ModuleDict dict({{"a", std::make_shared<nn::ReLU>()}, {"b", std::make_shared<nn::Tanh>()}});
  dict.clear();
  EXPECT_TRUE(dict.empty());

  nn::ParameterDict params({{"x", zeros({2})}, {"y", ones({3})}});
  const Tensor y = params.pop("y");
  EXPECT_EQ(y.numel(), 3);
  EXPECT_EQ(params.keys(), (std::vector<std::string>{"x"}));
  params.update({{"z", ones({1})}, {"x", ones({4})}});
  EXPECT_EQ(params.keys(), (std::vector<std::string>{"x", "z"}));
  EXPECT_EQ(params["x"].numel(), 4);
  EXPECT_TRUE(params["x"].requires_grad());
  expect_error([&] { params.pop("y"); }, {"no parameter under key 'y'", "'x', 'z'"});
  params.clear();
  EXPECT_TRUE(params.empty());

  nn::Sequential head(std::make_shared<nn::Linear>(3, 3), std::make_shared<nn::ReLU>());
  nn::Sequential body(std::make_shared<nn::Linear>(3, 3));
  body.extend(head);
  body.extend({std::make_shared<nn::Tanh>()});
  EXPECT_EQ(body.size(), 4u);
  EXPECT_EQ(body.named_children()[3].first, "3");
  EXPECT_EQ(body[1].get(), head[0].get());  // shared, not copied
  expect_error([&] { body.extend(body); }, {"cannot extend a Sequential with itself"});
}

TEST(ModuleApi, LoadStateDictRenamesKeys) {
  Net source;
  nn::NamedTensors hf;  // the same weights under another naming scheme
  for (const auto& [key, t] : source.state_dict()) hf.emplace_back("model." + key, t);
  hf.emplace_back("model.extra_counter", zeros({1}));
  Net target;
  auto strip = [](const std::string& k) {
    if (k == "model.extra_counter") return std::string();  // dropped
    return k.substr(6);
  };
  target.load_state_dict(hf, nn::LoadStateDictOptions{.rename = strip});
  EXPECT_EQ(target.fc2.get()->weight.to_vector<float>(), source.fc2.get()->weight.to_vector<float>());
  expect_error([&] { target.load_state_dict(hf, {.rename = [](const std::string&) { return std::string("fc1.weight"); }}); },
               {"rename maps both \"model.fc1.weight\" and \"model.fc1.bias\" to \"fc1.weight\""});
  // Without strict, what stays unmatched after renaming is reported.
  auto result = target.load_state_dict(hf, {.strict = false, .rename = [](const std::string& k) { return k; }});
  EXPECT_EQ(result.unexpected_keys.size(), 5u);
}

}  // namespace
}  // namespace kiln
