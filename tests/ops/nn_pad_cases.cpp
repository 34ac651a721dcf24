// OpCases for pad (constant with positive and negative amounts, reflect, replicate,
// circular) and pad_backward, with plain-loop references.
#include "harness.h"
#include "kiln/ops/pad.h"

namespace kiln::testing {
namespace {

namespace F = kiln::nn::functional;

// The input index output position o reads along a dim of size n padded by `left`; -1 = fill.
int64_t source(int64_t o, int64_t n, int64_t left, const std::string& mode) {
  int64_t i = o - left;
  if (mode == "constant") return i >= 0 && i < n ? i : -1;
  if (mode == "replicate") return std::min(std::max<int64_t>(i, 0), n - 1);
  if (mode == "circular") return ((i % n) + n) % n;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;  // reflect
  return i;
}

Shape padded(const Shape& in, const Shape& pad) {
  Shape out = in;
  for (size_t k = 0; 2 * k < pad.size(); ++k)
    out[out.size() - 1 - k] += pad[2 * k] + pad[2 * k + 1];
  return out;
}

// Calls f(out_offset, in_offset or -1) for every output element.
template <class Fn>
void for_each_output(const Shape& in, const Shape& pad, const std::string& mode, Fn f) {
  Shape out = padded(in, pad);
  const size_t rank = in.size();
  Shape in_st = ref_strides(in);
  for (int64_t i = 0; i < numel(out); ++i) {
    int64_t rem = i, src = 0;
    for (size_t d = rank; d-- > 0;) {
      int64_t o = rem % out[d];
      rem /= out[d];
      size_t k = rank - 1 - d;
      int64_t left = 2 * k < pad.size() ? pad[2 * k] : 0;
      int64_t s = source(o, in[d], left, mode);
      if (s < 0 || src < 0) {
        src = -1;
      } else {
        src += s * in_st[d];
      }
    }
    f(i, src);
  }
}

Ref pad_ref(const Ref& x, const Shape& pad, const std::string& mode, double value) {
  Shape os = padded(x.shape, pad);
  Ref out{os, std::vector<double>(static_cast<size_t>(numel(os)))};
  for_each_output(x.shape, pad, mode,
                  [&](int64_t o, int64_t s) { out.v[o] = s < 0 ? value : x.v[s]; });
  return out;
}

OpCase pad_case(std::string label, Shape pad, std::string mode, double value,
                std::vector<std::vector<Input>> runs) {
  OpCase c;
  c.op = "pad";
  c.label = std::move(label);
  c.runs = std::move(runs);
  c.fn = [=](const std::vector<Tensor>& in) { return F::pad(in[0], pad, mode, value); };
  c.ref = [=](const std::vector<Ref>& r) { return pad_ref(r[0], pad, mode, value); };
  return c;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  out.push_back(
      pad_case("constant_last", {1, 2}, "constant", 0, {{{{2, 3, 4}}}, {{{5}}}, {{{300, 200}}}}));
  out.push_back(pad_case("constant_two_dims_value", {1, 1, 2, 0}, "constant", 1.5,
                         {{{{2, 3, 4}}}, {{{3, 2}}}}));
  out.push_back(pad_case("constant_bottom_only", {0, 0, 0, 1}, "constant", 0, {{{{1, 2, 5, 6}}}}));
  out.push_back(pad_case("constant_crop", {-1, 2, 1, -2}, "constant", 0, {{{{3, 4, 5}}}}));
  out.push_back(pad_case("constant_three_dims", {1, 0, 0, 1, 2, 1}, "constant", -1,
                         {{{{2, 2, 3}}}, {{{1, 2, 3, 4}}}}));
  {
    OpCase c = pad_case("constant_empty_dim", {1, 1}, "constant", 2, {{{{3, 0}}}});
    c.gradcheck = false;  // no elements to differentiate
    out.push_back(c);
  }
  out.push_back(
      pad_case("reflect", {2, 1, 1, 2}, "reflect", 0, {{{{2, 3, 4}}}, {{{2, 3, 50, 60}}}}));
  out.push_back(pad_case("reflect_1d", {3, 3}, "reflect", 0, {{{{2, 5}}}}));
  out.push_back(
      pad_case("replicate", {3, 1, 0, 2}, "replicate", 0, {{{{2, 3, 4}}}, {{{1, 2, 40, 30}}}}));
  out.push_back(
      pad_case("circular", {2, 3, 1, 1}, "circular", 0, {{{{2, 3, 4}}}, {{{1, 2, 30, 40}}}}));
  {
    OpCase c = pad_case("ints", {1, 2}, "constant", 7, {{{{3, 4}, Gen::Int}}});
    c.dtypes = {kInt64, kInt32};
    c.gradcheck = false;
    out.push_back(c);
  }
  // ---- pad_backward (non-constant modes; called directly) ----
  for (std::string mode : {"reflect", "replicate", "circular"}) {
    Shape pad{2, 1, 1, 2};
    OpCase c;
    c.op = "pad_backward";
    c.label = mode;
    c.runs = {{{{2, 3 + 3, 4 + 3}}}, {{{2, 2, 30 + 3, 40 + 3}}}};
    c.fn = [=](const std::vector<Tensor>& in) {
      init();
      ops::PadAttrs a;
      a.pad = pad;
      a.mode = mode;
      return dispatch1(ops::pad_backward, Tensors{in[0]}, a);
    };
    c.ref = [=](const std::vector<Ref>& r) {
      Shape in = r[0].shape;
      for (size_t k = 0; 2 * k < pad.size(); ++k)
        in[in.size() - 1 - k] -= pad[2 * k] + pad[2 * k + 1];
      Ref gx{in, std::vector<double>(static_cast<size_t>(numel(in)))};
      for_each_output(in, pad, mode, [&](int64_t o, int64_t s) { gx.v[s] += r[0].v[o]; });
      return gx;
    };
    out.push_back(c);
  }
  return out;
}

Register pad_cases(cases());

}  // namespace
}  // namespace kiln::testing
