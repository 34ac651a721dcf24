// Module::state_dict and Module::load_state_dict: PyTorch's key order and paths through
// nested containers, which buffers belong, tied and shared tensors under every path, the
// all-or-nothing strict and non-strict loads with their error messages, dtype conversion,
// and the in-place copy that keeps every handle (members, optimizers, autograd) valid.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using nn::Linear;
using nn::Module;
using nn::ModulePtr;
using nn::NamedTensors;

std::vector<std::string> keys(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [k, v] : named) out.push_back(k);
  return out;
}

const Tensor& at(const NamedTensors& named, const std::string& key) {
  for (const auto& [k, v] : named)
    if (k == key) return v;
  ADD_FAILURE() << "no key " << key;
  static Tensor none;
  return none;
}

// A state dict of `model`'s keys and shapes, every value `value` (float32).
NamedTensors filled_like(const Module& model, double value) {
  NamedTensors out;
  for (const auto& [k, t] : model.state_dict())
    out.emplace_back(k, full(t.sizes(), value, t.dtype()));
  return out;
}

std::vector<float> values(const Tensor& t) {
  return t.to_vector<float>();
}

// ---- models ----

struct Block : Module {
  ModulePtr<Linear> up = register_module("up", std::make_shared<Linear>(4, 8));
  ModulePtr<Linear> down = register_module("down", std::make_shared<Linear>(8, 4, false));
  Tensor forward(const Tensor& x) override { return down(up(x).relu()); }
};

struct Encoder : Module {
  ModulePtr<nn::Sequential> block =
      register_module("block", std::make_shared<nn::Sequential>(std::make_shared<Linear>(4, 6),
                                                                std::make_shared<nn::ReLU>()));
  Tensor forward(const Tensor& x) override { return block(x); }
};

// A buffer registered before a parameter, containers of every kind, a bias-less Linear.
struct Net : Module {
  Tensor scale = register_buffer("scale", ones({4}));
  Tensor gain = register_parameter("gain", ones({4}));
  ModulePtr<nn::ModuleList> blocks = register_module(
      "blocks",
      std::make_shared<nn::ModuleList>(std::make_shared<Block>(), std::make_shared<Block>()));
  ModulePtr<nn::ModuleDict> layers =
      register_module("layers", std::make_shared<nn::ModuleDict>(
                                    nn::NamedModules{{"layer1", std::make_shared<Linear>(4, 4)}}));
  ModulePtr<Encoder> encoder = register_module("encoder", std::make_shared<Encoder>());
};

struct Mlp : Module {
  ModulePtr<Linear> fc1 = register_module("fc1", std::make_shared<Linear>(4, 8));
  ModulePtr<Linear> fc2 = register_module("fc2", std::make_shared<Linear>(8, 3));
  Tensor forward(const Tensor& x) override { return fc2(fc1(x).relu()); }
};

// A head whose weight is a tensor owned elsewhere (weight tying, as in language models).
struct TiedHead : Module {
  Tensor weight;
  explicit TiedHead(Tensor w) { weight = register_parameter("weight", std::move(w)); }
  Tensor forward(const Tensor& x) override { return x.matmul(weight.t()); }
};

struct TiedLm : Module {
  ModulePtr<nn::Embedding> emb = register_module("emb", std::make_shared<nn::Embedding>(5, 4));
  ModulePtr<TiedHead> head = register_module("head", std::make_shared<TiedHead>(emb->weight));
};

// ---- keys ----

TEST(StateDict, KeyOrderAndPathsFollowPyTorch) {
  Net net;
  // For each module, root first: its own parameters, then its own persistent buffers (so
  // "gain" precedes "scale" although the buffer was registered first), then its children.
  EXPECT_EQ(
      keys(net.state_dict()),
      (std::vector<std::string>{
          "gain", "scale", "blocks.0.up.weight", "blocks.0.up.bias", "blocks.0.down.weight",
          "blocks.1.up.weight", "blocks.1.up.bias", "blocks.1.down.weight", "layers.layer1.weight",
          "layers.layer1.bias", "encoder.block.0.weight", "encoder.block.0.bias"}));
}

TEST(StateDict, HoldsPersistentBuffersOnly) {
  struct WithCache : Module {
    Tensor w = register_parameter("w", zeros({2}));
    Tensor cache = register_buffer("cache", zeros({2}), /*persistent=*/false);
    Tensor stats = register_buffer("stats", zeros({2}));
    Tensor unset = register_buffer("unset", Tensor());
  } m;
  EXPECT_EQ(keys(m.state_dict()), (std::vector<std::string>{"w", "stats"}));
  EXPECT_EQ(keys(m.named_buffers()), (std::vector<std::string>{"cache", "stats"}));
}

