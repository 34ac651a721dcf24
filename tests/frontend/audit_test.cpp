// kiln::nn::audit: each disagreement between forward and the module tree (a trainable tensor
// member, a plain tensor member, a parameter without gradient, a duplicate registration),
// what must not be reported (non-persistent buffers, frozen parameters, shared modules,
// constants made per call, the loss function's tensors), module paths, multi-input and
// loss-function forms, the in-place fallback, the errors, and that the audit leaves grads,
// buffers, training flags and the generator exactly as they were.
#include "kiln/nn/audit.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kiln/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/nn/layers/lazy_linear.h"
#include "test_util.h"

namespace kiln {
namespace {

using nn::AuditCheck;
using nn::AuditFinding;
using nn::AuditReport;
using nn::AuditSeverity;
using nn::Linear;
using nn::Module;
using nn::ModulePtr;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- models ----

// A trainable scale kept as a raw member: it gets gradients, but no optimizer sees it.
struct RawScale : Module {
  Tensor scale = kiln::full({4}, 2.0).requires_grad_();
  Tensor forward(const Tensor& x) override { return x * scale; }
};

// A constant kept as a plain member: to() would not move it.
struct PlainShift : Module {
  Tensor shift = kiln::full({4}, 0.5);
  Tensor forward(const Tensor& x) override { return x + shift; }
};

// The right way to keep a constant: a non-persistent buffer.
struct ScaledResidual : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
  Tensor alpha = register_buffer("alpha", kiln::full({1}, 0.1), /*persistent=*/false);
  Tensor forward(const Tensor& x) override { return x + fc(x) * alpha; }
};

struct Blocks : Module {
  ModulePtr<nn::ModuleList> blocks;
  explicit Blocks(std::shared_ptr<Module> block)
      : blocks(register_module("blocks", std::make_shared<nn::ModuleList>(
                                             std::make_shared<Linear>(4, 4), std::move(block)))) {}
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& b : *blocks) h = (*b)(h);
    return h;
  }
};

struct Mlp : Module {
  ModulePtr<Linear> fc1 = register_module("fc1", std::make_shared<Linear>(4, 8));
  ModulePtr<nn::ReLU> act = register_module("act", std::make_shared<nn::ReLU>());
  ModulePtr<Linear> fc2 = register_module("fc2", std::make_shared<Linear>(8, 3));
  Tensor forward(const Tensor& x) override { return fc2(act(fc1(x))); }
};

struct UnusedParam : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 2));
  Tensor unused = register_parameter("unused", kiln::zeros({3}));
  Tensor forward(const Tensor& x) override { return fc(x); }
};

struct DetachedParam : Module {
  Tensor w = register_parameter("w", kiln::full({4}, 3.0));
  Tensor forward(const Tensor& x) override { return x * w.detach(); }
};

struct FrozenParam : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
  Tensor w = register_parameter("w", kiln::full({4}, 3.0), /*requires_grad=*/false);
  Tensor forward(const Tensor& x) override { return fc(x) * w; }
};

struct Duplicate : Module {
  Tensor w1 = register_parameter("w1", kiln::full({4}, 1.0));
  Tensor w2 = register_parameter("w2", w1);
  Tensor forward(const Tensor& x) override { return x * w1 + x * w2; }
};

struct SharedMemory : Module {
  Tensor w1 = register_parameter("w1", kiln::full({4}, 1.0));
  Tensor w2 = register_parameter("w2", w1.detach());
  Tensor forward(const Tensor& x) override { return x * w1 + x * w2; }
};

// Tied weights through one shared child: normal, a note.
struct SharedLayer : Module {
  std::shared_ptr<Linear> layer = std::make_shared<Linear>(4, 4);
  ModulePtr<Linear> a = register_module("a", layer);
  ModulePtr<Linear> b = register_module("b", layer);
  Tensor forward(const Tensor& x) override { return b(a(x)); }
};

