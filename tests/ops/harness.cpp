// The op test harness: references, input generation and the registry.
#include "harness.h"

#include <cmath>

namespace kiln::testing {

std::vector<OpCase>& registry() {
  static std::vector<OpCase> cases;
  return cases;
}

Register::Register(std::vector<OpCase> cases) {
  for (auto& c : cases) registry().push_back(std::move(c));
}

Ref to_ref(const Tensor& t) { return Ref{Shape(t.sizes()), t.to_vector<double>()}; }

Shape ref_strides(IntList shape) { return contiguous_strides(shape); }

double ref_at(const Ref& a, IntList index) {
  Shape st = ref_strides(a.shape);
  int64_t off = 0;
  for (size_t i = 0; i < index.size(); ++i) off += index[i] * st[i];
  return a.v[static_cast<size_t>(off)];
}

namespace {

// Offset of output element `i` in a broadcast operand.
int64_t broadcast_offset(int64_t i, IntList out, IntList in) {
  Shape in_st = ref_strides(in);
  int64_t off = 0;
  size_t lead = out.size() - in.size();
  for (size_t d = out.size(); d-- > 0;) {
    int64_t idx = i % out[d];
    i /= out[d];
    if (d >= lead && in[d - lead] != 1) off += idx * in_st[d - lead];
  }
  return off;
}

}  // namespace

Ref ref_map(const Ref& a, const std::function<double(double)>& f) {
  Ref r{a.shape, a.v};
  for (double& x : r.v) x = f(x);
  return r;
}

Ref ref_map2(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
  Shape out = broadcast_shapes(a.shape, b.shape, "ref");
  Ref r{out, std::vector<double>(static_cast<size_t>(numel(out)))};
  for (int64_t i = 0; i < r.numel(); ++i)
    r.v[i] = f(a.v[broadcast_offset(i, out, a.shape)], b.v[broadcast_offset(i, out, b.shape)]);
  return r;
}

Ref ref_map3(const Ref& a, const Ref& b, const Ref& c, const std::function<double(double, double, double)>& f) {
  Shape out = broadcast_shapes(broadcast_shapes(a.shape, b.shape, "ref"), c.shape, "ref");
  Ref r{out, std::vector<double>(static_cast<size_t>(numel(out)))};
  for (int64_t i = 0; i < r.numel(); ++i)
    r.v[i] = f(a.v[broadcast_offset(i, out, a.shape)], b.v[broadcast_offset(i, out, b.shape)],
               c.v[broadcast_offset(i, out, c.shape)]);
  return r;
}

Ref ref_reduce(const Ref& a, IntList dims, bool keepdim, const std::function<double(const std::vector<double>&)>& f) {
  int64_t rank = static_cast<int64_t>(a.shape.size());
  uint64_t mask = reduction_mask(dims, rank, "ref");
  Shape out, kept;
  for (int64_t d = 0; d < rank; ++d) {
    bool red = mask & (1ull << d);
    if (!red) kept.push_back(a.shape[d]);
    if (!red) out.push_back(a.shape[d]);
    else if (keepdim) out.push_back(1);
  }
  std::vector<std::vector<double>> groups(static_cast<size_t>(numel(kept)));
  Shape st = ref_strides(a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) {
    int64_t rem = i, key = 0, mult = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t idx = rem % a.shape[d];
      rem /= a.shape[d];
      if (!(mask & (1ull << d))) {
        key += idx * mult;
        mult *= a.shape[d];
      }
    }
    groups[static_cast<size_t>(key)].push_back(a.v[static_cast<size_t>(i)]);
  }
  Ref r{out, {}};
  for (auto& g : groups) r.v.push_back(f(g));
  return r;
}

std::vector<std::vector<Input>> unary_runs(Gen gen) {
  return {
      {{{3, 4}, gen}},
      {{{}, gen}},              // 0-d
      {{{0, 3}, gen}},          // zero-size
      {{{2, 3, 5}, gen}},
      {{{256, 160}, gen}},      // big enough for the threaded, vectorized paths
  };
}

std::vector<std::vector<Input>> binary_runs(Gen a, Gen b) {
  return {
      {{{3, 4}, a}, {{3, 4}, b}},
      {{{3, 1}, a}, {{4}, b}},        // broadcast both ways
      {{{2, 3, 4}, a}, {{}, b}},      // tensor with 0-d
      {{{}, a}, {{2, 3}, b}},
      {{{0, 4}, a}, {{4}, b}},        // zero-size
      {{{256, 160}, a}, {{256, 160}, b}},
      {{{256, 160}, a}, {{160}, b}},
  };
}

Tensor make_input(const Input& in, DType dtype, bool noncontiguous, uint64_t seed) {
  DType dt = in.dtype.value_or(dtype);
  Shape shape = in.shape;
  bool flip = noncontiguous && shape.size() >= 2;
  if (flip) std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  int64_t n = numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto r = Generator::philox(seed, static_cast<uint64_t>(i));
    double u = Generator::to_unit_double(r[0], r[1]);
    switch (in.gen) {
      case Gen::Uniform: v[i] = -2 + 4 * u; break;
      case Gen::Positive: v[i] = 0.5 + 2.5 * u; break;
      case Gen::Unit: v[i] = -0.9 + 1.8 * u; break;
      case Gen::Int: v[i] = std::floor(u * 11) - 5; break;
      case Gen::Index: v[i] = std::floor(u * static_cast<double>(in.high)); break;
      case Gen::Bool: v[i] = u < 0.5 ? 0 : 1; break;
      case Gen::NonZero: v[i] = (u < 0.5 ? -1 : 1) * (0.5 + 3 * std::fabs(u - 0.5)); break;
    }
  }
  // from_vector reads an empty shape as "1-D": reshape so 0-d inputs really are 0-d.
  Tensor t = Tensor::from_vector(v, shape).reshape(shape).to(dt);
  if (flip) t = t.transpose(-1, -2);
  return t;
}

}  // namespace kiln::testing
