// Module::clone, kiln::nn::clone and Cloneable: deep copies that keep the user's classes and
// member handles, ties and shared children, with an error for every case it cannot copy.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

// A user model as people write them: children in ModulePtr members, a Tensor member that is
// a registered buffer, a setting, and a plain member tensor that is not state.
struct Net : nn::Module {
  explicit Net(int64_t width = 3) : width(width) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, width));
    norm = register_module("norm", std::make_shared<nn::BatchNorm1d>(width));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(width, 2));
    scale = register_buffer("scale", full({2}, 0.5));
  }
  Tensor forward(const Tensor& x) override { return fc2(norm(fc1(x)).relu()) * scale; }
  int64_t width;
  nn::ModulePtr<nn::Linear> fc1;
  nn::ModulePtr<nn::BatchNorm1d> norm;
  nn::ModulePtr<nn::Linear> fc2;
  Tensor scale;
};

// Tied weights (the head's weight is the embedding's) and a child registered twice.
struct TiedLm : nn::Cloneable<TiedLm> {
  TiedLm() {
    embed = register_module("embed", std::make_shared<nn::Embedding>(10, 4));
    head_weight = register_parameter("head_weight", embed->weight);
    block = register_module("block", std::make_shared<nn::Linear>(4, 4));
    register_module("block_again", std::shared_ptr<nn::Linear>(block));
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = block(block(embed(ids)));
    return matmul(h, head_weight.t());
  }
  nn::ModulePtr<nn::Embedding> embed;
  nn::ModulePtr<nn::Linear> block;
  Tensor head_weight;
};

bool same_values(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<double>() == b.to_vector<double>();
}

TEST(ModuleClone, CopiesStateAndPointsTheCopysMembersAtItsOwnState) {
  manual_seed(1);
  auto net = std::make_shared<Net>(5);
  (*net)(randn({6, 4})).sum().backward();  // gradients, and BatchNorm's running stats moved
  net->eval();
  std::shared_ptr<Net> copy = nn::clone(net);
  EXPECT_EQ(copy->width, 5);
  EXPECT_FALSE(copy->is_training());
  EXPECT_FALSE(copy->fc1->is_training());
  // Every member refers to the copy's own registered state, never to the original's.
  EXPECT_NE(copy->fc1.get(), net->fc1.get());
  EXPECT_EQ(copy->fc1.get(), copy->named_children()[0].second.get());
  EXPECT_TRUE(copy->fc1->weight.is_same(*copy->fc1->find_parameter("weight")));
  EXPECT_TRUE(copy->scale.is_same(*copy->find_buffer("scale")));
  EXPECT_FALSE(copy->scale.is_same(net->scale));
  auto original = net->state_dict(), copied = copy->state_dict();
  ASSERT_EQ(original.size(), copied.size());
  for (size_t i = 0; i < original.size(); ++i) {
    EXPECT_EQ(original[i].first, copied[i].first);
    EXPECT_TRUE(same_values(original[i].second, copied[i].second)) << original[i].first;
    EXPECT_NE(original[i].second.impl()->storage.get(), copied[i].second.impl()->storage.get())
        << original[i].first << " shares storage";
  }
  EXPECT_TRUE(copy->fc1->weight.requires_grad());
  EXPECT_TRUE(same_values(copy->fc1->weight.grad(), net->fc1->weight.grad()));
  EXPECT_EQ(copy->norm->num_batches_tracked.dtype(), kInt64);
  // Same function, independent state.
  Tensor x = randn({3, 4});
  EXPECT_TRUE(same_values((*copy)(x), (*net)(x)));
  {
    NoGradGuard no_grad;
    copy->fc1->weight.fill_(0.25);
    copy->scale.fill_(2);
  }
  EXPECT_NE(net->fc1->weight.to_vector<float>()[0], 0.25f);
  EXPECT_EQ(net->scale.to_vector<float>()[0], 0.5f);
  EXPECT_TRUE(same_values((*copy)(x), (*copy->fc2)(((*copy->norm)((*copy->fc1)(x))).relu()) * 2));
}