// An output layer tied to another module's weight (the embedding/lm-head idiom): a note.
struct TiedHead : Module {
  ModulePtr<Linear> up = register_module("up", std::make_shared<Linear>(4, 4, false));
  ModulePtr<Linear> down = register_module("down", std::make_shared<Linear>(4, 4, false));
  TiedHead() { down->register_parameter("tied", up->weight); }
  Tensor forward(const Tensor& x) override { return down(up(x)); }
};

struct Encoder : Module {
  ModulePtr<nn::Sequential> block = register_module(
      "block",
      std::make_shared<nn::Sequential>(std::make_shared<RawScale>(), std::make_shared<nn::ReLU>()));
  Tensor forward(const Tensor& x) override { return block(x); }
};

struct Nested : Module {
  ModulePtr<Encoder> encoder = register_module("encoder", std::make_shared<Encoder>());
  ModulePtr<Linear> head = register_module("head", std::make_shared<Linear>(4, 2));
  Tensor forward(const Tensor& x) override { return head(encoder(x)); }
};

struct TwoInputs : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
  Tensor gate = kiln::full({4}, 1.0);
  Tensor forward(const Tensor& x, const Tensor& y) { return fc(x) * y + gate; }
};

struct Throws : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
  Tensor forward(const Tensor& x) override {
    Tensor h = fc(x);
    KILN_FAIL("[Throws] expected nothing, found a test failure. Fix: none.");
    return h;
  }
};

// Constants made per call, by ops or without them, are not member tensors.
struct PerCallConstants : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
  Tensor forward(const Tensor& x) override {
    Tensor offsets = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
    Tensor ramp = kiln::arange(0.0, 4.0, 1.0);
    return (fc(x) + offsets) * ramp * 0.5 + kiln::zeros({4});
  }
};

struct PairOut : Module {
  ModulePtr<Linear> fc1 = register_module("fc1", std::make_shared<Linear>(4, 2));
  ModulePtr<Linear> fc2 = register_module("fc2", std::make_shared<Linear>(4, 2));
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& y) { return {fc1(x), fc2(y)}; }
};

struct IndexOut : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
  Tensor forward(const Tensor& x) override { return fc(x).argmax(-1); }
};

struct WithBatchNorm : Module {
  ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
  ModulePtr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
  ModulePtr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
  Tensor forward(const Tensor& x) override { return drop(bn(fc(x))); }
};

struct BatchNormWithPlainMember : Module {
  ModulePtr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
  Tensor shift = kiln::full({4}, 0.5);
  Tensor unused = register_parameter("unused", kiln::zeros({2}));
  Tensor forward(const Tensor& x) override { return bn(x) + shift; }
};

Tensor input(int64_t rows = 3) {
  return kiln::arange(0.0, static_cast<double>(rows * 4), 1.0).reshape({rows, 4}) * 0.1;
}

// ---- what is reported ----

TEST(Audit, TrainableRawMemberIsAnErrorWithItsPath) {
  Blocks model(std::make_shared<RawScale>());
  AuditReport r = nn::audit(model, input());
  ASSERT_EQ(r.findings.size(), 1u) << r;
  const AuditFinding& f = r.findings[0];
  EXPECT_EQ(f.severity, AuditSeverity::Error);
  EXPECT_EQ(f.check, AuditCheck::GradientOnUnregistered);
  EXPECT_EQ(f.module_path, "blocks.1");
  EXPECT_EQ(f.module_type, "RawScale");
  EXPECT_EQ(f.tensor, "float32 [4]");
  EXPECT_EQ(f.op, "mul");
  EXPECT_EQ(f.message,
            "blocks.1 (RawScale): a float32 [4] tensor used by mul received a gradient but is "
            "not a registered parameter: an optimizer built from parameters() will not train "
            "it, to() will not move it and state_dict() will not save it. Fix: "
            "register_parameter(\"name\", t) in RawScale's constructor and use the handle it "
            "returns.");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.to_string(), "1 error\n  error: blocks.1 (RawScale): a float32 [4]")) << r;
}

