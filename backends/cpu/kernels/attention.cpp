// CPU kernel for scaled_dot_product_attention. float32 runs kiln's fused attention
// (gemm/attention.h: key blocks, online softmax, no score matrix); float64 runs the same
// algorithm with one key block per query row in plain loops (it serves gradcheck and
// reference use, not speed). Both read q, k, v and the mask through their strides, so the
// heads of a packed projection ([N, L, 3, H, D] viewed as [N, H, L, D]) are never copied;
// only a last dim that is not contiguous is.
#include "kiln/ops/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "kernels.h"
#include "kiln/cpu/gemm/attention.h"
#include "nn_common.h"

namespace kiln::cpu::kernels {

namespace {

// `t` itself when its last dim is contiguous, else a dense copy.
Tensor rows_contiguous(const Tensor& t) {
  return t.size(-1) <= 1 || t.stride(-1) == 1 ? t : nn::dense(t);
}

// The element offset of each batch index (row-major over the leading `dims` of `sizes`)
// in a tensor with `strides` (0 for a broadcast dim).
std::vector<int64_t> batch_offsets(IntList sizes, const std::vector<int64_t>& strides,
                                   size_t dims) {
  int64_t count = 1;
  for (size_t d = 0; d < dims; ++d) count *= sizes[d];
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b) {
    int64_t rest = b, offset = 0;
    for (size_t d = dims; d-- > 0;) {
      offset += rest % sizes[d] * strides[d];
      rest /= sizes[d];
    }
    out[static_cast<size_t>(b)] = offset;
  }
  return out;
}

std::vector<int64_t> strides_of(const Tensor& t) {
  return {t.strides().begin(), t.strides().end()};
}

// The mask's strides aligned to the scores [B..., L, S] (right-aligned; 0 where the mask
// has size 1 or lacks the dim), so that it is read in place whatever it broadcasts over.
std::vector<int64_t> mask_strides(const Tensor& mask, IntList scores) {
  std::vector<int64_t> out(scores.size(), 0);
  const size_t lead = scores.size() - static_cast<size_t>(mask.dim());
  for (int64_t d = 0; d < mask.dim(); ++d)
    if (mask.size(d) != 1) out[lead + static_cast<size_t>(d)] = mask.stride(d);
  return out;
}

// What both dtypes need: the operands' batch offsets and row strides.
struct Layout {
  int64_t batch = 1, L = 0, S = 0, D = 0, Dv = 0;
  size_t batch_dims = 0;
  std::vector<int64_t> q_batch, k_batch, v_batch, m_batch;
  int64_t q_row = 0, k_row = 0, v_row = 0, m_row = 0, m_col = 0;
};

Layout layout_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  Layout l;
  l.batch_dims = static_cast<size_t>(q.dim() - 2);
  for (size_t d = 0; d < l.batch_dims; ++d) l.batch *= q.size(static_cast<int64_t>(d));
  l.L = q.size(-2), l.S = k.size(-2), l.D = q.size(-1), l.Dv = v.size(-1);
  l.q_batch = batch_offsets(q.sizes(), strides_of(q), l.batch_dims);
  l.k_batch = batch_offsets(k.sizes(), strides_of(k), l.batch_dims);
  l.v_batch = batch_offsets(v.sizes(), strides_of(v), l.batch_dims);
  l.q_row = q.stride(-2), l.k_row = k.stride(-2), l.v_row = v.stride(-2);
  if (mask.defined()) {
    Shape scores(q.sizes());
    scores.back() = l.S;
    std::vector<int64_t> ms = mask_strides(mask, scores);
    l.m_batch = batch_offsets(scores, ms, l.batch_dims);
    l.m_row = ms[ms.size() - 2], l.m_col = ms.back();
  }
  return l;
}

