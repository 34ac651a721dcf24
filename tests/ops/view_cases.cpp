// OpCases for the view ops, clone, slice_scatter, sum and matmul (the core ops).
#include "harness.h"
#include "kiln/debug_print.h"
#include "kiln/ops/debug_print.h"
#include "kiln/ops/view.h"
#include "kiln/tensor_ops/device.h"

namespace kiln::testing {
namespace {

// A reference that reads `a` as the given view: element i of the result is element
// offset(i) of a's row-major data.
Ref gather_ref(const Ref& a, Shape shape, const std::function<int64_t(IntList)>& offset) {
  Ref r{shape, std::vector<double>(static_cast<size_t>(numel(shape)))};
  Shape idx(shape.size(), 0);
  for (int64_t i = 0; i < r.numel(); ++i) {
    int64_t rem = i;
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    r.v[i] = a.v[static_cast<size_t>(offset(idx))];
  }
  return r;
}

OpCase make(std::string op, std::string label, std::vector<std::vector<Input>> runs,
            std::function<Tensor(const std::vector<Tensor>&)> fn, std::function<Ref(const std::vector<Ref>&)> ref) {
  OpCase c;
  c.op = std::move(op);
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = std::move(fn);
  c.ref = std::move(ref);
  c.dtypes = {kFloat32, kFloat64, kInt64};
  return c;
}

Register views({
    make("view", "reshape", {{{{2, 3, 4}}}, {{{0, 3}}}},
         [](const std::vector<Tensor>& in) { return in[0].reshape({-1, 2}); },
         [](const std::vector<Ref>& r) { return Ref{Shape{r[0].numel() / 2, 2}, r[0].v}; }),
    make("view", "to_0d", {{{{1, 1}}}},
         [](const std::vector<Tensor>& in) { return in[0].reshape({}); },
         [](const std::vector<Ref>& r) { return Ref{Shape{}, r[0].v}; }),
    make("permute", "3d", {{{{2, 3, 4}}}},
         [](const std::vector<Tensor>& in) { return in[0].permute({2, 0, 1}); },
         [](const std::vector<Ref>& r) {
           return gather_ref(r[0], {4, 2, 3}, [](IntList i) { return i[1] * 12 + i[2] * 4 + i[0]; });
         }),
    make("permute", "transpose", {{{{3, 5}}}},
         [](const std::vector<Tensor>& in) { return in[0].t() + 0; },
         [](const std::vector<Ref>& r) { return gather_ref(r[0], {5, 3}, [](IntList i) { return i[1] * 5 + i[0]; }); }),
    make("slice", "step", {{{{7, 3}}}},
         [](const std::vector<Tensor>& in) { return in[0].slice(0, 1, 7, 2); },
         [](const std::vector<Ref>& r) {
           return gather_ref(r[0], {3, 3}, [](IntList i) { return (1 + 2 * i[0]) * 3 + i[1]; });
         }),
    make("slice", "negative", {{{{4, 6}}}},
         [](const std::vector<Tensor>& in) { return in[0].slice(1, -4, -1); },
         [](const std::vector<Ref>& r) { return gather_ref(r[0], {4, 3}, [](IntList i) { return i[0] * 6 + 2 + i[1]; }); }),
    make("select", "row", {{{{4, 6}}}},
         [](const std::vector<Tensor>& in) { return in[0].select(1, -2); },
         [](const std::vector<Ref>& r) { return gather_ref(r[0], {4}, [](IntList i) { return i[0] * 6 + 4; }); }),
    // Every slice along dim 1, stacked back along dim 0 ([6, 4]: slice k is row k).
    make("unbind", "stacked", {{{{4, 6}}}},
         [](const std::vector<Tensor>& in) { return stack(unbind(in[0], 1), 0); },
         [](const std::vector<Ref>& r) { return gather_ref(r[0], {6, 4}, [](IntList i) { return i[1] * 6 + i[0]; }); }),
    // Two of the slices used, the others get no gradient (zeros in the stack).
    make("unbind", "some_slices", {{{{3, 2, 5}}}},
         [](const std::vector<Tensor>& in) {
           std::vector<Tensor> rows = unbind(in[0], 0);
           return rows[2] * 3 + rows[0];
         },
         [](const std::vector<Ref>& r) {
           Ref out{Shape{2, 5}, std::vector<double>(10)};
           for (size_t i = 0; i < 10; ++i) out.v[i] = r[0].v[20 + i] * 3 + r[0].v[i];
           return out;
         }),
    make("expand", "broadcast", {{{{3, 1}}}},
         [](const std::vector<Tensor>& in) { return in[0].expand({2, 3, 4}); },
         [](const std::vector<Ref>& r) { return gather_ref(r[0], {2, 3, 4}, [](IntList i) { return i[1]; }); }),
    make("squeeze", "all", {{{{1, 3, 1, 2}}}},
         [](const std::vector<Tensor>& in) { return in[0].squeeze(); },
         [](const std::vector<Ref>& r) { return Ref{Shape{3, 2}, r[0].v}; }),
    make("squeeze", "dim", {{{{1, 3, 1, 2}}}},
         [](const std::vector<Tensor>& in) { return in[0].squeeze(2); },
         [](const std::vector<Ref>& r) { return Ref{Shape{1, 3, 2}, r[0].v}; }),
    make("unsqueeze", "middle", {{{{3, 2}}}},
         [](const std::vector<Tensor>& in) { return in[0].unsqueeze(1); },
         [](const std::vector<Ref>& r) { return Ref{Shape{3, 1, 2}, r[0].v}; }),
    [] {
      OpCase c = make("as_strided", "windows", {{{{10}}}},
                      [](const std::vector<Tensor>& in) { return in[0].contiguous().as_strided({4, 3}, {2, 1}, 1); },
                      [](const std::vector<Ref>& r) {
                        return gather_ref(r[0], {4, 3}, [](IntList i) { return 1 + i[0] * 2 + i[1]; });
                      });
      c.gradcheck = false;
      return c;
    }(),
    // Between the cpu and itself here; tests/cuda runs the moves to and from a GPU.
    make("to_device", "copy", {{{{2, 3}}}},
         [](const std::vector<Tensor>& in) { return kiln::to_device(in[0], kCPU, /*copy=*/true); },
         [](const std::vector<Ref>& r) { return r[0]; }),
    make("debug_print", "quiet", {{{{2, 3}}}},
         [](const std::vector<Tensor>& in) {
           ops::set_debug_print_sink([](std::string_view) {});  // the op test stays quiet
           Tensor out = kiln::debug_print(in[0], "case");
           ops::set_debug_print_sink({});
           return out;
         },
         [](const std::vector<Ref>& r) { return r[0]; }),
    [] {
      // Eager detach() needs no kernel; traces dispatch the op (its kernel aliases x).
      OpCase c = make("detach", "alias", {{{{3, 4}}}},
                      [](const std::vector<Tensor>& in) { return dispatch1(ops::detach, TensorSpan(&in[0], 1)); },
                      [](const std::vector<Ref>& r) { return r[0]; });
      c.gradcheck = false;
      return c;
    }(),
    make("clone", "copy", {{{{3, 4}}}, {{{}}}, {{{0}}}},
         [](const std::vector<Tensor>& in) { return in[0].clone(); },
         [](const std::vector<Ref>& r) { return r[0]; }),
    make("slice_scatter", "rows", {{{{5, 3}}, {{2, 3}}}},
         [](const std::vector<Tensor>& in) { return kiln::slice_scatter(in[0], in[1], 0, 1, 5, 2); },
         [](const std::vector<Ref>& r) {
           Ref out = r[0];
           for (int64_t i = 0; i < 2; ++i)
             for (int64_t j = 0; j < 3; ++j) out.v[(1 + 2 * i) * 3 + j] = r[1].v[i * 3 + j];
           return out;
         }),
});

Ref sum_ref(const Ref& a, IntList dims, bool keepdim) {
  return ref_reduce(a, dims, keepdim, [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
  });
}

Register reductions({
    [] {
      OpCase c = make("sum", "all", {{{{3, 4}}}, {{{}}}, {{{0, 3}}}, {{{300, 200}}}},
                      [](const std::vector<Tensor>& in) { return in[0].sum(); },
                      [](const std::vector<Ref>& r) { return sum_ref(r[0], {}, false); });
      c.f32_tol = 1e-4;
      return c;
    }(),
    [] {
      OpCase c = make("sum", "inner", {{{{3, 4, 5}}}, {{{64, 700}}}},
                      [](const std::vector<Tensor>& in) { return in[0].sum({-1}); },
                      [](const std::vector<Ref>& r) { return sum_ref(r[0], {-1}, false); });
      c.f32_tol = 1e-4;
      return c;
    }(),
    [] {
      OpCase c = make("sum", "outer_keepdim", {{{{3, 4, 5}}}, {{{700, 64}}}},
                      [](const std::vector<Tensor>& in) { return in[0].sum({0}, true); },
                      [](const std::vector<Ref>& r) { return sum_ref(r[0], {0}, true); });
      c.f32_tol = 1e-4;
      return c;
    }(),
    make("sum", "middle", {{{{3, 4, 5}}}},
         [](const std::vector<Tensor>& in) { return in[0].sum({0, 2}); },
         [](const std::vector<Ref>& r) { return sum_ref(r[0], {0, 2}, false); }),
    [] {
      OpCase c = make("sum", "bool", {{{{3, 4}, Gen::Bool, kBool}}},
                      [](const std::vector<Tensor>& in) { return in[0].sum({1}); },
                      [](const std::vector<Ref>& r) { return sum_ref(r[0], {1}, false); });
      c.gradcheck = false;
      c.output_dtype = kInt64;
      return c;
    }(),
});

Ref matmul_ref(const Ref& a, const Ref& b) {
  // Batched [..., M, K] x [..., K, N] with broadcast batch dims (both rank >= 2).
  size_t ra = a.shape.size(), rb = b.shape.size();
  int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
  Shape ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Shape batch = broadcast_shapes(ab, bb, "ref");
  Shape out = batch;
  out.push_back(m);
  out.push_back(n);
  Ref r{out, std::vector<double>(static_cast<size_t>(numel(out)))};
  int64_t nb = numel(batch);
  for (int64_t bi = 0; bi < nb; ++bi) {
    Shape idx(batch.size(), 0);
    int64_t rem = bi;
    for (size_t d = batch.size(); d-- > 0;) {
      idx[d] = rem % batch[d];
      rem /= batch[d];
    }
    auto base = [&](const Shape& bs, int64_t rows, int64_t cols) {
      int64_t off = 0, mult = rows * cols;
      for (size_t d = bs.size(); d-- > 0;) {
        size_t od = d + batch.size() - bs.size();
        off += (bs[d] == 1 ? 0 : idx[od]) * mult;
        mult *= bs[d];
      }
      return off;
    };
    int64_t ao = base(ab, m, k), bo = base(bb, k, n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a.v[ao + i * k + p] * b.v[bo + p * n + j];
        r.v[bi * m * n + i * n + j] = s;
      }
  }
  return r;
}

Register contractions({
    [] {
      OpCase c = make("matmul", "2d", {{{{3, 4}}, {{4, 5}}}, {{{1, 7}}, {{7, 6}}}, {{{64, 300}}, {{300, 80}}},
                                       {{{3, 0}}, {{0, 2}}}},
                      [](const std::vector<Tensor>& in) { return kiln::matmul(in[0], in[1]); },
                      [](const std::vector<Ref>& r) { return matmul_ref(r[0], r[1]); });
      c.f32_tol = 1e-4;
      return c;
    }(),
    [] {
      OpCase c = make("matmul", "batched_broadcast", {{{{2, 3, 4}}, {{4, 5}}}, {{{2, 1, 3, 4}}, {{3, 4, 2}}}},
                      [](const std::vector<Tensor>& in) { return kiln::matmul(in[0], in[1]); },
                      [](const std::vector<Ref>& r) { return matmul_ref(r[0], r[1]); });
      c.f32_tol = 1e-4;
      return c;
    }(),
    [] {
      OpCase c = make("matmul", "vectors", {{{{4}}, {{4}}}, {{{4}}, {{4, 3}}}, {{{2, 4}}, {{4}}}},
                      [](const std::vector<Tensor>& in) { return kiln::matmul(in[0], in[1]); },
                      [](const std::vector<Ref>& r) {
                        Ref a = r[0], b = r[1];
                        bool a1 = a.shape.size() == 1, b1 = b.shape.size() == 1;
                        if (a1) a.shape = {1, a.shape[0]};
                        if (b1) b.shape = {b.shape[0], 1};
                        Ref out = matmul_ref(a, b);
                        Shape s;
                        if (!a1) s.push_back(out.shape[0]);
                        if (!b1) s.push_back(out.shape[1]);
                        out.shape = s;
                        return out;
                      });
      c.f32_tol = 1e-4;
      return c;
    }(),
    [] {
      OpCase c = make("matmul", "linear", {{{{5, 4}}, {{3, 4}}, {{3}}}},
                      [](const std::vector<Tensor>& in) { return kiln::linear(in[0], in[1], in[2]); },
                      [](const std::vector<Ref>& r) {
                        Ref wt{Shape{r[1].shape[1], r[1].shape[0]}, std::vector<double>(r[1].v.size())};
                        for (int64_t i = 0; i < r[1].shape[0]; ++i)
                          for (int64_t j = 0; j < r[1].shape[1]; ++j) wt.v[j * r[1].shape[0] + i] = r[1].v[i * r[1].shape[1] + j];
                        return ref_map2(matmul_ref(r[0], wt), r[2], [](double a, double b) { return a + b; });
                      });
      c.f32_tol = 1e-4;
      return c;
    }(),
});

Register factories({
    [] {
      OpCase c = make("full", "fill", {{}},
                      [](const std::vector<Tensor>&) { return kiln::full({2, 3}, 1.5, kFloat64); },
                      [](const std::vector<Ref>&) { return Ref{Shape{2, 3}, std::vector<double>(6, 1.5)}; });
      c.gradcheck = false;
      c.noncontiguous = false;
      c.dtypes = {kFloat64};
      return c;
    }(),
    [] {
      OpCase c = make("arange", "steps", {{}},
                      [](const std::vector<Tensor>&) { return kiln::arange(1, 2, 0.25); },
                      [](const std::vector<Ref>&) { return Ref{Shape{4}, {1, 1.25, 1.5, 1.75}}; });
      c.gradcheck = false;
      c.noncontiguous = false;
      c.dtypes = {kFloat32};
      return c;
    }(),
});

}  // namespace
}  // namespace kiln::testing