TEST(StateDict, BatchNormBuffersIncludingNumBatchesTracked) {
  nn::Sequential seq(std::make_shared<Linear>(3, 2), std::make_shared<nn::BatchNorm1d>(2));
  NamedTensors sd = seq.state_dict();
  EXPECT_EQ(keys(sd),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                      "1.running_var", "1.num_batches_tracked"}));
  EXPECT_EQ(at(sd, "1.num_batches_tracked").dtype(), kInt64);
  EXPECT_EQ(at(sd, "1.num_batches_tracked").dim(), 0);
  // Without affine parameters or running statistics, only what exists is listed.
  nn::BatchNorm1d bare(2, {.affine = false, .track_running_stats = false});
  EXPECT_TRUE(bare.state_dict().empty());
}

TEST(StateDict, FrozenParametersStay) {
  Mlp m;
  m.fc1->requires_grad_(false);
  EXPECT_EQ(keys(m.state_dict()),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
}

TEST(StateDict, TensorsAreDetachedHandlesSharingStorage) {
  Mlp m;
  NamedTensors sd = m.state_dict();
  const Tensor& w = at(sd, "fc1.weight");
  EXPECT_TRUE(w.shares_storage(m.fc1->weight));
  EXPECT_FALSE(w.is_same(m.fc1->weight));
  EXPECT_FALSE(w.requires_grad());
  EXPECT_TRUE(m.fc1->weight.requires_grad());
  // No copy: a write through the state dict is a write to the model (as in PyTorch).
  Tensor(w).fill_(0.5);
  EXPECT_EQ(values(m.fc1->weight), std::vector<float>(32, 0.5f));
}

TEST(StateDict, TiedParameterUnderEveryPath) {
  TiedLm lm;
  NamedTensors sd = lm.state_dict();
  EXPECT_EQ(keys(sd), (std::vector<std::string>{"emb.weight", "head.weight"}));
  EXPECT_TRUE(at(sd, "emb.weight").shares_storage(at(sd, "head.weight")));
  EXPECT_EQ(lm.parameters().size(), 1u);  // the optimizer's view: one tensor
}

TEST(StateDict, SharedChildUnderEveryPath) {
  struct AutoEncoder : Module {
    std::shared_ptr<Linear> shared = std::make_shared<Linear>(3, 3);
    ModulePtr<Linear> enc = register_module("enc", shared);
    ModulePtr<Linear> dec = register_module("dec", shared);
  } ae;
  EXPECT_EQ(keys(ae.state_dict()),
            (std::vector<std::string>{"enc.weight", "enc.bias", "dec.weight", "dec.bias"}));
  EXPECT_EQ(ae.parameters().size(), 2u);
}

// ---- loading ----

TEST(LoadStateDict, RoundTripIntoAFreshModelGivesTheSameOutputs) {
  manual_seed(1);
  Mlp a;
  Mlp b;  // different random initialization
  Tensor x = randn({5, 4});
  EXPECT_NE(values(a(x)), values(b(x)));
  nn::LoadStateDictResult r = b.load_state_dict(a.state_dict());
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  EXPECT_EQ(values(a(x)), values(b(x)));
  // b owns copies: changing a afterwards leaves b alone.
  {
    NoGradGuard g;
    a.fc1->weight.fill_(0);
  }
  EXPECT_NE(values(a(x)), values(b(x)));
}

TEST(LoadStateDict, CopiesInPlaceKeepingEveryHandle) {
  Mlp m;
  Tensor weight = m.fc1->weight;  // e.g. an optimizer's handle
  optim::SGD opt(m.parameters(), {.lr = 0.1});
  uint64_t version = weight.version();
  m.load_state_dict(filled_like(m, 0.25));
  EXPECT_TRUE(m.fc1->weight.is_same(weight));
  EXPECT_TRUE(opt.parameters()[0].is_same(weight));
  EXPECT_EQ(values(weight), std::vector<float>(32, 0.25f));
  EXPECT_GT(weight.version(), version);
  EXPECT_TRUE(weight.requires_grad());
  EXPECT_TRUE(weight.is_leaf());
  // The model still trains through the same tensors.
  Tensor x = ones({2, 4});
  m(x).sum().backward();
  EXPECT_TRUE(weight.grad().defined());
  opt.step();
  EXPECT_NE(values(weight), std::vector<float>(32, 0.25f));
}

TEST(LoadStateDict, BumpsVersionsSoAStaleGraphRefusesBackward) {
  Mlp m;
  Tensor y = m(ones({2, 4})).sum();  // saved fc2.weight, now about to be overwritten
  m.load_state_dict(filled_like(m, 1.0));
  expect_error([&] { y.backward(); }, {"[autograd]", "modified in place"});
}

TEST(LoadStateDict, TiedWeightsStayTied) {
  TiedLm lm;
  NamedTensors sd = filled_like(lm, 0.5);
  lm.load_state_dict(sd);
  EXPECT_TRUE(lm.emb->weight.is_same(lm.head->weight));
  EXPECT_EQ(values(lm.head->weight), std::vector<float>(20, 0.5f));
  {
    NoGradGuard g;
    lm.emb->weight.fill_(3);  // a write through one path is seen through the other
  }
  EXPECT_EQ(values(lm.head->weight), std::vector<float>(20, 3.f));
  // Both paths go into the one tensor; as in PyTorch the later path's value is the last
  // written.
  NamedTensors differ = {{"emb.weight", full({5, 4}, 1.0)}, {"head.weight", full({5, 4}, 2.0)}};
  lm.load_state_dict(differ);
  EXPECT_TRUE(lm.emb->weight.is_same(lm.head->weight));
  EXPECT_EQ(values(lm.emb->weight), std::vector<float>(20, 2.f));
}

TEST(LoadStateDict, StrictListsEveryProblemAndChangesNothing) {
  Mlp m;
  std::vector<float> before = values(m.fc2->bias);
  NamedTensors sd = {{"fc1.weight", zeros({4, 8})},  // transposed
                     {"fc2.bias", zeros({3})},
                     {"fc3.weight", zeros({3, 3})},
                     {"extra", zeros({1})}};
  expect_error([&] { m.load_state_dict(sd); },
               {"[load_state_dict] the state dict does not match Mlp; nothing was loaded.",
                "2 missing key(s) (in the model, absent from the state dict): \"fc1.bias\", "
                "\"fc2.weight\"\n",
                "2 unexpected key(s) (in the state dict, absent from the model): \"fc3.weight\", "
                "\"extra\"",
                "shape mismatch for \"fc1.weight\": the model has [8, 4], the state dict [4, 8]",
                "Fix: load a state dict saved from this architecture", "strict=false",
                "; and a shape mismatch means", "build the model with the checkpoint's sizes"});
  // fc2.bias matched but was not loaded: the load is all or nothing.
  EXPECT_EQ(values(m.fc2->bias), before);
}

TEST(LoadStateDict, NonStrictReturnsTheKeysAndLoadsTheRest) {
  Mlp m;
  NamedTensors sd = {{"fc2.bias", full({3}, 7.0)},
                     {"fc1.weight", full({8, 4}, 1.0)},
                     {"head.weight", zeros({2, 8})},
                     {"head.bias", zeros({2})}};
  nn::LoadStateDictResult r = m.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"fc1.bias", "fc2.weight"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"head.weight", "head.bias"}));
  EXPECT_EQ(values(m.fc2->bias), std::vector<float>(3, 7.f));
  EXPECT_EQ(values(m.fc1->weight), std::vector<float>(32, 1.f));
}

