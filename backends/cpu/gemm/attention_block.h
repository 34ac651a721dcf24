// The body of the fused attention for one instruction set: one block of queries of one
// (batch, head) slice against all its keys (attention.h). The including file defines, inside
// its target pragma and before including this:
//   V      a GCC vector of kLanes floats, VI the int32 vector of the same size,
//   kLanes its float count, madd(a, b, c) = a * b + c in one rounding (FMA where there is one).
// Everything here has internal linkage: one copy per instruction set (transpose_8x8.h says
// why an inline function with external linkage would be wrong). For the same reason the
// including file includes the headers this one needs before its target pragma, so that no
// standard-library inline function is compiled for one instruction set and shared.
//
// Per key block of kKeyBlock keys the block
//   1. packs the keys transposed (kt[d][j]) and the values padded to whole vectors,
//   2. computes the score tile q·scale kᵀ by register blocks of 4 queries x up to 4 vectors of
//      keys (q broadcast, keys loaded), then applies the mask, causality and key padding,
//   3. updates each query's running maximum m and sum l (online softmax): the tile becomes
//      exp(score - m) and the accumulated output is rescaled by exp(m_old - m) when m grows,
//   4. adds the tile's weights times the values into the output accumulator, by register
//      blocks of 4 queries x up to 4 vectors of value features.
// The output is the accumulator / l, and logsumexp = m + log(l).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "attention_family.h"