TEST(Audit, PlainTensorMemberIsReported) {
  Blocks model(std::make_shared<PlainShift>());
  AuditReport r = nn::audit(model, input());
  ASSERT_EQ(r.findings.size(), 1u) << r;
  const AuditFinding& f = r.findings[0];
  EXPECT_EQ(f.severity, AuditSeverity::Warning);
  EXPECT_EQ(f.check, AuditCheck::UnregisteredTensor);
  EXPECT_EQ(f.message,
            "blocks.1 (PlainShift): a float32 [4] tensor used by add is not a parameter, buffer "
            "or input — to() will not move it and state_dict() will not save it. Fix: "
            "register_buffer(\"name\", t) in PlainShift's constructor (persistent=false for a "
            "constant that need not be saved), or register_parameter if it should train.");
  EXPECT_FALSE(r.ok());
}

TEST(Audit, NonPersistentBufferConstantIsNotReported) {
  ScaledResidual model;
  AuditReport r = nn::audit(model, input());
  EXPECT_TRUE(r.findings.empty()) << r;
  EXPECT_TRUE(r.ok());
}

TEST(Audit, ConstantsMadePerCallAreNotReported) {
  PerCallConstants model;
  AuditReport r = nn::audit(model, input());
  EXPECT_TRUE(r.findings.empty()) << r;
}

TEST(Audit, UnusedParameterReceivesNoGradient) {
  UnusedParam model;
  AuditReport r = nn::audit(model, input());
  ASSERT_EQ(r.findings.size(), 1u) << r;
  const AuditFinding& f = r.findings[0];
  EXPECT_EQ(f.check, AuditCheck::NoGradient);
  EXPECT_EQ(f.severity, AuditSeverity::Warning);
  EXPECT_EQ(f.module_path, "");
  EXPECT_EQ(f.tensor, "unused (float32 [3])");
  EXPECT_EQ(f.message,
            "<root> (UnusedParam): parameter unused (float32 [3]) received no gradient: forward "
            "never used it. Fix: use it in forward, remove it, or freeze it with "
            "requires_grad_(false) if it is not meant to train.");
  EXPECT_EQ(r.trainable_parameters, 3);
  EXPECT_EQ(r.parameters_with_grad, 2);
}

TEST(Audit, DetachedParameterNamesTheOpThatUsedIt) {
  DetachedParam model;
  AuditReport r = nn::audit(model, input());
  ASSERT_EQ(r.findings.size(), 1u) << r;
  EXPECT_EQ(r.findings[0].op, "mul");
  EXPECT_TRUE(contains(r.findings[0].message,
                       "<root> (DetachedParam): parameter w (float32 [4]) received no gradient: "
                       "forward used it (mul in <root> (DetachedParam)) but the gradient did not "
                       "reach it: detached, used under NoGradGuard"))
      << r;
}

TEST(Audit, FrozenParameterIsNotMissingAGradient) {
  FrozenParam model;
  AuditReport r = nn::audit(model, input());
  EXPECT_TRUE(r.findings.empty()) << r;
  EXPECT_EQ(r.trainable_parameters, 2);
  EXPECT_EQ(r.parameters_with_grad, 2);
}

TEST(Audit, DuplicateRegistrationIsReported) {
  Duplicate model;
  AuditReport r = nn::audit(model, input());
  ASSERT_EQ(r.findings.size(), 1u) << r;
  const AuditFinding& f = r.findings[0];
  EXPECT_EQ(f.check, AuditCheck::DuplicateRegistration);
  EXPECT_EQ(f.severity, AuditSeverity::Warning);
  EXPECT_EQ(f.message,
            "<root> (Duplicate): the float32 [4] parameter w1 is registered again as parameter "
            "w2: parameters() lists it once, but state_dict() saves it under both names and "
            "load_state_dict() writes it twice. Fix: register each tensor once "
            "(register_parameter(\"w2\", w1) registers w1 again); to share a layer, register "
            "the same child module at both places.");
}