TEST(LoadStateDict, NonStrictStillRefusesShapeMismatches) {
  Mlp m;
  std::vector<float> before = values(m.fc1->bias);
  NamedTensors sd = {{"fc1.bias", zeros({8})},
                     {"fc2.weight", zeros({3, 9})},
                     {"fc2.bias", zeros({4})},
                     {"unknown", zeros({1})}};
  std::string msg = error_of([&] { m.load_state_dict(sd, /*strict=*/false); });
  for (const char* part : {"nothing was loaded",
                           "shape mismatch for \"fc2.weight\": the model has [3, 8], the "
                           "state dict [3, 9]",
                           "shape mismatch for \"fc2.bias\": the model has [3], the state dict [4]",
                           "build the model with the checkpoint's sizes"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in " << msg;
  // Missing and unexpected keys are not errors here.
  EXPECT_EQ(msg.find("missing key"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("unexpected key"), std::string::npos) << msg;
  EXPECT_EQ(values(m.fc1->bias), before);
}

TEST(LoadStateDict, ConvertsDtypesToTheModels) {
  nn::Sequential seq(std::make_shared<Linear>(2, 2), std::make_shared<nn::BatchNorm1d>(2));
  NamedTensors sd = seq.state_dict();
  for (auto& [k, t] : sd) {
    if (k == "1.num_batches_tracked")
      t = Tensor::scalar(41.9, kFloat64);  // a float into the int64 counter
    else
      t = full(t.sizes(), 1.0 / 3.0, kFloat64);
  }
  seq.load_state_dict(sd);
  auto* lin = seq.find_child("0").get();
  Tensor w = *lin->find_parameter("weight");
  EXPECT_EQ(w.dtype(), kFloat32);
  EXPECT_EQ(values(w), std::vector<float>(4, static_cast<float>(1.0 / 3.0)));
  Tensor count = *seq.find_child("1")->find_buffer("num_batches_tracked");
  EXPECT_EQ(count.dtype(), kInt64);
  EXPECT_EQ(count.item<int64_t>(), 41);  // truncated, as PyTorch's copy_
  // Integers into a float parameter.
  Mlp m;
  NamedTensors ints;
  for (const auto& [k, t] : m.state_dict()) ints.emplace_back(k, full(t.sizes(), 2, kInt32));
  m.load_state_dict(ints);
  EXPECT_EQ(m.fc1->bias.dtype(), kFloat32);
  EXPECT_EQ(values(m.fc1->bias), std::vector<float>(8, 2.f));
}

TEST(LoadStateDict, LoadingItsOwnStateIsANoOp) {
  Mlp m;
  std::vector<float> before = values(m.fc1->weight);
  m.load_state_dict(m.state_dict());
  EXPECT_EQ(values(m.fc1->weight), before);
}

TEST(LoadStateDict, HintsAtAnExtraPrefix) {
  Mlp m;
  NamedTensors wrapped;
  for (const auto& [k, t] : m.state_dict()) wrapped.emplace_back("module." + k, t);
  expect_error([&] { m.load_state_dict(wrapped); },
               {"4 missing key(s)", "4 unexpected key(s)", "\"module.fc1.weight\"",
                "this model's keys appear in the state dict under the prefix \"module.\" (it was "
                "saved from a model holding this one as \"module\")",
                "keep the entries starting with \"module.\", with that prefix removed"});
}

TEST(LoadStateDict, HintsAtASubmodule) {
  struct Wrapper : Module {
    ModulePtr<Mlp> inner = register_module("inner", std::make_shared<Mlp>());
  } w;
  Mlp m;
  expect_error([&] { w.load_state_dict(m.state_dict()); },
               {"the state dict's keys are this model's without the prefix \"inner.\"",
                "load it into the submodule \"inner\" instead"});
}

TEST(LoadStateDict, HintsAtATiedPathMissing) {
  TiedLm lm;
  NamedTensors only_emb = {{"emb.weight", zeros({5, 4})}};
  expect_error([&] { lm.load_state_dict(only_emb); },
               {"1 missing key(s)", "\"head.weight\" is tied to \"emb.weight\" (one tensor)",
                "strict=false"});
  nn::LoadStateDictResult r = lm.load_state_dict(only_emb, false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"head.weight"}));
  EXPECT_EQ(values(lm.head->weight), std::vector<float>(20, 0.f));
}

TEST(LoadStateDict, RefusesUndefinedAndDuplicateEntries) {
  Mlp m;
  NamedTensors sd = filled_like(m, 1);
  sd[1].second = Tensor();
  sd.emplace_back("fc2.bias", zeros({3}));
  std::vector<float> before = values(m.fc1->weight);
  expect_error([&] { m.load_state_dict(sd, false); },
               {"duplicate key \"fc2.bias\" in the state dict (entries 3 and 4)",
                "\"fc1.bias\" is an undefined tensor in the state dict",
                "Fix: give every key one entry, holding a tensor with data."});
  EXPECT_EQ(values(m.fc1->weight), before);
}

TEST(LoadStateDict, RefusesSymbolicValues) {
  Mlp m;
  NamedTensors sd = filled_like(m, 1);
  auto impl = std::make_shared<TensorImpl>();  // a value of a trace: no storage
  impl->sizes = {3};
  impl->strides = {1};
  impl->symbolic = std::make_shared<SymbolicInfo>();
  sd[3].second = Tensor(impl);
  expect_error([&] { m.load_state_dict(sd); },
               {"\"fc2.bias\" in the state dict is symbolic (a value inside a trace) and has no "
                "data",
                "nothing was loaded"});
  EXPECT_NE(values(m.fc1->weight), std::vector<float>(32, 1.f));
}

TEST(LoadStateDict, EmptyModelAndEmptyDict) {
  nn::ReLU relu;
  EXPECT_TRUE(relu.state_dict().empty());
  EXPECT_TRUE(relu.load_state_dict({}).missing_keys.empty());
  expect_error(
      [&] {
        relu.load_state_dict({{"w", zeros({1})}});
      },
      {"1 unexpected key(s)", "\"w\""});
}

}  // namespace
}  // namespace kiln