TEST(ModuleClone, TrainingTheCopyLeavesTheOriginalAlone) {
  manual_seed(2);
  auto net = std::make_shared<Net>();
  auto copy = nn::clone(net);
  std::vector<Tensor> before;
  for (const Tensor& p : net->parameters()) before.push_back(p.clone());
  optim::SGD opt(copy->parameters(), optim::SGDOptions(0.5));
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    (*copy)(randn({8, 4})).pow(2).mean().backward();
    opt.step();
  }
  std::vector<Tensor> after = net->parameters();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(same_values(before[i], after[i]));
  EXPECT_FALSE(same_values(copy->fc1->weight, net->fc1->weight));
  EXPECT_EQ(copy->norm->num_batches_tracked.item<int64_t>(), 3);
  EXPECT_EQ(net->norm->num_batches_tracked.item<int64_t>(), 0);
}

TEST(ModuleClone, TiesAndSharedChildrenStayTiedInTheCopy) {
  auto lm = std::make_shared<TiedLm>();
  std::shared_ptr<TiedLm> copy = lm->clone();  // Cloneable: the root's own type
  EXPECT_TRUE(copy->head_weight.is_same(copy->embed->weight));
  EXPECT_FALSE(copy->head_weight.is_same(lm->head_weight));
  EXPECT_EQ(copy->find_child("block").get(), copy->find_child("block_again").get());
  EXPECT_EQ(copy->block.get(), copy->find_child("block").get());
  EXPECT_NE(copy->block.get(), lm->block.get());
  EXPECT_EQ(copy->parameters().size(), lm->parameters().size());
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 4, 7});
  EXPECT_TRUE(same_values((*copy)(ids), (*lm)(ids)));
}

TEST(ModuleClone, KilnLayersAndContainersCloneThroughTheBaseClass) {
  manual_seed(3);
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Conv2d>(1, 2, 3),
                                              std::make_shared<nn::ReLU>(),
                                              std::make_shared<nn::Flatten>());
  std::vector<std::shared_ptr<nn::Module>> more = {std::make_shared<nn::Linear>(8, 3)};
  seq->extend(more);  // untyped: kiln knows its own layers anyway
  std::shared_ptr<nn::Module> base = seq;
  std::shared_ptr<nn::Module> copy = base->clone();
  ASSERT_NE(std::dynamic_pointer_cast<nn::Sequential>(copy), nullptr);
  EXPECT_EQ(copy->repr(), seq->repr());
  Tensor x = randn({2, 1, 4, 4});
  EXPECT_TRUE(same_values((*copy)(x), (*seq)(x)));

  auto lstm = std::make_shared<nn::LSTM>(3, 4, nn::RNNOptions{.num_layers = 2, .bidirectional = true});
  auto lstm_copy = nn::clone(lstm);
  EXPECT_EQ(lstm_copy->all_weights().size(), lstm->all_weights().size());
  EXPECT_TRUE(lstm_copy->all_weights()[1][0].is_same(*lstm_copy->find_parameter("weight_ih_l0_reverse")));
  Tensor seq_in = randn({5, 2, 3});
  EXPECT_TRUE(same_values(lstm_copy->forward(seq_in), lstm->forward(seq_in)));

  auto encoder = std::make_shared<nn::TransformerEncoder>(
      std::make_shared<nn::TransformerEncoderLayer>(8, 2, nn::TransformerEncoderLayerOptions{.dropout = 0}), 2,
      std::make_shared<nn::LayerNorm>(8));
  auto encoder_copy = nn::clone(encoder);
  EXPECT_NE(encoder_copy->norm.get(), encoder->norm.get());
  EXPECT_EQ(encoder_copy->norm.get(), encoder_copy->find_child("norm").get());
  Tensor tokens = randn({3, 2, 8});
  EXPECT_TRUE(same_values(encoder_copy->forward(tokens), encoder->forward(tokens)));
}

