// Runs every registered OpCase (values and gradients) and checks that the op table is
// complete: every op has a kernel, a lowering class, a vjp when differentiable, and a
// test case here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <type_traits>
#include <utility>

#include "cuda/requirements.h"
#include "harness.h"

namespace kiln::testing {
namespace {

std::string case_name(const OpCase& c) { return c.op + "/" + c.label; }

bool close(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol + tol * std::fabs(want);
}

void expect_matches(const Tensor& out, const Ref& want, double tol, const std::string& where) {
  ASSERT_EQ(Shape(out.sizes()), want.shape) << where << ": shape " << shape_str(out.sizes()) << " vs reference "
                                           << shape_str(want.shape);
  std::vector<double> got = out.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!close(got[i], want.v[i], tol) && reported++ < 5)
      ADD_FAILURE() << where << ": element " << i << " is " << got[i] << ", reference " << want.v[i];
  }
}

std::vector<Tensor> build_inputs(const std::vector<Input>& run, DType dtype, bool noncontig, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < run.size(); ++i) inputs.push_back(make_input(run[i], dtype, noncontig, seed * 31 + i));
  return inputs;
}

class OpValues : public ::testing::TestWithParam<size_t> {};

TEST_P(OpValues, MatchReference) {
  const OpCase& c = registry()[GetParam()];
  if (!c.ref) GTEST_SKIP() << "checked by gradcheck only";
  uint64_t seed = 1;
  for (DType dtype : c.dtypes) {
    for (size_t r = 0; r < c.runs.size(); ++r) {
      for (bool noncontig : {false, true}) {
        if (noncontig && !c.noncontiguous) continue;
        std::vector<Tensor> inputs = build_inputs(c.runs[r], dtype, noncontig, ++seed);
        std::vector<Ref> refs;
        for (const Tensor& t : inputs) refs.push_back(to_ref(t));
        std::string where = case_name(c) + " dtype=" + std::string(dtype_name(dtype)) + " run=" +
                            std::to_string(r) + (noncontig ? " non-contiguous" : "");
        Tensor out;
        try {
          out = c.fn(inputs);
        } catch (const std::exception& e) {
          ADD_FAILURE() << where << ": threw " << e.what();
          continue;
        }
        double tol = dtype == kFloat64 ? c.f64_tol : c.f32_tol;
        if (!is_floating(dtype)) tol = 0;
        expect_matches(out, c.ref(refs), tol, where);
        if (c.output_dtype) {
          EXPECT_EQ(out.dtype(), *c.output_dtype) << where;
        }
      }
    }
  }
}

class OpGradients : public ::testing::TestWithParam<size_t> {};

