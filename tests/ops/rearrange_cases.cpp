// OpCases for the compositions of table ops that PyTorch users expect as functions of their
// own: flip, roll, repeat, tile, repeat_interleave, diagonal, diag, diag_embed, trace, outer,
// kron, cross, baddbmm, clamp with tensor bounds, lerp, addcmul and addcdiv. Each runs
// through the harness like a table op (every dtype, strided inputs, a naive reference,
// gradcheck, compiled == eager, the GPU against the CPU), filed under the table op it leans
// on most.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "test_util.h"

namespace kiln::testing {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using RefFn = std::function<Ref(const std::vector<Ref>&)>;
using Runs = std::vector<std::vector<Input>>;

OpCase make(std::string op, std::string label, Runs runs, Fn fn, RefFn ref,
            std::vector<DType> dtypes = {kFloat32, kFloat64}) {
  OpCase c;
  c.op = std::move(op);
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = std::move(fn);
  c.ref = std::move(ref);
  c.dtypes = std::move(dtypes);
  return c;
}

Shape unravel(int64_t i, IntList shape) {
  Shape idx(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

// A reference of `shape` whose element at each multi-index is `at(index)`.
Ref generate(Shape shape, const std::function<double(const Shape&)>& at) {
  Ref r{shape, std::vector<double>(static_cast<size_t>(numel(shape)))};
  for (int64_t i = 0; i < r.numel(); ++i) r.v[static_cast<size_t>(i)] = at(unravel(i, shape));
  return r;
}

int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

Register flip_roll_cases({
    make("index_select", "flip", {{{{4, 5, 3}}}, {{{7}}}},
         [](const std::vector<Tensor>& in) { return in[0].dim() == 3 ? flip(in[0], {0, -1}) : flip(in[0], {0}); },
         [](const std::vector<Ref>& r) {
           const Ref& a = r[0];
           return generate(a.shape, [&](const Shape& idx) {
             Shape src = idx;
             src[0] = a.shape[0] - 1 - idx[0];
             if (a.shape.size() == 3) src[2] = a.shape[2] - 1 - idx[2];
             return ref_at(a, src);
           });
         },
         {kFloat32, kFloat64, kInt64}),
    make("cat", "roll", {{{{4, 5}}}, {{{3, 6}}}},
         [](const std::vector<Tensor>& in) { return roll(in[0], {1, -7}, {0, 1}); },
         [](const std::vector<Ref>& r) {
           const Ref& a = r[0];
           return generate(a.shape, [&](const Shape& idx) {
             return ref_at(a, {wrap(idx[0] - 1, a.shape[0]), wrap(idx[1] + 7, a.shape[1])});
           });
         },
         {kFloat32, kFloat64, kInt64}),
    make("cat", "roll_flat", {{{{3, 4}}}},
         [](const std::vector<Tensor>& in) { return roll(in[0], {5}); },
         [](const std::vector<Ref>& r) {
           const Ref& a = r[0];
           Ref out = a;
           for (int64_t i = 0; i < a.numel(); ++i) out.v[static_cast<size_t>(wrap(i + 5, a.numel()))] = a.v[static_cast<size_t>(i)];
           return out;
         }),
});

Register repeat_cases({
    make("expand", "repeat", {{{{2, 3}}}},
         [](const std::vector<Tensor>& in) { return repeat(in[0], {2, 2, 3}); },
         [](const std::vector<Ref>& r) {
           const Ref& a = r[0];
           return generate({2, 4, 9}, [&](const Shape& idx) { return ref_at(a, {idx[1] % 2, idx[2] % 3}); });
         },
         {kFloat32, kFloat64, kInt64}),
    make("expand", "tile", {{{{2, 3}}}},
         [](const std::vector<Tensor>& in) { return tile(in[0], {2}); },
         [](const std::vector<Ref>& r) {
           const Ref& a = r[0];
           return generate({2, 6}, [&](const Shape& idx) { return ref_at(a, {idx[0], idx[1] % 3}); });
         }),
    make("expand", "repeat_interleave", {{{{3, 2}}}},
         [](const std::vector<Tensor>& in) { return repeat_interleave(in[0], 3, 0); },
         [](const std::vector<Ref>& r) {
           const Ref& a = r[0];
           return generate({9, 2}, [&](const Shape& idx) { return ref_at(a, {idx[0] / 3, idx[1]}); });
         },
         {kFloat32, kFloat64, kInt64}),
    make("expand", "repeat_interleave_flat", {{{{2, 2}}}},
         [](const std::vector<Tensor>& in) { return repeat_interleave(in[0], 2); },
         [](const std::vector<Ref>& r) {
           return generate({8}, [&](const Shape& idx) { return r[0].v[static_cast<size_t>(idx[0] / 2)]; });
         }),
});

Register diagonal_cases({
    make("slice", "diagonal", {{{{4, 6}}}, {{{6, 4}}}},
         [](const std::vector<Tensor>& in) { return diagonal(in[0], in[0].size(0) == 4 ? 1 : -2); },
         [](const std::vector<Ref>& r) {
           const Ref& a = r[0];
           const bool wide = a.shape[0] == 4;
           return generate({wide ? 4 : 4}, [&](const Shape& idx) {
             return wide ? ref_at(a, {idx[0], idx[0] + 1}) : ref_at(a, {idx[0] + 2, idx[0]});
           });
         },
         {kFloat32, kFloat64, kInt64}),
    make("slice", "diagonal_batched", {{{{3, 2, 4}}}},
         [](const std::vector<Tensor>& in) { return diagonal(in[0], 0, 0, 2); },
         [](const std::vector<Ref>& r) {
           return generate({2, 3}, [&](const Shape& idx) { return ref_at(r[0], {idx[1], idx[0], idx[1]}); });
         }),
    make("mul", "diag_embed", {{{{3}}}},
         [](const std::vector<Tensor>& in) { return diag(in[0], -1); },
         [](const std::vector<Ref>& r) {
           return generate({4, 4}, [&](const Shape& idx) {
             return idx[0] == idx[1] + 1 ? r[0].v[static_cast<size_t>(idx[1])] : 0.0;
           });
         }),
    make("mul", "diag_embed_batched", {{{{2, 3}}}},
         [](const std::vector<Tensor>& in) { return diag_embed(in[0], 1); },
         [](const std::vector<Ref>& r) {
           return generate({2, 4, 4}, [&](const Shape& idx) {
             return idx[2] == idx[1] + 1 ? ref_at(r[0], {idx[0], idx[1]}) : 0.0;
           });
         }),
    make("sum", "trace", {{{{5, 3}}}},
         [](const std::vector<Tensor>& in) { return trace(in[0]); },
         [](const std::vector<Ref>& r) {
           double total = 0;
           for (int64_t i = 0; i < 3; ++i) total += ref_at(r[0], {i, i});
           return Ref{{}, {total}};
         }),
});

Register product_cases({
    make("mul", "outer", {{{{4}}, {{3}}}},
         [](const std::vector<Tensor>& in) { return outer(in[0], in[1]); },
         [](const std::vector<Ref>& r) {
           return generate({4, 3}, [&](const Shape& idx) {
             return r[0].v[static_cast<size_t>(idx[0])] * r[1].v[static_cast<size_t>(idx[1])];
           });
         },
         {kFloat32, kFloat64, kInt64}),
    make("mul", "kron", {{{{2, 3}}, {{2, 2}}}, {{{3}}, {{2, 2}}}},
         [](const std::vector<Tensor>& in) { return kron(in[0], in[1]); },
         [](const std::vector<Ref>& r) {
           Ref a = r[0];
           if (a.shape.size() == 1) a.shape = {1, a.shape[0]};
           const Ref& b = r[1];
           return generate({a.shape[0] * b.shape[0], a.shape[1] * b.shape[1]}, [&](const Shape& idx) {
             return ref_at(a, {idx[0] / b.shape[0], idx[1] / b.shape[1]}) *
                    ref_at(b, {idx[0] % b.shape[0], idx[1] % b.shape[1]});
           });
         }),
    make("sub", "cross", {{{{4, 3}}, {{4, 3}}}, {{{3, 2}}, {{1, 2}}}},
         [](const std::vector<Tensor>& in) { return cross(in[0], in[1]); },
         [](const std::vector<Ref>& r) {
           const bool rows = r[0].shape[1] == 3;  // [4, 3]: vectors in rows; [3, 2]: in columns
           auto component = [&](const Ref& t, int64_t v, int64_t k) {
             return rows ? ref_at(t, {v, k}) : ref_at(t, {t.shape[0] == 1 ? 0 : k, v});
           };
           return generate(rows ? Shape{4, 3} : Shape{3, 2}, [&](const Shape& idx) {
             const int64_t v = rows ? idx[0] : idx[1], k = rows ? idx[1] : idx[0];
             const int64_t i = (k + 1) % 3, j = (k + 2) % 3;
             return component(r[0], v, i) * component(r[1], v, j) - component(r[0], v, j) * component(r[1], v, i);
           });
         }),
    [] {
      OpCase c = make("matmul", "baddbmm", {{{{1, 3, 2}}, {{2, 3, 4}}, {{2, 4, 2}}}},
                      [](const std::vector<Tensor>& in) { return baddbmm(in[0], in[1], in[2], 0.5, 2.0); },
                      [](const std::vector<Ref>& r) {
                        return generate({2, 3, 2}, [&](const Shape& idx) {
                          double dot = 0;
                          for (int64_t k = 0; k < 4; ++k)
                            dot += ref_at(r[1], {idx[0], idx[1], k}) * ref_at(r[2], {idx[0], k, idx[2]});
                          return 0.5 * ref_at(r[0], {0, idx[1], idx[2]}) + 2.0 * dot;
                        });
                      });
      c.f32_tol = 1e-4;
      return c;
    }(),
});

Register pointwise_cases({
    make("maximum", "clamp_tensor_bounds", {{{{3, 4}}, {{1, 4}, Gen::Uniform}, {{3, 1}, Gen::Uniform}}},
         [](const std::vector<Tensor>& in) { return clamp(in[0], in[1] - 1, in[2] + 1); },
         [](const std::vector<Ref>& r) {
           return generate({3, 4}, [&](const Shape& idx) {
             const double lo = ref_at(r[1], {0, idx[1]}) - 1, hi = ref_at(r[2], {idx[0], 0}) + 1;
             return std::min(std::max(ref_at(r[0], idx), lo), hi);
           });
         }),
    make("where", "lerp_tensor_weight", {{{{3, 4}}, {{3, 4}}, {{3, 4}, Gen::Unit}}},
         [](const std::vector<Tensor>& in) { return lerp(in[0], in[1], in[2].abs()); },
         [](const std::vector<Ref>& r) {
           return ref_map3(r[0], r[1], r[2], [](double a, double b, double w) { return a + std::abs(w) * (b - a); });
         }),
    make("mul", "lerp_scalar_weight", {{{{5}}, {{5}}}},
         [](const std::vector<Tensor>& in) { return lerp(in[0], in[1], 0.25) + lerp(in[0], in[1], 0.75); },
         [](const std::vector<Ref>& r) {
           return ref_map2(r[0], r[1], [](double a, double b) { return a + 0.25 * (b - a) + a + 0.75 * (b - a); });
         }),
    make("mul", "addcmul", {{{{3, 4}}, {{3, 4}}, {{1, 4}}}},
         [](const std::vector<Tensor>& in) { return addcmul(in[0], in[1], in[2], 0.5); },
         [](const std::vector<Ref>& r) {
           return ref_map3(r[0], r[1], r[2], [](double x, double a, double b) { return x + 0.5 * a * b; });
         }),
    make("div", "addcdiv", {{{{3, 4}}, {{3, 4}}, {{3, 4}, Gen::NonZero}}},
         [](const std::vector<Tensor>& in) { return addcdiv(in[0], in[1], in[2], -2); },
         [](const std::vector<Ref>& r) {
           return ref_map3(r[0], r[1], r[2], [](double x, double a, double b) { return x - 2 * a / b; });
         }),
});

// The errors name the function and what it expected.
TEST(RearrangeErrors, NameWhatWasExpected) {
  const Tensor x = zeros({2, 3});
  expect_error([&] { flip(x, {0, 0}); }, {"[flip] dim 0 appears more than once"});
  expect_error([&] { roll(x, {1, 2}); }, {"[roll] without dims takes one shift"});
  expect_error([&] { roll(x, {1}, {0, 1}); }, {"[roll] expected one shift per dim"});
  expect_error([&] { repeat(x, {2}); }, {"[repeat] expected at least as many repeats as x has dims (2)"});
  expect_error([&] { diagonal(x, 0, 1, 1); }, {"[diagonal] dim1 and dim2 are both 1"});
  expect_error([&] { diag(zeros({2, 2, 2})); }, {"[diag] expected a 1-D or 2-D tensor"});
  expect_error([&] { outer(x, zeros({3})); }, {"[outer] expected two 1-D tensors"});
  expect_error([&] { cross(zeros({2, 4}), zeros({2, 4})); },
               {"[cross] expected a dim of size 3, got shape [2, 4]", "Fix:"});
  expect_error([&] { cross(zeros({3, 4}), zeros({3, 4}), 1); }, {"at dim 1"});
  expect_error([&] { trace(zeros({3})); }, {"[trace] expected a 2-D tensor"});
  // An empty diagonal, and one past the matrix's edge, are empty.
  EXPECT_EQ(diagonal(x, 5).numel(), 0);
  EXPECT_EQ(diagonal(x, -2).numel(), 0);
}

}  // namespace
}  // namespace kiln::testing