// Every kiln layer with state or settings, cloned through the base class: the same class,
// printout, state (in storage of its own) and function.
TEST(ModuleClone, EveryKilnLayerClonesToTheSameFunction) {
  manual_seed(5);
  struct Sample {
    std::shared_ptr<nn::Module> layer;
    Tensor input;  // undefined: no single-tensor forward to compare
  };
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 3, 0, 2, 3, 1}, {2, 3});
  const std::vector<Sample> samples = {
      {std::make_shared<nn::Linear>(4, 3), randn({2, 4})},
      {std::make_shared<nn::Conv1d>(2, 3, 3), randn({2, 2, 6})},
      {std::make_shared<nn::Conv2d>(2, 3, 3, nn::Conv2dOptions{.padding = 1}), randn({1, 2, 5, 5})},
      {std::make_shared<nn::Conv3d>(1, 2, 2), randn({1, 1, 3, 3, 3})},
      {std::make_shared<nn::ConvTranspose1d>(2, 3, 3), randn({1, 2, 4})},
      {std::make_shared<nn::ConvTranspose2d>(2, 2, 3), randn({1, 2, 3, 3})},
      {std::make_shared<nn::ConvTranspose3d>(1, 2, 2), randn({1, 1, 2, 2, 2})},
      {std::make_shared<nn::Embedding>(4, 3), ids},
      {std::make_shared<nn::EmbeddingBag>(4, 3), ids},
      {std::make_shared<nn::LayerNorm>(4), randn({3, 4})},
      {std::make_shared<nn::RMSNorm>(4), randn({3, 4})},
      {std::make_shared<nn::GroupNorm>(2, 4), randn({2, 4, 3})},
      {std::make_shared<nn::BatchNorm1d>(4), randn({5, 4})},
      {std::make_shared<nn::BatchNorm2d>(2), randn({2, 2, 3, 3})},
      {std::make_shared<nn::InstanceNorm1d>(3, nn::InstanceNormOptions{.affine = true}), randn({2, 3, 5})},
      {std::make_shared<nn::PReLU>(3), randn({2, 3})},
      {std::make_shared<nn::RNN>(3, 4), randn({5, 2, 3})},
      {std::make_shared<nn::GRU>(3, 4, nn::RNNOptions{.num_layers = 2}), randn({5, 2, 3})},
      {std::make_shared<nn::LSTMCell>(3, 4), randn({2, 3})},
      {std::make_shared<nn::GRUCell>(3, 4), randn({2, 3})},
      {std::make_shared<nn::MultiheadAttention>(8, 2), Tensor()},
      {std::make_shared<nn::TransformerDecoderLayer>(8, 2, nn::TransformerDecoderLayerOptions{.dim_feedforward = 16}),
       Tensor()},
      {std::make_shared<nn::Transformer>(8, 2, nn::TransformerOptions{.num_encoder_layers = 1, .num_decoder_layers = 1,
                                                                       .dim_feedforward = 16}),
       Tensor()},
      {std::make_shared<nn::Upsample>(nn::UpsampleOptions{.scale_factor = {2}, .mode = "bilinear"}),
       randn({1, 1, 2, 2})},
      {std::make_shared<nn::PixelShuffle>(2), randn({1, 4, 2, 2})},
      {std::make_shared<nn::ReflectionPad2d>(1), randn({1, 1, 3, 3})},
      {std::make_shared<nn::ConstantPad1d>(std::vector<int64_t>{1, 2}, 0.5), randn({1, 2, 3})},
      {std::make_shared<nn::MaxPool2d>(2), randn({1, 1, 4, 4})},
      {std::make_shared<nn::AvgPool1d>(2), randn({1, 2, 4})},
      {std::make_shared<nn::AdaptiveMaxPool2d>(2), randn({1, 1, 5, 5})},
      {std::make_shared<nn::Unflatten>(1, std::vector<int64_t>{2, 3}), randn({2, 6})},
      {std::make_shared<nn::Softplus>(2.0, 10.0), randn({3})},
      {std::make_shared<nn::GLU>(1), randn({2, 4})},
      {std::make_shared<nn::Dropout2d>(0.3), randn({1, 2, 3, 3})},
  };
  for (const Sample& s : samples) {
    s.layer->eval();
    std::shared_ptr<nn::Module> copy = s.layer->clone();
    const std::string name = s.layer->type_name();
    ASSERT_EQ(copy->type_name(), name);
    EXPECT_EQ(copy->repr(), s.layer->repr()) << name;
    EXPECT_FALSE(copy->is_training()) << name;
    auto original = s.layer->state_dict(), copied = copy->state_dict();
    ASSERT_EQ(original.size(), copied.size()) << name;
    for (size_t i = 0; i < original.size(); ++i) {
      EXPECT_EQ(original[i].first, copied[i].first) << name;
      EXPECT_TRUE(same_values(original[i].second, copied[i].second)) << name << " " << original[i].first;
      EXPECT_NE(original[i].second.impl()->storage.get(), copied[i].second.impl()->storage.get())
          << name << " " << original[i].first;
    }
    if (s.input.defined()) {
      EXPECT_TRUE(same_values((*copy)(s.input), (*s.layer)(s.input))) << name;
    }
  }
}