TEST(Audit, TwoLeavesOverOneMemoryAreReported) {
  SharedMemory model;
  AuditReport r = nn::audit(model, input());
  auto dups = r.of(AuditCheck::DuplicateRegistration);
  ASSERT_EQ(dups.size(), 1u) << r;
  EXPECT_TRUE(contains(dups[0].message,
                       "the float32 [4] parameter w2 shares its memory with "
                       "parameter w1: two registered tensors over one memory"))
      << r;
  EXPECT_FALSE(r.ok());
}

TEST(Audit, SharedModuleIsANoteOnly) {
  SharedLayer model;
  AuditReport r = nn::audit(model, input());
  ASSERT_EQ(r.findings.size(), 1u) << r;
  const AuditFinding& f = r.findings[0];
  EXPECT_EQ(f.severity, AuditSeverity::Info);
  EXPECT_EQ(f.check, AuditCheck::SharedModule);
  EXPECT_EQ(f.message,
            "a (Linear): the same Linear module is also registered as b: its 2 parameters are "
            "shared (tied weights); parameters() lists them once and state_dict() saves them "
            "under every path. Fix: nothing if the sharing is deliberate.");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.trainable_parameters, 2);
  EXPECT_TRUE(contains(r.to_string(), "1 note\n  note: a (Linear)")) << r;
}

TEST(Audit, WeightTiedAcrossModulesIsANote) {
  TiedHead model;
  AuditReport r = nn::audit(model, input());
  ASSERT_EQ(r.findings.size(), 1u) << r;
  EXPECT_EQ(r.findings[0].severity, AuditSeverity::Info);
  EXPECT_EQ(r.findings[0].module_path, "down");
  EXPECT_TRUE(contains(r.findings[0].message,
                       "down (Linear): the float32 [4, 4] parameter up.weight is also registered "
                       "as down.tied (weight tying)"))
      << r;
  EXPECT_TRUE(r.ok());
}

TEST(Audit, NestedPathsNameTheInnermostModule) {
  Nested model;
  AuditReport r = nn::audit(model, input());
  ASSERT_EQ(r.findings.size(), 1u) << r;
  EXPECT_EQ(r.findings[0].module_path, "encoder.block.0");
  EXPECT_TRUE(contains(r.findings[0].message, "encoder.block.0 (RawScale): a float32 [4] tensor"));
}

TEST(Audit, ForwardWithTwoTensorInputs) {
  TwoInputs model;
  Tensor x = input();
  Tensor y = kiln::full({3, 4}, 2.0).requires_grad_();
  AuditReport r = nn::audit(model, x, y);
  ASSERT_EQ(r.findings.size(), 1u) << r;  // the plain `gate` member, not the inputs
  EXPECT_EQ(r.findings[0].module_path, "");
  EXPECT_EQ(r.findings[0].op, "add");
  EXPECT_EQ(r.findings[0].check, AuditCheck::UnregisteredTensor);
  EXPECT_FALSE(y.grad().defined());  // the input's gradient from the audit is not kept
}

TEST(Audit, PairOutputsAreSummedForBackward) {
  PairOut model;
  AuditReport r = nn::audit(model, input(), input(2));
  EXPECT_TRUE(r.findings.empty()) << r;
  EXPECT_EQ(r.parameters_with_grad, 4);
}

TEST(Audit, LossFunctionOverload) {
  UnusedParam model;
  Tensor target = kiln::full({3, 2}, 1.0);  // used by the loss only: not the model's
  AuditReport r = nn::audit(
      model, [&](const Tensor& out) { return ((out - target) * (out - target)).mean(); }, input());
  ASSERT_EQ(r.findings.size(), 1u) << r;
  EXPECT_EQ(r.findings[0].check, AuditCheck::NoGradient);
  EXPECT_EQ(r.parameters_with_grad, 2);
}

