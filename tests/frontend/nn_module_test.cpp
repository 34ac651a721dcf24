// kiln::nn::Module: registration and its errors, tree walks (paths, sharing, tied weights),
// train/eval, to(), zero_grad, freezing, hooks, call frames and error context, the
// call-time registration check (std::vector of layers, layer built in forward, stateless
// modules, the opt-out) and PyTorch-style printing.
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

// ---- the seed models ----

struct Mlp : Module {
  ModulePtr<Linear> fc1 = register_module("fc1", std::make_shared<Linear>(4, 8));
  ModulePtr<nn::ReLU> act = register_module("act", std::make_shared<nn::ReLU>());
  ModulePtr<Linear> fc2 = register_module("fc2", std::make_shared<Linear>(8, 3));
  Tensor forward(const Tensor& x) override { return fc2(act(fc1(x))); }
};

struct Encoder : Module {
  ModulePtr<nn::Sequential> block =
      register_module("block", std::make_shared<nn::Sequential>(std::make_shared<Linear>(4, 6),
                                                                std::make_shared<nn::ReLU>()));
  Tensor forward(const Tensor& x) override { return block(x); }
};

struct Classifier : Module {
  ModulePtr<Encoder> encoder = register_module("encoder", std::make_shared<Encoder>());
  ModulePtr<Linear> head = register_module("head", std::make_shared<Linear>(6, 2));
  Tensor forward(const Tensor& x) override { return head(encoder(x)); }
};

// PyTorch's silent bug: layers kept in a plain std::vector are never registered.
struct VectorModel : Module {
  std::vector<std::shared_ptr<Linear>> layers{std::make_shared<Linear>(4, 4),
                                              std::make_shared<Linear>(4, 4)};
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& l : layers) h = (*l)(h);
    return h;
  }
};

// Keras's blind spot: a layer built inside forward has fresh weights on every call.
struct BuildsInForward : Module {
  Tensor forward(const Tensor& x) override {
    auto fresh = std::make_shared<Linear>(4, 2);
    return (*fresh)(x);
  }
};

// Stateless helpers need no registration.
struct StatelessInVector : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
  std::vector<std::shared_ptr<Module>> acts{std::make_shared<nn::ReLU>(),
                                            std::make_shared<nn::Tanh>()};
  Tensor forward(const Tensor& x) override {
    Tensor h = fc(x);
    for (auto& a : acts) h = (*a)(h);
    return h;
  }
};

// A student calling a teacher it holds by reference, explicitly allowed.
struct Student : Module {
  explicit Student(Module& teacher) : teacher(teacher) {}
  Module& teacher;
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 3));
  Tensor forward(const Tensor& x) override { return fc(x) + teacher(x); }
};

struct TwoInput : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(2, 2));
  Tensor forward(const Tensor& a, const Tensor& b) { return fc(a) + b; }
};

struct UsesTwoInput : Module {
  ModulePtr<TwoInput> inner = register_module("inner", std::make_shared<TwoInput>());
  Tensor forward(const Tensor& x) override { return inner(x, x); }
};

// ---- registration ----