TEST(ModuleClone, ACompiledCopyMatchesTheOriginal) {
  manual_seed(4);
  auto net = std::make_shared<Net>();
  net->eval();
  auto copy = nn::clone(net);
  auto compiled = compile(copy);
  Tensor x = randn({4, 4});
  EXPECT_TRUE(same_values(compiled(x), (*net)(x)));
}

struct Opaque : nn::Module {
  Tensor forward(const Tensor& x) override { return x; }
};
struct Uncopyable : nn::Module {
  Uncopyable() { fc = register_module("fc", std::make_shared<nn::Linear>(2, 2)); }
  Tensor forward(const Tensor& x) override { return fc(x); }
  nn::ModulePtr<nn::Linear> fc;
  std::unique_ptr<int> scratch = std::make_unique<int>(0);
};
struct HoldsUncopyable : nn::Module {
  HoldsUncopyable() { inner = register_module("inner", std::make_shared<Uncopyable>()); }
  nn::ModulePtr<Uncopyable> inner;
};

// A user class seen only through a container's typed insert is known to clone.
struct Scaler : nn::Module {
  Scaler() { factor = register_parameter("factor", full({1}, 3.0)); }
  Tensor forward(const Tensor& x) override { return x * factor; }
  Tensor factor;
};
TEST(ModuleClone, TypedContainerInsertsMakeAUserClassKnown) {
  auto list = std::make_shared<nn::ModuleList>();
  list->push_back(std::make_shared<Scaler>());
  auto dict = std::make_shared<nn::ModuleDict>();
  dict->insert("s", std::make_shared<Scaler>());
  std::shared_ptr<nn::Module> list_copy = list->clone(), dict_copy = dict->clone();
  auto scaler = std::dynamic_pointer_cast<Scaler>(list_copy->find_child("0"));
  ASSERT_NE(scaler, nullptr);
  EXPECT_TRUE(scaler->factor.is_same(*scaler->find_parameter("factor")));
  EXPECT_FALSE(scaler->factor.is_same(list->at<Scaler>(0)->factor));
  EXPECT_NE(std::dynamic_pointer_cast<Scaler>(dict_copy->find_child("s")), nullptr);
}

TEST(ModuleClone, ErrorsNameTheModuleAndTheFix) {
  // A root made with make_shared and cloned through the base class: kiln never saw Opaque.
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::shared_ptr<nn::Module>(std::make_shared<Opaque>()));
  expect_error([&] { (void)seq->clone(); },
               {"[Module::clone] '0' (Opaque): kiln has not seen this class by its type",
                "Fix: clone the root with kiln::nn::clone(ptr)", "kiln::nn::Cloneable<Opaque>"});
  // A class with a member that cannot be copied.
  auto holder = std::make_shared<HoldsUncopyable>();
  expect_error([&] { (void)nn::clone(holder); },
               {"'inner' (Uncopyable): its class cannot be copy-constructed", "std::unique_ptr"});
  // A plain copy would share the parameters: refused.
  Net net;
  expect_error([&] { Net shallow = net; }, {"[Module] a Net was copied with its copy constructor",
                                            "Fix: call clone()"});
  // A lazy layer that has not run has no shape to copy.
  auto lazy = std::make_shared<nn::LazyLinear>(3);
  expect_error([&] { (void)nn::clone(lazy); }, {"'weight' is an uninitialized parameter", "build("});
  (*lazy)(randn({2, 5}));
  EXPECT_EQ(Shape(nn::clone(lazy)->weight.sizes()), Shape({3, 5}));
}

TEST(ModuleClone, OntoADevice) {
  auto net = std::make_shared<Net>();
  auto copy = nn::clone(net, kCPU);
  EXPECT_TRUE(copy->fc1->weight.device().is_cpu());
  EXPECT_FALSE(copy->fc1->weight.is_same(net->fc1->weight));
}

}  // namespace
}  // namespace kiln