TEST(Audit, CleanModelHasNoFindingsAndNoSideEffects) {
  Mlp model;
  model.fc2->eval();  // a mixed training state must come back as it was
  Tensor old_grad = kiln::full({8, 4}, 7.0);
  model.fc1->weight.set_grad(old_grad);
  uint64_t rng = default_generator().offset();

  AuditReport r = nn::audit(model, input());
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.findings.empty()) << r;
  EXPECT_GT(r.ops, 0);
  EXPECT_EQ(r.trainable_parameters, 4);
  EXPECT_EQ(r.parameters_with_grad, 4);
  EXPECT_TRUE(contains(r.to_string(), "audit of Mlp: ")) << r;
  EXPECT_TRUE(contains(r.to_string(),
                       " op calls, 4 trainable parameters (4 received a "
                       "gradient): no findings"))
      << r;

  EXPECT_TRUE(model.fc1->weight.grad().is_same(old_grad));
  EXPECT_EQ(model.fc1->weight.grad().to_vector<float>(), std::vector<float>(32, 7.0f));
  EXPECT_FALSE(model.fc1->bias.grad().defined());
  EXPECT_FALSE(model.fc2->weight.grad().defined());
  EXPECT_TRUE(model.is_training());
  EXPECT_TRUE(model.fc1->is_training());
  EXPECT_FALSE(model.fc2->is_training());
  EXPECT_EQ(default_generator().offset(), rng);
  EXPECT_EQ(current_interceptor(), nullptr);
}

TEST(Audit, RawMemberGradientIsRestored) {
  auto block = std::make_shared<RawScale>();
  Blocks model(block);
  AuditReport r = nn::audit(model, input());
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(block->scale.grad().defined());
}

TEST(Audit, RandomOpsDoNotAdvanceTheGenerator) {
  struct Model : Module {
    ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
    ModulePtr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
    Tensor forward(const Tensor& x) override { return drop(fc(x)); }
  } model;
  uint64_t rng = default_generator().offset();
  AuditReport r = nn::audit(model, input());
  EXPECT_TRUE(r.findings.empty()) << r;
  EXPECT_EQ(default_generator().offset(), rng);
  Tensor after = kiln::rand({2});  // the stream continues where it was
  default_generator().set_offset(rng);
  EXPECT_EQ(after.to_vector<float>(), kiln::rand({2}).to_vector<float>());
}

TEST(Audit, RecordsGradientsUnderNoGradGuardAndKeepsTheMode) {
  Mlp model;
  NoGradGuard no_grad;
  AuditReport r = nn::audit(model, input());
  EXPECT_TRUE(r.findings.empty()) << r;
  EXPECT_EQ(r.parameters_with_grad, 4);
  EXPECT_FALSE(is_grad_enabled());
}

TEST(Audit, LazyLayerIsMaterializedAsByItsFirstForward) {
  struct Model : Module {
    ModulePtr<nn::LazyLinear> fc = register_module("fc", std::make_shared<nn::LazyLinear>(3));
    Tensor forward(const Tensor& x) override { return fc(x); }
  } model;
  AuditReport r = nn::audit(model, input());
  EXPECT_TRUE(r.findings.empty()) << r;
  EXPECT_EQ(r.parameters_with_grad, 2);
  EXPECT_EQ(model.fc->weight.sizes(), IntList({3, 4}));
}

// BatchNorm in training mode writes its statistics in place: the recorder observes the
// writes (the full scan runs) and the audit restores the statistics afterwards.
TEST(Audit, InPlaceWritesAreObservedAndBuffersRestored) {
  WithBatchNorm model;
  std::vector<float> mean_before = model.bn->running_mean.to_vector<float>();
  int64_t batches_before = model.bn->num_batches_tracked.item<int64_t>();
  uint64_t rng = default_generator().offset();

  AuditReport r = nn::audit(model, input(4));
  EXPECT_TRUE(r.findings.empty()) << r;
  EXPECT_EQ(r.parameters_with_grad, 4);

  EXPECT_EQ(model.bn->running_mean.to_vector<float>(), mean_before);
  EXPECT_EQ(model.bn->num_batches_tracked.item<int64_t>(), batches_before);
  EXPECT_EQ(default_generator().offset(), rng);
  EXPECT_TRUE(model.is_training());
}

