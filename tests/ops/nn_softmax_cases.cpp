// OpCases for softmax and log_softmax.
#include <cmath>

#include "harness.h"

namespace kiln::testing {
namespace {

namespace F = kiln::nn::functional;

// Plain-loop reference over one dim: [outer, n, inner] around `dim`.
Ref softmax_ref(const Ref& a, int64_t dim, bool log) {
  const int64_t rank = static_cast<int64_t>(a.shape.size());
  if (dim < 0) dim += std::max<int64_t>(rank, 1);
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < dim) outer *= a.shape[d];
    if (d == dim) n = a.shape[d];
    if (d > dim) inner *= a.shape[d];
  }
  Ref r = a;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double m = -INFINITY;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, a.v[at(k)]);
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += std::exp(a.v[at(k)] - m);
      for (int64_t k = 0; k < n; ++k)
        r.v[at(k)] = log ? a.v[at(k)] - m - std::log(s) : std::exp(a.v[at(k)] - m) / s;
    }
  }
  return r;
}

OpCase make(std::string op, std::string label, int64_t dim, std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = op;
  c.label = std::move(label);
  c.runs = std::move(runs);
  const bool log = op == "log_softmax";
  c.fn = [dim, log](const std::vector<Tensor>& in) {
    return log ? F::log_softmax(in[0], dim) : F::softmax(in[0], dim);
  };
  c.ref = [dim, log](const std::vector<Ref>& r) { return softmax_ref(r[0], dim, log); };
  return c;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (std::string op : {"softmax", "log_softmax"}) {
    out.push_back(
        make(op, "last_dim", -1,
             {{{{3, 5}}}, {{{}}}, {{{0, 3}}}, {{{2, 3, 7}}}, {{{64, 300}}}, {{{300, 1}}}}));
    out.push_back(make(op, "middle_dim", 1, {{{{2, 4, 3}}}, {{{3, 50, 70}}}, {{{1, 400, 300}}}}));
    out.push_back(make(op, "first_dim", 0, {{{{5, 4}}}, {{{7}}}, {{{100, 260}}}}));
    // Large logits: the naive exp overflows; the stable form must not.
    OpCase big = make(op, "large_logits", -1, {{{{4, 6}}}});
    big.fn = [op](const std::vector<Tensor>& in) {
      Tensor x = in[0] * 500.0;
      return op == "log_softmax" ? F::log_softmax(x, -1) : F::softmax(x, -1);
    };
    big.ref = [op](const std::vector<Ref>& r) {
      return softmax_ref(ref_map(r[0], [](double x) { return x * 500; }), -1, op == "log_softmax");
    };
    big.gradcheck = false;
    big.f32_tol = 1e-4;
    out.push_back(big);
  }
  return out;
}

Register softmax_cases(cases());

}  // namespace
}  // namespace kiln::testing
