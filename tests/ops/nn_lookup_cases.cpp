// OpCases for embedding, embedding_backward, one_hot and dropout. Dropout's reference
// recomputes the documented mask rule from kiln::Generator::philox.
#include "harness.h"
#include "kiln/ops/embedding.h"

namespace kiln::testing {
namespace {

namespace F = kiln::nn::functional;

Input idx(Shape s, int64_t high) {
  return Input{s, Gen::Index, kInt64, high, false};
}

Ref embedding_ref(const Ref& w, const Ref& idx) {
  const int64_t D = w.shape[1];
  Shape os = idx.shape;
  os.push_back(D);
  Ref out{os, {}};
  for (double i : idx.v)
    for (int64_t j = 0; j < D; ++j) out.v.push_back(w.v[static_cast<size_t>(i) * D + j]);
  return out;
}

// Element i of a dropout call is kept when the uniform from word i % 4 of Philox block
// (offset + i / 4) is >= p; kept elements are scaled by 1 / (1 - p).
Ref dropout_ref(const Ref& x, double p, uint64_t seed) {
  Ref out = x;
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto block = Generator::philox(seed, static_cast<uint64_t>(i / 4));
    bool keep = Generator::to_unit_float(block[i % 4]) >= static_cast<float>(p);
    out.v[i] = keep ? x.v[i] / (1 - p) : 0.0;
  }
  return out;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  // ---- embedding ----
  {
    OpCase c;
    c.op = "embedding";
    c.label = "lookup";
    c.runs = {
        {{{10, 4}}, idx({3, 5}, 10)}, {{{7, 3}}, idx({6}, 7)}, {{{1000, 64}}, idx({32, 40}, 1000)}};
    c.fn = [](const std::vector<Tensor>& in) { return F::embedding(in[1], in[0]); };
    c.ref = [](const std::vector<Ref>& r) { return embedding_ref(r[0], r[1]); };
    out.push_back(c);
  }
  {
    // padding_idx: the forward still reads the row (its gradient is checked in the
    // functional tests: PyTorch leaves it zero, so finite differences do not apply).
    OpCase c;
    c.op = "embedding";
    c.label = "padding_idx";
    c.runs = {{{{6, 3}}, idx({4, 2}, 6)}};
    c.fn = [](const std::vector<Tensor>& in) { return F::embedding(in[1], in[0], -1); };
    c.ref = [](const std::vector<Ref>& r) { return embedding_ref(r[0], r[1]); };
    c.gradcheck = false;
    out.push_back(c);
  }
  {
    OpCase c;
    c.op = "embedding";
    c.label = "int_table";
    c.runs = {{{{5, 3}, Gen::Int}, idx({4}, 5)}};
    c.dtypes = {kInt64, kInt32};
    c.fn = [](const std::vector<Tensor>& in) { return F::embedding(in[1], in[0]); };
    c.ref = [](const std::vector<Ref>& r) { return embedding_ref(r[0], r[1]); };
    c.gradcheck = false;
    out.push_back(c);
  }
  for (bool padding : {false, true}) {
    OpCase c;
    c.op = "embedding_backward";
    c.label = padding ? "padding_idx" : "scatter_add";
    c.runs = {{{{3, 5, 4}}, idx({3, 5}, 6)}, {{{64, 50, 32}}, idx({64, 50}, 100)}};
    c.fn = [=](const std::vector<Tensor>& in) {
      ops::EmbeddingBackwardAttrs a;
      a.num_weights = in[0].size(0) == 3 ? 6 : 100;
      if (padding) a.padding_idx = 2;
      init();
      return dispatch1(ops::embedding_backward, Tensors{in[0], in[1]}, a);
    };
    c.ref = [=](const std::vector<Ref>& r) {
      const int64_t rows = r[0].shape[0] == 3 ? 6 : 100, D = r[0].shape.back();
      Ref gw{Shape{rows, D}, std::vector<double>(static_cast<size_t>(rows * D))};
      for (size_t i = 0; i < r[1].v.size(); ++i) {
        int64_t row = static_cast<int64_t>(r[1].v[i]);
        if (padding && row == 2) continue;
        for (int64_t j = 0; j < D; ++j) gw.v[row * D + j] += r[0].v[i * D + j];
      }
      return gw;
    };
    c.f32_tol = 1e-4;
    out.push_back(c);
  }
  // ---- one_hot ----
  for (int64_t classes : {-1, 7}) {
    OpCase c;
    c.op = "one_hot";
    c.label = classes < 0 ? "inferred_classes" : "fixed_classes";
    c.runs = {{idx({3, 4}, 5)}, {idx({9}, 6)}};
    c.dtypes = {kInt64};
    c.fn = [=](const std::vector<Tensor>& in) { return F::one_hot(in[0], classes); };
    c.ref = [=](const std::vector<Ref>& r) {
      int64_t n = classes;
      if (n < 0)
        for (double v : r[0].v) n = std::max<int64_t>(n, static_cast<int64_t>(v) + 1);
      Shape os = r[0].shape;
      os.push_back(n);
      Ref out{os, std::vector<double>(static_cast<size_t>(numel(os)))};
      for (size_t i = 0; i < r[0].v.size(); ++i) out.v[i * n + static_cast<size_t>(r[0].v[i])] = 1;
      return out;
    };
    c.gradcheck = false;
    c.output_dtype = kInt64;
    out.push_back(c);
  }
  // ---- dropout (a fresh generator per call keeps fn deterministic for gradcheck) ----
  for (double p : {0.3, 0.8}) {
    OpCase c;
    c.op = "dropout";
    c.label = "p" + std::to_string(static_cast<int>(p * 10));
    c.runs = {{{{4, 7}}}, {{{3, 5, 2}}}, {{{300, 400}}}};
    c.fn = [=](const std::vector<Tensor>& in) {
      Generator g(1234);
      return F::dropout(in[0], p, true, &g);
    };
    c.ref = [=](const std::vector<Ref>& r) { return dropout_ref(r[0], p, 1234); };
    out.push_back(c);
  }
  {
    OpCase c;
    c.op = "dropout";
    c.label = "p1_zeros";
    c.runs = {{{{4, 7}}}};
    c.fn = [](const std::vector<Tensor>& in) {
      Generator g(5);
      return F::dropout(in[0], 1.0, true, &g);
    };
    c.ref = [](const std::vector<Ref>& r) { return ref_map(r[0], [](double) { return 0.0; }); };
    out.push_back(c);
  }
  return out;
}

Register lookup_cases(cases());

}  // namespace
}  // namespace kiln::testing