// float64: per query, the scores of all keys, their softmax and the weighted sum of values.
void attention_f64(const Layout& l, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& mask, const ops::AttentionAttrs& a, double* out, double* lse) {
  const double* qp = nn::cdata<double>(q);
  const double* kp = nn::cdata<double>(k);
  const double* vp = nn::cdata<double>(v);
  const bool bool_mask = mask.defined() && mask.dtype() == kBool;
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  parallel_for(0, l.batch * l.L,
               std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, l.S * (l.D + l.Dv))),
               [&](int64_t lo, int64_t hi) {
                 std::vector<double> s(static_cast<size_t>(l.S));
                 for (int64_t t = lo; t < hi; ++t) {
                   const int64_t b = t / l.L, i = t % l.L;
                   const double* qi = qp + l.q_batch[b] + i * l.q_row;
                   double m = kNegInf;
                   for (int64_t j = 0; j < l.S; ++j) {
                     const double* kj = kp + l.k_batch[b] + j * l.k_row;
                     double dot = 0;
                     for (int64_t d = 0; d < l.D; ++d) dot += qi[d] * a.scale * kj[d];
                     if (mask.defined()) {
                       const int64_t at = l.m_batch[b] + i * l.m_row + j * l.m_col;
                       if (bool_mask) {
                         if (!nn::cdata<bool>(mask)[at]) dot = kNegInf;
                       } else {
                         dot += nn::cdata<double>(mask)[at];
                       }
                     }
                     if (a.is_causal && j > i) dot = kNegInf;
                     s[j] = dot;
                     m = std::max(m, dot);
                   }
                   const double shift = m == kNegInf ? 0.0 : m;
                   double sum = 0;
                   for (int64_t j = 0; j < l.S; ++j) sum += s[j] = std::exp(s[j] - shift);
                   double* o = out + t * l.Dv;
                   for (int64_t e = 0; e < l.Dv; ++e) o[e] = 0;
                   for (int64_t j = 0; j < l.S; ++j) {
                     const double* vj = vp + l.v_batch[b] + j * l.v_row;
                     for (int64_t e = 0; e < l.Dv; ++e) o[e] += s[j] * vj[e];
                   }
                   const double inv = sum == 0 ? 0.0 : 1.0 / sum;
                   for (int64_t e = 0; e < l.Dv; ++e) o[e] *= inv;
                   if (lse) lse[t] = sum == 0 ? kNegInf : shift + std::log(sum);
                 }
               });
}

void attention_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::AttentionAttrs&>(c.attrs);
  const Tensor q = rows_contiguous(c.inputs[0]), k = rows_contiguous(c.inputs[1]),
               v = rows_contiguous(c.inputs[2]);
  const Tensor& mask = c.inputs[3];
  const Tensor& out = c.outputs[0];
  const Tensor& lse = c.outputs[1];
  if (out.numel() == 0 && (!lse.defined() || lse.numel() == 0)) return;
  const Layout l = layout_of(q, k, v, mask);
  if (q.dtype() == kFloat64) {
    attention_f64(l, q, k, v, mask, a, nn::mdata<double>(out),
                  lse.defined() ? nn::mdata<double>(lse) : nullptr);
    return;
  }
  KILN_CHECK(q.dtype() == kFloat32, "[scaled_dot_product_attention] the CPU kernel takes float32 ",
             "or float64, got ", q.dtype(), ". Fix: convert the inputs with .to(kiln::kFloat32).");
  gemm::AttentionArgs args;
  args.batch = l.batch, args.queries = l.L, args.keys = l.S, args.depth = l.D,
  args.value_depth = l.Dv;
  args.q = nn::cdata<float>(q), args.k = nn::cdata<float>(k), args.v = nn::cdata<float>(v);
  args.q_batch = l.q_batch, args.k_batch = l.k_batch, args.v_batch = l.v_batch;
  args.q_row = l.q_row, args.k_row = l.k_row, args.v_row = l.v_row;
  if (mask.defined()) {
    args.mask = mask.raw_data();
    args.mask_is_bool = mask.dtype() == kBool;
    args.mask_batch = l.m_batch, args.mask_row = l.m_row, args.mask_col = l.m_col;
  }
  args.scale = static_cast<float>(a.scale);
  args.causal = a.is_causal;
  args.out = nn::mdata<float>(out);
  args.lse = lse.defined() ? nn::mdata<float>(lse) : nullptr;
  gemm::attention(args);
}

}  // namespace

void register_attention_kernels() {
  ops::scaled_dot_product_attention.kernels[static_cast<size_t>(DeviceType::CPU)] =
      attention_kernel;
}

}  // namespace kiln::cpu::kernels