TEST(NnModule, RegistrationAndPaths) {
  Mlp m;
  EXPECT_EQ(keys(m.named_parameters()),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(m.parameters().size(), 4u);
  EXPECT_TRUE(m.fc1->weight.is_same(m.named_parameters()[0].second));
  EXPECT_TRUE(m.fc1->weight.requires_grad());
  EXPECT_EQ(keys(m.named_parameters("model")),
            (std::vector<std::string>{"model.fc1.weight", "model.fc1.bias", "model.fc2.weight",
                                      "model.fc2.bias"}));
  EXPECT_TRUE(m.named_parameters("", /*recurse=*/false).empty());
  EXPECT_EQ(keys(m.fc1->named_parameters("", false)), (std::vector<std::string>{"weight", "bias"}));
  ASSERT_EQ(m.named_children().size(), 3u);
  EXPECT_EQ(m.named_children()[1].first, "act");
  EXPECT_EQ(m.children().size(), 3u);
  auto mods = m.named_modules();
  ASSERT_EQ(mods.size(), 4u);
  EXPECT_EQ(mods[0].first, "");
  EXPECT_EQ(mods[0].second, &m);
  EXPECT_EQ(mods[3].first, "fc2");
  EXPECT_EQ(m.modules().size(), 4u);
  EXPECT_EQ(m.type_name(), "Mlp");
  EXPECT_EQ(m.fc1->type_name(), "Linear");
  EXPECT_EQ(m.find_child("fc2"), m.fc2);
  EXPECT_EQ(m.find_child("nope"), nullptr);
}

TEST(NnModule, ClassifierPaths) {
  Classifier c;
  EXPECT_EQ(keys(c.named_parameters()),
            (std::vector<std::string>{"encoder.block.0.weight", "encoder.block.0.bias",
                                      "head.weight", "head.bias"}));
  std::vector<std::string> module_paths;
  for (auto& [p, m] : c.named_modules()) module_paths.push_back(p);
  EXPECT_EQ(module_paths, (std::vector<std::string>{"", "encoder", "encoder.block",
                                                    "encoder.block.0", "encoder.block.1", "head"}));
  Tensor y = c(kiln::randn({3, 4}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
}

TEST(NnModule, BuffersPersistentAndNot) {
  struct WithBuffers : Module {
    Tensor scale = register_buffer("scale", kiln::full({2}, 3.0));
    Tensor cache = register_buffer("cache", kiln::zeros({2}), /*persistent=*/false);
    Tensor w = register_parameter("w", kiln::ones({2}));
  };
  WithBuffers m;
  EXPECT_EQ(keys(m.named_buffers()), (std::vector<std::string>{"scale", "cache"}));
  EXPECT_EQ(keys(m.named_persistent_buffers()), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(m.buffers().size(), 2u);
  EXPECT_FALSE(m.scale.requires_grad());
  EXPECT_TRUE(m.is_buffer_persistent("scale"));
  EXPECT_FALSE(m.is_buffer_persistent("cache"));
  ASSERT_NE(m.find_buffer("cache"), nullptr);
  EXPECT_TRUE(m.find_buffer("cache")->is_same(m.cache));
  EXPECT_EQ(keys(m.named_parameters()), (std::vector<std::string>{"w"}));
  // In a tree, persistent buffers keep their paths.
  nn::Sequential seq(std::make_shared<WithBuffers>());
  EXPECT_EQ(keys(seq.named_persistent_buffers()), (std::vector<std::string>{"0.scale"}));
}

TEST(NnModule, NameErrors) {
  struct Empty : Module {};
  Empty m;
  expect_error([&] { m.register_parameter("", kiln::ones({1})); },
               {"[Module::register_parameter]", "Empty", "name is empty", "Fix:"});
  expect_error([&] { m.register_buffer("a.b", kiln::ones({1})); },
               {"[Module::register_buffer]", "'a.b'", "contains '.'", "Fix: use '_'"});
  expect_error([&] { m.register_module("x.y", std::make_shared<nn::ReLU>()); },
               {"[Module::register_module]", "contains '.'"});
  m.register_parameter("w", kiln::ones({1}));
  expect_error([&] { m.register_parameter("w", kiln::ones({1})); },
               {"Empty already has a parameter named 'w'", "Fix: give each"});
  expect_error([&] { m.register_buffer("w", kiln::ones({1})); },
               {"already has a parameter named 'w'"});
  m.register_module("child", std::make_shared<nn::ReLU>());
  expect_error([&] { m.register_parameter("child", kiln::ones({1})); },
               {"already has a child module named 'child'"});
  expect_error([&] { m.register_module("null", std::shared_ptr<Linear>()); },
               {"child 'null' is null", "Fix:"});
  auto self = std::make_shared<Empty>();
  expect_error([&] { self->register_module("me", self); }, {"cannot be its own child"});
  Tensor leaf = kiln::ones({2}).requires_grad_();
  expect_error([&] { m.register_parameter("computed", leaf * 2.0); },
               {"must be a leaf tensor", "Fix: register tensor.detach()"});
  expect_error([&] { m.register_parameter("ints", kiln::zeros({2}, kInt64)); },
               {"'ints' is int64", "register it as a buffer"});
  // An integer parameter without gradients is allowed.
  EXPECT_NO_THROW(m.register_parameter("idx", kiln::zeros({2}, kInt64), false));
}

TEST(NnModule, StateLargerThanTheLimitIsRefusedBeforeItIsWritten) {
  struct Empty : Module {};
  Empty m;
  const int64_t saved = nn::max_state_elements();
  EXPECT_EQ(saved, int64_t{1} << 31);
  nn::set_max_state_elements(100);
  expect_error(
      [&] {
        m.register_parameter("w", Tensor::empty({10, 11}));
      },
      {"[Module::register_parameter] Empty: parameter 'w' float32[10, 11] has 110 "
       "elements",
       "more than the limit of 100 per tensor", "set_max_state_elements",
       "KILN_MAX_STATE_ELEMENTS"});
  expect_error([&] { m.register_buffer("b", Tensor::empty({101})); }, {"buffer 'b'"});
  expect_error([&] { Linear(10, 20); }, {"Linear: parameter 'weight' float32[20, 10]"});
  EXPECT_NO_THROW(m.register_parameter("small", Tensor::empty({10, 10})));
  // A lazy layer is checked when its input sizes it (after its initializer ran).
  nn::LazyLinear lazy(20);
  expect_error(
      [&] {
        lazy(kiln::ones({1, 10}));
      },
      {"[materialize_parameter]", "float32[20, 10], 200 elements", "more than the limit of 100"});
  expect_error([] { nn::set_max_state_elements(0); }, {"expected a positive element count"});
  nn::set_max_state_elements(saved);
  EXPECT_NO_THROW(Linear(10, 20));
}

TEST(NnModule, UndefinedParameterSlotsAreSkipped) {
  Linear l(3, 2, /*bias=*/false);
  EXPECT_FALSE(l.bias.defined());
  EXPECT_EQ(keys(l.named_parameters()), (std::vector<std::string>{"weight"}));
  ASSERT_NE(l.find_parameter("bias"), nullptr);  // the slot exists
  expect_error([&] { l.register_parameter("bias", Tensor()); }, {"already has a parameter"});
}

// ---- sharing ----

TEST(NnModule, TiedWeightsCountedOnce) {
  struct Tied : Module {
    ModulePtr<nn::Embedding> embed =
        register_module("embed", std::make_shared<nn::Embedding>(10, 4));
    ModulePtr<Linear> out = register_module("out", std::make_shared<Linear>(4, 10, false));
    Tied() {
      // Tie out.weight to embed.weight: re-register the shared tensor in out's slot.
      out->weight = embed->weight;
      *out->find_parameter("weight") = embed->weight;
    }
    Tensor forward(const Tensor& idx) override { return out(embed(idx)); }
  };
  Tied m;
  EXPECT_EQ(m.parameters().size(), 1u);
  EXPECT_EQ(keys(m.named_parameters()), (std::vector<std::string>{"embed.weight"}));
  EXPECT_EQ(keys(m.named_parameters("", true, /*remove_duplicate=*/false)),
            (std::vector<std::string>{"embed.weight", "out.weight"}));
  // One backward accumulates both uses into the one tensor.
  Tensor idx = Tensor::from_vector<int64_t>({1, 3});
  m(idx).sum().backward();
  EXPECT_TRUE(m.embed->weight.grad().defined());
  EXPECT_EQ(m.embed->weight.grad().shape(), (Shape{10, 4}));
}

TEST(NnModule, SharedChildListedOnce) {
  struct Shared : Module {
    std::shared_ptr<Linear> layer = std::make_shared<Linear>(3, 3);
    ModulePtr<Linear> a = register_module("a", layer);
    ModulePtr<Linear> b = register_module("b", layer);
    Tensor forward(const Tensor& x) override { return b(a(x)); }
  };
  Shared m;
  EXPECT_EQ(m.parameters().size(), 2u);
  EXPECT_EQ(keys(m.named_parameters()), (std::vector<std::string>{"a.weight", "a.bias"}));
  EXPECT_EQ(keys(m.named_parameters("", true, false)),
            (std::vector<std::string>{"a.weight", "a.bias", "b.weight", "b.bias"}));
  EXPECT_EQ(m.named_modules().size(), 2u);
  EXPECT_EQ(m.named_modules("", false).size(), 3u);
  int calls = 0;
  m.apply([&](Module&) { ++calls; });
  EXPECT_EQ(calls, 2);  // the shared child once, then the root
  EXPECT_NO_THROW(m(kiln::randn({2, 3})));
}

TEST(NnModule, ApplyVisitsChildrenFirst) {
  Classifier c;
  std::vector<std::string> order;
  c.apply([&](Module& m) { order.push_back(m.type_name()); });
  EXPECT_EQ(order, (std::vector<std::string>{"Linear", "ReLU", "Sequential", "Encoder", "Linear",
                                             "Classifier"}));
  // apply as an initializer: zero every Linear's bias.
  c.apply([](Module& m) {
    if (auto* l = dynamic_cast<Linear*>(&m)) {
      NoGradGuard g;
      l->bias.detach().zero_();
    }
  });
  for (double v : c.head->bias.to_vector<double>()) EXPECT_EQ(v, 0.0);
}

// ---- whole-model state ----

TEST(NnModule, EvalReachesDropoutDeepInTree) {
  struct Deep : Module {
    ModulePtr<nn::Sequential> outer = register_module(
        "outer", std::make_shared<nn::Sequential>(
                     std::make_shared<nn::Sequential>(std::make_shared<nn::Dropout>(0.5))));
    Tensor forward(const Tensor& x) override { return outer(x); }
  };
  Deep m;
  auto drop = m.outer->at<nn::Sequential>(0)->at<nn::Dropout>(0);
  EXPECT_TRUE(drop->is_training());
  m.eval();
  EXPECT_FALSE(m.is_training());
  EXPECT_FALSE(drop->is_training());
  Tensor x = kiln::ones({64});
  EXPECT_EQ(m(x).to_vector<double>(), x.to_vector<double>());  // identity in eval
  m.train();
  EXPECT_TRUE(drop->is_training());
  auto y = m(x).to_vector<double>();
  int zeros = 0;
  for (double v : y) {
    EXPECT_TRUE(v == 0.0 || v == 2.0);
    zeros += v == 0.0;
  }
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, 64);
}

TEST(NnModule, ToDtypeConvertsInPlace) {
  Mlp m;
  Tensor handle = m.fc1->weight;  // e.g. an optimizer's reference
  auto before = handle.to_vector<double>();
  m(kiln::randn({2, 4})).sum().backward();
  m.to(kFloat64);
  EXPECT_EQ(handle.dtype(), kFloat64);
  EXPECT_EQ(m.fc1->weight.dtype(), kFloat64);
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_EQ(handle.grad().dtype(), kFloat64);
  auto after = handle.to_vector<double>();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_FLOAT_EQ(before[i], after[i]);
  Tensor y = m(kiln::randn({2, 4}, kFloat64));
  EXPECT_EQ(y.dtype(), kFloat64);
  // Integer buffers keep their dtype.
  nn::BatchNorm1d bn(3);
  bn.to(kFloat64);
  EXPECT_EQ(bn.running_mean.dtype(), kFloat64);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), kInt64);
  expect_error([&] { m.to(kInt32); }, {"[Module::to]", "floating-point dtypes", "Fix:"});
  EXPECT_NO_THROW(m.to(kCPU));
  EXPECT_EQ(m.fc1->weight.device(), kCPU);
}

TEST(NnModule, ZeroGradAndFreezing) {
  Mlp m;
  m(kiln::randn({2, 4})).sum().backward();
  EXPECT_TRUE(m.fc1->weight.grad().defined());
  m.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(m.fc1->weight.grad().defined());
  for (double v : m.fc1->weight.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
  m.zero_grad();
  EXPECT_FALSE(m.fc1->weight.grad().defined());

  m.fc1->requires_grad_(false);  // freeze the first layer
  EXPECT_FALSE(m.fc1->weight.requires_grad());
  EXPECT_EQ(m.parameters().size(), 4u);  // frozen parameters stay registered
  m(kiln::randn({2, 4})).sum().backward();
  EXPECT_FALSE(m.fc1->weight.grad().defined());
  EXPECT_TRUE(m.fc2->weight.grad().defined());
  m.requires_grad_(true);
  EXPECT_TRUE(m.fc1->weight.requires_grad());
}

// ---- hooks ----

TEST(NnModule, ForwardHooks) {
  Mlp m;
  std::vector<std::string> events;
  auto pre = m.fc1->register_forward_pre_hook([&](Module& mod, const std::vector<Tensor>& in) {
    events.push_back("pre " + mod.type_name() + " " + std::to_string(in.size()));
    EXPECT_EQ(in[0].shape(), (Shape{2, 4}));
  });
  auto post = m.fc1->register_forward_hook(
      [&](Module&, const std::vector<Tensor>& in, const std::vector<Tensor>& out) {
        events.push_back("post " + std::to_string(in.size()) + " " + std::to_string(out.size()));
        EXPECT_EQ(out[0].shape(), (Shape{2, 8}));
        // Hooks run inside the module's frame.
        EXPECT_EQ(nn::call_stack().back().path, "fc1");
      });
  EXPECT_TRUE(m.fc1->has_forward_hooks());
  m(kiln::randn({2, 4}));
  EXPECT_EQ(events, (std::vector<std::string>{"pre Linear 1", "post 1 1"}));
  pre.remove();
  pre.remove();  // idempotent
  m(kiln::randn({2, 4}));
  EXPECT_EQ(events.size(), 3u);
  post.remove();
  EXPECT_FALSE(m.fc1->has_forward_hooks());
  m(kiln::randn({2, 4}));
  EXPECT_EQ(events.size(), 3u);

  // Multi-input modules show every tensor argument.
  UsesTwoInput u;
  size_t seen = 0;
  u.inner->register_forward_pre_hook(
      [&](Module&, const std::vector<Tensor>& in) { seen = in.size(); });
  u(kiln::randn({1, 2}));
  EXPECT_EQ(seen, 2u);
}

// ---- call frames and error context ----

TEST(NnModule, CallStackAndErrorContext) {
  struct Probe : Module {
    std::vector<std::string> seen;
    Tensor forward(const Tensor& x) override {
      for (const auto& f : nn::call_stack()) seen.push_back(f.path + ":" + f.module->type_name());
      return x;
    }
  };
  struct Holder : Module {
    ModulePtr<nn::ModuleList> blocks =
        register_module("blocks", std::make_shared<nn::ModuleList>());
    std::shared_ptr<Probe> probe = std::make_shared<Probe>();
    Holder() {
      blocks->push_back(probe);
      blocks->push_back(std::make_shared<Linear>(3, 3));
    }
    Tensor forward(const Tensor& x) override {
      Tensor h = (*(*blocks)[0])(x);
      return (*(*blocks)[1])(h);
    }
  };
  Holder h;
  h(kiln::randn({2, 3}));
  EXPECT_EQ(h.probe->seen, (std::vector<std::string>{":Holder", "blocks.0:Probe"}));
  EXPECT_TRUE(nn::call_stack().empty());
  EXPECT_EQ(nn::call_context(), "");
  // An error inside blocks.1 names it.
  expect_error(
      [&] {
        h(kiln::randn({2, 5}));
      },
      {"[Linear] expected an input whose last dim is in_features = 3",
       "(in module blocks.1, Linear)"});
  EXPECT_TRUE(nn::call_stack().empty());  // frames unwound after the throw
  // A module called directly is the root of its own run.
  expect_error([&] { Linear(3, 3)(kiln::randn({2, 5})); }, {"(in the root module, Linear)"});
}

TEST(NnModule, DefaultForwardAndMultiInputCall) {
  struct NoForward : Module {};
  NoForward m;
  expect_error([&] { m(kiln::ones({1})); },
               {"[Module] NoForward has no single-tensor forward", "kiln::nn::call"});
  UsesTwoInput u;
  Tensor y = u(kiln::ones({1, 2}));
  EXPECT_EQ(y.shape(), (Shape{1, 2}));
  TwoInput t;
  Tensor z = nn::call(t, kiln::ones({1, 2}), kiln::zeros({1, 2}));
  EXPECT_EQ(z.shape(), (Shape{1, 2}));
  ModulePtr<Linear> empty;
  expect_error([&] { empty(kiln::ones({1, 2})); }, {"empty ModulePtr<Linear>", "Fix:"});
}

// ---- the registration check ----

TEST(NnModule, VectorOfLayersIsCaught) {
  VectorModel m;
  EXPECT_TRUE(m.parameters().empty());  // what PyTorch would silently train: nothing
  expect_error(
      [&] {
        m(kiln::randn({2, 4}));
      },
      {"[Module] the root module (VectorModel) called a Linear",
       "not registered in the model being run (VectorModel)",
       "Fix: create it once in VectorModel's constructor", "register_module(\"name\", layer)",
       "ModuleList/ModuleDict/Sequential", "kiln::nn::allow_unregistered_call"});
  EXPECT_TRUE(nn::call_stack().empty());
  // Nested: the caller's path is named.
  struct Outer : Module {
    ModulePtr<VectorModel> inner = register_module("inner", std::make_shared<VectorModel>());
    Tensor forward(const Tensor& x) override { return inner(x); }
  };
  Outer o;
  expect_error(
      [&] {
        o(kiln::randn({2, 4}));
      },
      {"module 'inner' (VectorModel) called a Linear", "(in module inner, VectorModel)"});
}

TEST(NnModule, LayerBuiltInForwardIsCaught) {
  BuildsInForward m;
  expect_error([&] { m(kiln::randn({2, 4})); }, {"called a Linear", "fresh weights on every call"});
}

TEST(NnModule, StatelessUnregisteredModulesAreAllowed) {
  StatelessInVector m;
  Tensor y;
  EXPECT_NO_THROW(y = m(kiln::randn({2, 4})));
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
}

TEST(NnModule, AllowUnregisteredCallOptOut) {
  Mlp teacher;
  teacher.requires_grad_(false);
  Student s(teacher);
  expect_error([&] { s(kiln::randn({2, 4})); }, {"called a Mlp", "allow_unregistered_call"});
  nn::allow_unregistered_call(teacher);
  EXPECT_TRUE(teacher.unregistered_call_allowed());
  Tensor y;
  EXPECT_NO_THROW(y = s(kiln::randn({2, 4})));
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.parameters().size(), 2u);  // the teacher's state is not the student's
}

TEST(NnModule, RegistrationDuringForwardIsSeen) {
  // A module registering a child on its first call (lazy construction) is not flagged.
  struct LazyChild : Module {
    std::shared_ptr<Linear> fc;
    Tensor forward(const Tensor& x) override {
      if (!fc) fc = register_module("fc", std::make_shared<Linear>(x.size(-1), 2));
      return (*fc)(x);
    }
  };
  struct Wrapper : Module {
    ModulePtr<LazyChild> lazy = register_module("lazy", std::make_shared<LazyChild>());
    Tensor forward(const Tensor& x) override { return lazy(x); }
  };
  Wrapper w;
  w(kiln::randn({1, 4}));  // warm the tree index before the registration
  Wrapper w2;
  Tensor y = w2(kiln::randn({3, 5}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(keys(w2.named_parameters()),
            (std::vector<std::string>{"lazy.fc.weight", "lazy.fc.bias"}));
}

// ---- printing ----

TEST(NnModule, PrintsLikePyTorch) {
  Classifier c;
  std::ostringstream os;
  os << c;
  EXPECT_EQ(os.str(),
            "Classifier(\n"
            "  (encoder): Encoder(\n"
            "    (block): Sequential(\n"
            "      (0): Linear(in_features=4, out_features=6, bias=true)\n"
            "      (1): ReLU()\n"
            "    )\n"
            "  )\n"
            "  (head): Linear(in_features=6, out_features=2, bias=true)\n"
            ")");
  // A module with both settings and children prints the settings first.
  struct Scaled : Module {
    ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(2, 2, false));
    std::string extra_repr() const override { return "scale=0.5"; }
  };
  EXPECT_EQ(Scaled().repr(),
            "Scaled(\n  scale=0.5\n  (fc): Linear(in_features=2, out_features=2, bias=false)\n)");
  struct Empty : Module {};
  EXPECT_EQ(Empty().repr(), "Empty()");
}

}  // namespace
}  // namespace kiln