namespace kiln::cpu::gemm {
namespace {  // NOLINT(google-build-namespaces): one copy per instruction set, see above

constexpr int64_t kBlockRows = 4;  // queries per register block
constexpr int kMaxVectors = 4;     // vectors per register block
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
inline V splat(float x) {
  return V{} + x;
}
inline V vmax(V a, V b) {
  return a > b ? a : b;
}
inline float hmax(V v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
inline float hsum(V v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// exp(x) per lane, Cephes' single-precision polynomial (about 1 ulp): x = n ln2 + r with
// |r| <= ln2 / 2, exp(r) by a degree-7 polynomial, 2^n built in the exponent bits. Below
// -87.34 the result is 0 (exp(-inf) = 0 exactly), above 88.38 +inf; NaN stays NaN.
inline V vexp(V x) {
  const V hi = splat(88.3762626647949f), lo = splat(-87.3365447505531f);
  const VI over = x > hi, under = x < lo, nan = x != x;
  V xc = x > hi ? hi : x;
  xc = xc < lo ? lo : xc;
  const V magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V t = madd(xc, splat(1.44269504088896341f), magic);
  const V n = t - magic;
  const VI ni = __builtin_bit_cast(VI, t) - 0x4B400000;
  V r = madd(n, splat(-0.693359375f), xc);
  r = madd(n, splat(2.12194440e-4f), r);
  V p = splat(1.9875691500E-4f);
  p = madd(p, r, splat(1.3981999507E-3f));
  p = madd(p, r, splat(8.3334519073E-3f));
  p = madd(p, r, splat(4.1665795894E-2f));
  p = madd(p, r, splat(1.6666665459E-1f));
  p = madd(p, r, splat(5.0000001201E-1f));
  V y = madd(p, r * r, r + splat(1.0f));
  const VI bits = (ni + 127) << 23;
  y = y * __builtin_bit_cast(V, bits);
  y = under ? V{} : y;
  y = over ? splat(std::numeric_limits<float>::infinity()) : y;
  return nan ? x : y;
}

// tile[r][c] = sum_d qs[r][d] * kt[d][c] for R rows and NV vectors of columns.
template <int R, int NV>
void score_block(const float* qs, int64_t depth, const float* kt, int64_t ldk, float* tile,
                 int64_t ldt) {
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  for (int64_t d = 0; d < depth; ++d) {
    V kv[NV];
    for (int v = 0; v < NV; ++v) kv[v] = load(kt + d * ldk + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const V qb = splat(qs[r * depth + d]);
      for (int v = 0; v < NV; ++v) acc[r][v] = madd(qb, kv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) store(tile + r * ldt + v * kLanes, acc[r][v]);
}

// acc[r][e] += sum_{j < cols} p[r][j] * vp[j][e] for R rows and NV vectors of features.
template <int R, int NV>
void value_block(const float* p, int64_t ldp, int64_t cols, const float* vp, int64_t ldv,
                 float* acc, int64_t lda) {
  V o[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) o[r][v] = load(acc + r * lda + v * kLanes);
  for (int64_t j = 0; j < cols; ++j) {
    V vv[NV];
    for (int v = 0; v < NV; ++v) vv[v] = load(vp + j * ldv + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const V pb = splat(p[r * ldp + j]);
      for (int v = 0; v < NV; ++v) o[r][v] = madd(pb, vv[v], o[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) store(acc + r * lda + v * kLanes, o[r][v]);
}

// Each register block's instantiation, by [rows - 1][vectors - 1].
using ScoreBlock = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t);
using ValueBlock = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t);
#define KILN_BLOCKS_OF_ROWS(F, R) \
  { F<R, 1>, F<R, 2>, F<R, 3>, F<R, 4> }
constexpr ScoreBlock kScoreBlocks[kBlockRows][kMaxVectors] = {
    KILN_BLOCKS_OF_ROWS(score_block, 1), KILN_BLOCKS_OF_ROWS(score_block, 2),
    KILN_BLOCKS_OF_ROWS(score_block, 3), KILN_BLOCKS_OF_ROWS(score_block, 4)};
constexpr ValueBlock kValueBlocks[kBlockRows][kMaxVectors] = {
    KILN_BLOCKS_OF_ROWS(value_block, 1), KILN_BLOCKS_OF_ROWS(value_block, 2),
    KILN_BLOCKS_OF_ROWS(value_block, 3), KILN_BLOCKS_OF_ROWS(value_block, 4)};
#undef KILN_BLOCKS_OF_ROWS

inline int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

// The scratch floats attention_rows needs for blocks of up to `rows` queries.
inline int64_t scratch_floats(const AttentionArgs& a, int64_t rows) {
  const int64_t vw = round_up(a.value_depth, kLanes);
  return rows * a.depth + a.depth * kAttentionKeyBlock + kAttentionKeyBlock * vw +
         rows * kAttentionKeyBlock + rows * vw + 2 * rows;
}

// Sets the tile's entries that may not be attended to -inf and adds an additive mask: key
// padding past `cols` (up to `width`), keys after the query (causal), masked keys.
void mask_scores(const AttentionArgs& a, int64_t b, int64_t i0, int64_t rows, int64_t j0,
                 int64_t cols, int64_t width, float* tile) {
  for (int64_t r = 0; r < rows; ++r) {
    float* t = tile + r * kAttentionKeyBlock;
    const int64_t i = i0 + r;
    int64_t live = cols;  // keys [0, live) of the block may be attended
    if (a.causal) live = std::max<int64_t>(0, std::min(cols, i + 1 - j0));
    for (int64_t c = live; c < width; ++c) t[c] = kNegInf;
    if (!a.mask) continue;
    const int64_t row = a.mask_batch[b] + i * a.mask_row + j0 * a.mask_col;
    if (a.mask_is_bool) {
      const unsigned char* m = static_cast<const unsigned char*>(a.mask) + row;
      for (int64_t c = 0; c < live; ++c)
        if (!m[c * a.mask_col]) t[c] = kNegInf;
    } else {
      const float* m = static_cast<const float*>(a.mask) + row;
      for (int64_t c = 0; c < live; ++c) t[c] += m[c * a.mask_col];
    }
  }
}

// Queries [i0, i1) of slice b; `scratch` holds scratch_floats(a, i1 - i0) floats.
void attention_rows(const AttentionArgs& a, int64_t b, int64_t i0, int64_t i1, float* scratch) {
  const int64_t rows = i1 - i0, D = a.depth, Dv = a.value_depth;
  const int64_t vw = round_up(Dv, kLanes), vectors = vw / kLanes;
  constexpr int64_t kB = kAttentionKeyBlock;
  float* qs = scratch;
  float* kt = qs + rows * D;
  float* vp = kt + D * kB;
  float* tile = vp + kB * vw;
  float* acc = tile + rows * kB;
  float* m = acc + rows * vw;
  float* l = m + rows;
  for (int64_t r = 0; r < rows; ++r) {
    const float* q = a.q + a.q_batch[b] + (i0 + r) * a.q_row;
    for (int64_t d = 0; d < D; ++d) qs[r * D + d] = q[d] * a.scale;
    m[r] = kNegInf;
    l[r] = 0;
  }
  std::memset(acc, 0, sizeof(float) * rows * vw);
  // Causal: the block's last query attends to keys [0, i1) only.
  const int64_t key_end = a.causal ? std::min(a.keys, i1) : a.keys;
  for (int64_t j0 = 0; j0 < key_end; j0 += kB) {
    const int64_t cols = std::min(kB, key_end - j0), width = round_up(cols, kLanes);
    for (int64_t j = 0; j < cols; ++j) {
      const float* k = a.k + a.k_batch[b] + (j0 + j) * a.k_row;
      for (int64_t d = 0; d < D; ++d) kt[d * kB + j] = k[d];
      const float* v = a.v + a.v_batch[b] + (j0 + j) * a.v_row;
      std::memcpy(vp + j * vw, v, sizeof(float) * Dv);
      for (int64_t e = Dv; e < vw; ++e) vp[j * vw + e] = 0;
    }
    for (int64_t j = cols; j < width; ++j)
      for (int64_t d = 0; d < D; ++d) kt[d * kB + j] = 0;

    for (int64_t r = 0; r < rows; r += kBlockRows) {
      const int64_t rr = std::min(kBlockRows, rows - r);
      for (int64_t c = 0; c < width; c += kMaxVectors * kLanes) {
        const int64_t nv = std::min<int64_t>(kMaxVectors, (width - c) / kLanes);
        kScoreBlocks[rr - 1][nv - 1](qs + r * D, D, kt + c, kB, tile + r * kB + c, kB);
      }
    }
    mask_scores(a, b, i0, rows, j0, cols, width, tile);

    // The online softmax: the tile becomes exp(score - m_new), l and acc are rescaled.
    for (int64_t r = 0; r < rows; ++r) {
      float* t = tile + r * kB;
      V mv = splat(kNegInf);
      for (int64_t c = 0; c < width; c += kLanes) mv = vmax(mv, load(t + c));
      const float block_max = hmax(mv);
      const float m_new = block_max > m[r] ? block_max : m[r];
      const float shift = m_new == kNegInf ? 0.0f : m_new;  // a row masked so far stays 0
      const float alpha = std::exp(m[r] - shift);
      V sum{};
      const V sv = splat(shift);
      for (int64_t c = 0; c < width; c += kLanes) {
        const V p = vexp(load(t + c) - sv);
        store(t + c, p);
        sum += p;
      }
      l[r] = l[r] * alpha + hsum(sum);
      m[r] = m_new;
      if (alpha != 1.0f) {
        const V av = splat(alpha);
        for (int64_t e = 0; e < vw; e += kLanes)
          store(acc + r * vw + e, load(acc + r * vw + e) * av);
      }
    }

    for (int64_t r = 0; r < rows; r += kBlockRows) {
      const int64_t rr = std::min(kBlockRows, rows - r);
      for (int64_t e = 0; e < vectors; e += kMaxVectors) {
        const int64_t nv = std::min<int64_t>(kMaxVectors, vectors - e);
        kValueBlocks[rr - 1][nv - 1](tile + r * kB, kB, cols, vp + e * kLanes, vw,
                                     acc + r * vw + e * kLanes, vw);
      }
    }
  }

  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    // A query that may attend to no key: zeros and a logsumexp of -inf. (l is NaN when a
    // score was: then the output is too.)
    const float inv = l[r] == 0 ? 0.0f : 1.0f / l[r];
    float* out = a.out + (b * a.queries + i) * Dv;
    for (int64_t e = 0; e < Dv; ++e) out[e] = acc[r * vw + e] * inv;
    if (a.lse) a.lse[b * a.queries + i] = l[r] == 0 ? kNegInf : m[r] + std::log(l[r]);
  }
}

}  // namespace
}  // namespace kiln::cpu::gemm