TEST(Audit, TrainingModeBatchNormStillFindsMembersAndMissingGradients) {
  BatchNormWithPlainMember model;
  AuditReport r = nn::audit(model, input(4));
  EXPECT_EQ(r.of(AuditCheck::UnregisteredTensor).size(), 1u) << r;
  auto missing = r.of(AuditCheck::NoGradient);
  ASSERT_EQ(missing.size(), 1u) << r;
  EXPECT_TRUE(
      contains(missing[0].message,
               "parameter unused (float32 [2]) received no gradient: forward never used it"))
      << r;
}

TEST(Audit, TrainingModeBatchNormFindsTrainableRawMembers) {
  struct Model : Module {
    ModulePtr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(4));
    Tensor scale = kiln::full({4}, 2.0).requires_grad_();
    Tensor forward(const Tensor& x) override { return bn(x) * scale; }
  } model;
  AuditReport r = nn::audit(model, input(4));
  auto raw = r.of(AuditCheck::GradientOnUnregistered);
  ASSERT_EQ(raw.size(), 1u) << r;
  EXPECT_TRUE(contains(raw[0].message,
                       "<root> (Model): a float32 [4] tensor used by mul "
                       "received a gradient but is not a registered parameter"))
      << r;
  EXPECT_FALSE(model.scale.grad().defined());
}

// ---- errors ----

TEST(Audit, ForwardErrorIsRethrownAndStateRestored) {
  Throws model;
  Tensor old_grad = kiln::full({4}, 1.0);
  model.fc->bias.set_grad(old_grad);
  expect_error([&] { nn::audit(model, input()); },
               {"[Throws] expected nothing, found a test failure", "(in the root module, Throws)"});
  EXPECT_TRUE(model.fc->bias.grad().is_same(old_grad));
  EXPECT_EQ(current_interceptor(), nullptr);
  EXPECT_TRUE(nn::call_stack().empty());
}

TEST(Audit, OtherExceptionsPropagateAfterOneForward) {
  struct Model : Module {
    int calls = 0;
    ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
    Tensor forward(const Tensor& x) override {
      ++calls;
      fc(x);
      throw std::runtime_error("user error");
    }
  } model;
  EXPECT_THROW(nn::audit(model, input()), std::runtime_error);
  EXPECT_EQ(model.calls, 1);
  EXPECT_EQ(current_interceptor(), nullptr);
}

TEST(Audit, LossMustBeOneElement) {
  Mlp model;
  expect_error(
      [&] {
        nn::audit(
            model, [](const Tensor& out) { return out * 2.0; }, input());
      },
      {"[audit] expected the loss function for Mlp to return a one-element "
       "floating-point tensor, found float32 [3, 3]",
       "Fix: reduce it with .sum() or .mean()"});
}

TEST(Audit, ForwardWithoutFloatingOutputNeedsALossFunction) {
  IndexOut model;
  expect_error([&] { nn::audit(model, input()); },
               {"[audit] the forward of IndexOut returned no floating-point tensor",
                "Fix: pass a loss function"});
}

TEST(Audit, RefusedInsideForward) {
  struct Outer : Module {
    ModulePtr<Linear> fc = register_module("fc", std::make_shared<Linear>(4, 4));
    Tensor forward(const Tensor& x) override {
      nn::audit(*fc, x);
      return fc(x);
    }
  } model;
  expect_error([&] { model(input()); },
               {"[audit] expected to be called from top-level code, found it called inside the "
                "forward of <root> (Outer)",
                "Fix: call kiln::nn::audit(model, inputs...) outside any forward"});
}

TEST(Audit, RefusedWhileAnotherInterceptorIsInstalled) {
  struct Passthrough : DispatchInterceptor {
    Tensors intercept(const OpDef&, TensorSpan, const Attrs&, TensorTypes&&) override { return {}; }
  } other;
  Mlp model;
  Tensor x = input();
  DispatchInterceptor* previous = set_interceptor(&other);
  std::string msg = error_of([&] { nn::audit(model, x); });
  set_interceptor(previous);
  EXPECT_TRUE(contains(msg, "[audit] expected no op interceptor on this thread, found one")) << msg;
}

}  // namespace
}  // namespace kiln