// Central finite differences of L = sum(fn(inputs) * w) against kiln::grad.
TEST_P(OpGradients, MatchFiniteDifferences) {
  const OpCase& c = registry()[GetParam()];
  if (!c.gradcheck) GTEST_SKIP() << "not differentiable";
  uint64_t seed = 1000;
  int checked = 0;
  for (size_t r = 0; r < c.runs.size(); ++r) {
    int64_t total = 0;
    for (const Input& in : c.runs[r]) total += numel(in.shape);
    if (total > 200) continue;  // finite differences cost one forward per element
    for (bool noncontig : {false, true}) {
      std::vector<Tensor> inputs = build_inputs(c.runs[r], kFloat64, noncontig, ++seed);
      std::vector<Tensor> wrt;
      std::vector<size_t> wrt_index;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (c.runs[r][i].grad && inputs[i].is_floating_point() && inputs[i].numel() > 0) {
          inputs[i].requires_grad_(true);
          wrt.push_back(inputs[i]);
          wrt_index.push_back(i);
        }
      }
      if (wrt.empty()) continue;
      Tensor out = c.fn(inputs);
      if (out.numel() == 0) continue;
      Tensor w = make_input({Shape(out.sizes()), Gen::Uniform}, kFloat64, false, seed + 7);
      std::vector<Tensor> analytic = grad({(out * w).sum()}, wrt, {}, GradOptions{.allow_unused = true});
      std::string where = case_name(c) + " run=" + std::to_string(r) + (noncontig ? " non-contiguous" : "");
      for (size_t k = 0; k < wrt.size(); ++k) {
        std::vector<double> num(static_cast<size_t>(wrt[k].numel()));
        for (int64_t e = 0; e < wrt[k].numel(); ++e) {
          double loss[2];
          for (int s = 0; s < 2; ++s) {
            NoGradGuard no_grad;
            std::vector<Tensor> shifted = inputs;
            Tensor x = inputs[wrt_index[k]].detach().contiguous().clone();
            double* p = x.data_ptr<double>();
            p[e] += s == 0 ? 1e-6 : -1e-6;
            shifted[wrt_index[k]] = x.reshape(inputs[wrt_index[k]].sizes());
            loss[s] = (c.fn(shifted) * w).sum().item<double>();
          }
          num[e] = (loss[0] - loss[1]) / 2e-6;
        }
        Tensor a = analytic[k].defined() ? analytic[k] : zeros_like(wrt[k]);
        ASSERT_EQ(Shape(a.sizes()), Shape(wrt[k].sizes())) << where;
        std::vector<double> got = a.to_vector<double>();
        int reported = 0;
        for (size_t e = 0; e < got.size(); ++e)
          if (!close(got[e], num[e], 1e-5) && reported++ < 5)
            ADD_FAILURE() << where << ": d/d input " << wrt_index[k] << " element " << e << " is " << got[e]
                          << ", finite differences give " << num[e];
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << case_name(c) << " has no run small enough to gradcheck (<= 200 elements)";
}

// Every case on CUDA tensors against the same case on the cpu: its values on each dtype and
// layout (a non-contiguous input stays a strided view on the GPU), and, for the
// differentiable ones, its float64 gradients. Runs where kernels run: on a GPU, and on the
// fake driver (the ctest cuda_on_fake_driver builds them on the host).
class CudaOpTable : public ::testing::TestWithParam<size_t> {};

// `t` on the GPU, with the same strides when make_input made it a transposed view.
Tensor on_gpu(const Tensor& t) {
  if (t.is_contiguous() || t.dim() < 2) return t.to(kCUDA);
  return t.transpose(-1, -2).to(kCUDA).transpose(-1, -2);
}

std::vector<Tensor> all_on_gpu(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) out.push_back(t.defined() ? on_gpu(t) : t);
  return out;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& where) {
  ASSERT_EQ(Shape(got.sizes()), Shape(want.sizes())) << where;
  EXPECT_EQ(got.dtype(), want.dtype()) << where;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!close(g[i], w[i], tol) && reported++ < 5)
      ADD_FAILURE() << where << ": element " << i << " is " << g[i] << " on the gpu, " << w[i] << " on the cpu";
}

TEST_P(CudaOpTable, MatchesTheCpu) {
  REQUIRE_KERNELS();
  const OpCase& c = registry()[GetParam()];
  uint64_t seed = 1;
  int compared = 0;
  for (DType dtype : c.dtypes) {
    for (size_t r = 0; r < c.runs.size(); ++r) {
      for (bool noncontig : {false, true}) {
        if (noncontig && !c.noncontiguous) continue;
        const std::vector<Tensor> inputs = build_inputs(c.runs[r], dtype, noncontig, ++seed);
        const std::string where = case_name(c) + " dtype=" + std::string(dtype_name(dtype)) + " run=" +
                                  std::to_string(r) + (noncontig ? " non-contiguous" : "");
        Tensor want, got;
        try {
          manual_seed(seed);  // random ops draw the same stream on both devices
          want = c.fn(inputs);
        } catch (const Error&) {
          continue;  // not a combination the op takes
        }
        try {
          manual_seed(seed);
          got = c.fn(all_on_gpu(inputs));
        } catch (const std::exception& e) {
          ADD_FAILURE() << where << ": threw on the gpu: " << e.what();
          continue;
        }
        if (got.device() != kCUDA) continue;  // a factory case: it builds its tensors on the cpu
        const double tol = !is_floating(dtype) ? 0 : dtype == kFloat64 ? c.f64_tol : c.f32_tol;
        expect_close(got, want, tol, where);
        ++compared;
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << case_name(c) << " builds its tensors itself (checked in tests/cuda/tensor_test.cpp)";
  if (!c.gradcheck) return;
  // The gradients of sum(fn(inputs) * w) on both devices, float64.
  for (size_t r = 0; r < c.runs.size(); ++r) {
    std::vector<Tensor> grads[2];
    for (int device = 0; device < 2; ++device) {
      std::vector<Tensor> inputs = build_inputs(c.runs[r], kFloat64, false, 7000 + r);
      if (device == 1) inputs = all_on_gpu(inputs);
      std::vector<Tensor> wrt;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!c.runs[r][i].grad || !inputs[i].is_floating_point() || inputs[i].numel() == 0) continue;
        inputs[i] = inputs[i].detach().requires_grad_();
        wrt.push_back(inputs[i]);
      }
      if (wrt.empty()) break;
      manual_seed(99);
      const Tensor out = c.fn(inputs);
      if (out.numel() == 0) break;
      Tensor w = make_input({Shape(out.sizes()), Gen::Uniform}, kFloat64, false, 31 + r);
      grads[device] = grad({(out * (device == 1 ? w.to(kCUDA) : w)).sum()}, wrt, {}, GradOptions{.allow_unused = true});
    }
    for (size_t k = 0; k < grads[1].size(); ++k) {
      if (!grads[0][k].defined()) continue;
      expect_close(grads[1][k], grads[0][k], 1e-9, case_name(c) + " run=" + std::to_string(r) + " gradient " +
                                                         std::to_string(k));
    }
  }
}

std::vector<size_t> all_case_indices() {
  std::vector<size_t> idx(registry().size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  return idx;
}

std::string param_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string n = case_name(registry()[info.param]);
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Table, OpValues, ::testing::ValuesIn(all_case_indices()), param_name);
INSTANTIATE_TEST_SUITE_P(Table, OpGradients, ::testing::ValuesIn(all_case_indices()), param_name);
INSTANTIATE_TEST_SUITE_P(Table, CudaOpTable, ::testing::ValuesIn(all_case_indices()), param_name);

TEST(OpTable, EveryOpIsComplete) {
  init();
  std::set<std::string> covered, grad_covered;
  for (const OpCase& c : registry()) {
    covered.insert(c.op);
    if (c.gradcheck) grad_covered.insert(c.op);
  }
  for (const OpDef* op : all_ops()) {
    // Control flow and fusion groups are made by the tracer and the passes and run by
    // executors, never dispatched (tests/frontend/control_flow_test.cpp, tests/passes).
    if (op->lowering == LoweringClass::ControlFlow || op->lowering == LoweringClass::Fused) continue;
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CPU)]) << op->name << " has no CPU kernel";
    EXPECT_TRUE(op->kernels[static_cast<size_t>(DeviceType::CUDA)]) << op->name << " has no CUDA kernel";
    if (op->lowering == LoweringClass::Elementwise) {
      EXPECT_TRUE(op->scalar_body) << op->name << " is elementwise but has no scalar_body";
    }
    EXPECT_TRUE(covered.count(op->name)) << op->name << " has no OpCase in tests/ops (add one)";
    if (op->differentiable) {
      EXPECT_TRUE(op->vjp) << op->name << " is differentiable but has no vjp";
      EXPECT_TRUE(grad_covered.count(op->name) || !op->vjp) << op->name << " has no gradchecked OpCase";
    }
  }
}

// An op's traits are fixed where it is defined: no layer can patch them afterwards.
static_assert(!std::is_assignable_v<decltype((std::declval<OpDef&>().differentiable)), bool>);
static_assert(!std::is_assignable_v<decltype((std::declval<OpDef&>().scalar_body)), ScalarBodyFn>);
static_assert(!std::is_assignable_v<decltype((std::declval<OpDef&>().nondiff_inputs)), uint64_t>);

TEST(OpTable, TraitsAgreeWithTheSchema) {
  init();
  for (const OpDef* op : all_ops()) {
    const size_t inputs = op->variadic() ? 64 : op->input_names.size();
    const uint64_t input_bits = inputs >= 64 ? ~0ull : (1ull << inputs) - 1;
    EXPECT_EQ(op->nondiff_inputs & ~input_bits, 0u) << op->name << ": nondiff_inputs names no input";
    if (op->vjp && op->saves_inputs != ~0ull) {  // ~0: every input, the default
      EXPECT_EQ(op->saves_inputs & ~input_bits, 0u) << op->name << ": saves_inputs names no input";
    }
    EXPECT_TRUE(op->numerics == Numerics::Exact || op->scalar_body)
        << op->name << ": numerics describe a scalar body the op does not have";
    EXPECT_TRUE(!op->kernel_makes_outputs || op->lowering == LoweringClass::View)
        << op->name << ": only views make their own outputs";
  }
}

TEST(OpTable, CasesNameRealOps) {
  for (const OpCase& c : registry()) EXPECT_TRUE(find_op(c.op)) << case_name(c) << " names no op in the table";
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// Integer neg, abs and square wrap around as in PyTorch, instead of overflowing (undefined
// behaviour the sanitizer build reports).
TEST(OpTable, IntegerNegationAndSquaringWrap) {
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  Tensor x = Tensor::from_vector<int64_t>({lowest, -3, 3});
  EXPECT_EQ(neg(x).to_vector<int64_t>(), (std::vector<int64_t>{lowest, 3, -3}));
  EXPECT_EQ(abs(x).to_vector<int64_t>(), (std::vector<int64_t>{lowest, 3, 3}));
  EXPECT_EQ(square(x).to_vector<int64_t>(), (std::vector<int64_t>{0, 9, 9}));
}

}  // namespace
}  // namespace kiln::testing
