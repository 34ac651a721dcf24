// The body of the fused attention for one instruction set: one block of queries of one
// (batch, head) slice against all its keys (attention.h). The including file defines, inside
// its target pragma and before including this:
//   V, VI            GCC vectors of kLanes floats and of kLanes int32,
//   madd(a, b, c)    a * b + c in one rounding (FMA where there is one),
//   kAccumulators    how many vector accumulators a register block may hold.
// Everything here has internal linkage: one copy per instruction set (transpose_8x8.h says
// why an inline function with external linkage would be wrong). For the same reason the
// including file includes the headers this one needs before its target pragma, so that no
// standard-library inline function is compiled for one instruction set and shared.
//
// The block works transposed, with its queries along the vector lanes: the scores are a
// tile sᵀ[key][query], so each query's softmax runs down a column (no horizontal reductions)
// and its running maximum m and sum l are vectors; keys and values are read in place, one
// broadcast element at a time, and only the queries are packed (qt[d][query] = q * scale).
// Per block of kAttentionKeyBlock keys:
//   1. sᵀ = k qtᵀ by register blocks of up to 8 keys x 4 vectors of queries, then the mask,
//      causality and the padded query lanes;
//   2. the online softmax: m grows to the block's column maximum, the tile becomes
//      exp(s - m), l and the accumulator are rescaled by exp(m_old - m);
//   3. the accumulator oᵀ[feature][query] += vᵀ sᵀ-weights, by register blocks of up to 8
//      value features x 4 vectors of queries.
// The output is oᵀ / l transposed back, and logsumexp = m + log(l).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "attention_family.h"

namespace kiln::cpu::gemm {
namespace {  // NOLINT(google-build-namespaces): one copy per instruction set, see above

constexpr int kMaxRows = 8;     // keys (or value features) per register block, at most
constexpr int kMaxVectors = 4;  // vectors of queries per register block, at most
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

// exp(x) per lane for x <= 0 or NaN (scores minus their maximum), Cephes' single-precision
// polynomial (about 1 ulp): x = n ln2 + r with |r| <= ln2 / 2, exp(r) by a degree-7
// polynomial, 2^n built in the exponent bits. Below -87.34 the result is 0 (so exp(-inf)
// = 0 exactly); NaN stays NaN through the arithmetic.
inline V vexp_nonpositive(V x) {
  const V lo = splat(-87.3365447505531f);
  const VI under = x < lo;
  const V xc = under ? lo : x;
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
  const V y = madd(p, r * r, r + splat(1.0f));
  const VI bits = (ni + 127) << 23;
  return under ? V{} : y * __builtin_bit_cast(V, bits);
}

// log(x) per lane for a softmax sum x: 0 (-> -inf), x >= 1 or NaN. Cephes' single-precision
// logf: x = f 2^e with f in [sqrt(1/2), sqrt(2)), log(f) by a degree-9 polynomial in f - 1.
inline V vlog_sum(V x) {
  const VI bits = __builtin_bit_cast(VI, x);
  VI e = ((bits >> 23) & 0xff) - 126;
  V f = __builtin_bit_cast(V, (bits & 0x807fffff) | 0x3f000000);  // in [0.5, 1)
  const VI small = f < splat(0.707106781186547524f);
  e = small ? e - 1 : e;
  f = (small ? f + f : f) - splat(1.0f);
  const V z = f * f;
  V y = splat(7.0376836292E-2f);
  y = madd(y, f, splat(-1.1514610310E-1f));
  y = madd(y, f, splat(1.1676998740E-1f));
  y = madd(y, f, splat(-1.2420140846E-1f));
  y = madd(y, f, splat(1.4249322787E-1f));
  y = madd(y, f, splat(-1.6668057665E-1f));
  y = madd(y, f, splat(2.0000714765E-1f));
  y = madd(y, f, splat(-2.4999993993E-1f));
  y = madd(y, f, splat(3.3333331174E-1f));
  y = y * f * z;
  const V ef = __builtin_convertvector(e, V);
  y = madd(ef, splat(-2.12194440e-4f), y);
  y = madd(z, splat(-0.5f), y);
  const V log = madd(ef, splat(0.693359375f), f + y);
  const V zero = x == V{} ? splat(kNegInf) : log;
  return x != x ? x : zero;
}

// c[r][v] (+)= sum_j a[r][j] * b[j][v] for R rows and NV vectors of columns, where a's row r
// is read at a[r * a_row + j * a_col] (broadcast) and b's row j at b[j * ldb] (vectors); c
// has leading dim ldc. The scores (a = keys, b = packed queries, depth j) and the value
// product (a = values transposed in place, b = the weights, keys j) are both this product.
template <int R, int NV>
void broadcast_block(int64_t depth, const float* a, int64_t a_row, int64_t a_col, const float* b,
                     int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? load(c + r * ldc + v * kLanes) : V{};
  for (int64_t j = 0; j < depth; ++j) {
    V bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = load(b + j * ldb + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const V ab = splat(a[r * a_row + j * a_col]);
      for (int v = 0; v < NV; ++v) acc[r][v] = madd(ab, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) store(c + r * ldc + v * kLanes, acc[r][v]);
}

using BroadcastBlock = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t,
                                float*, int64_t, bool);
#define KILN_BLOCKS_WITH_ROWS(R) \
  { broadcast_block<R, 1>, broadcast_block<R, 2>, broadcast_block<R, 3>, broadcast_block<R, 4> }
// Each register block's instantiation, by [rows - 1][vectors - 1].
constexpr BroadcastBlock kBlocks[kMaxRows][kMaxVectors] = {
    KILN_BLOCKS_WITH_ROWS(1), KILN_BLOCKS_WITH_ROWS(2), KILN_BLOCKS_WITH_ROWS(3),
    KILN_BLOCKS_WITH_ROWS(4), KILN_BLOCKS_WITH_ROWS(5), KILN_BLOCKS_WITH_ROWS(6),
    KILN_BLOCKS_WITH_ROWS(7), KILN_BLOCKS_WITH_ROWS(8)};
#undef KILN_BLOCKS_WITH_ROWS

// c (+)= a b over `rows` rows and `vectors` vectors of columns, cut into register blocks
// that fit the instruction set's accumulators (broadcast_block has the operands' layout).
void broadcast_product(int64_t rows, int64_t vectors, int64_t depth, const float* a, int64_t a_row,
                       int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc,
                       bool accumulate) {
  for (int64_t v0 = 0; v0 < vectors; v0 += kMaxVectors) {
    const int64_t nv = std::min<int64_t>(kMaxVectors, vectors - v0);
    const int64_t block_rows = std::min<int64_t>(kMaxRows, kAccumulators / nv);
    for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
      const int64_t nr = std::min(block_rows, rows - r0);
      kBlocks[nr - 1][nv - 1](depth, a + r0 * a_row, a_row, a_col, b + v0 * kLanes, ldb,
                              c + r0 * ldc + v0 * kLanes, ldc, accumulate);
    }
  }
}

inline int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

// The scratch floats attention_rows needs for blocks of up to `rows` queries.
inline int64_t scratch_floats(const AttentionArgs& a, int64_t rows) {
  const int64_t width = round_up(rows, kLanes);
  return width * (a.depth + kAttentionKeyBlock + a.value_depth + 2);
}

// Sets the scores sᵀ[key][query] that may not be attended to -inf and adds an additive
// mask, for keys [j0, j0 + cols) and queries [i0, i0 + rows) (lanes up to `width`).
void mask_scores(const AttentionArgs& a, int64_t b, int64_t i0, int64_t rows, int64_t width,
                 int64_t j0, int64_t cols, float* tile) {
  if (a.causal && j0 + cols - 1 > i0) {
    // Key j is masked for the queries i < j: the lanes below j - i0.
    VI lane;
    for (int i = 0; i < kLanes; ++i) lane[i] = i;
    for (int64_t j = std::max<int64_t>(0, i0 + 1 - j0); j < cols; ++j)
      for (int64_t c = 0; c < width; c += kLanes) {
        const VI future = lane + static_cast<int32_t>(c) < static_cast<int32_t>(j0 + j - i0);
        store(tile + j * width + c, future ? splat(kNegInf) : load(tile + j * width + c));
      }
  }
  if (!a.mask) return;
  const bool per_key = a.mask_row == 0;  // a key-padding mask: one value per key
  for (int64_t j = 0; j < cols; ++j) {
    float* t = tile + j * width;
    const int64_t at = a.mask_batch[b] + i0 * a.mask_row + (j0 + j) * a.mask_col;
    if (a.mask_is_bool) {
      const unsigned char* m = static_cast<const unsigned char*>(a.mask) + at;
      if (per_key) {
        if (!*m)
          for (int64_t c = 0; c < width; c += kLanes) store(t + c, splat(kNegInf));
      } else {
        for (int64_t r = 0; r < rows; ++r)
          if (!m[r * a.mask_row]) t[r] = kNegInf;
      }
    } else {
      const float* m = static_cast<const float*>(a.mask) + at;
      if (per_key) {
        const V add = splat(*m);
        for (int64_t c = 0; c < width; c += kLanes) store(t + c, load(t + c) + add);
      } else {
        for (int64_t r = 0; r < rows; ++r) t[r] += m[r * a.mask_row];
      }
    }
  }
}

// Queries [i0, i1) of slice b; `scratch` holds scratch_floats(a, i1 - i0) floats.
void attention_rows(const AttentionArgs& a, int64_t b, int64_t i0, int64_t i1, float* scratch) {
  const int64_t rows = i1 - i0, D = a.depth, Dv = a.value_depth;
  const int64_t width = round_up(rows, kLanes), vectors = width / kLanes;
  float* qt = scratch;                             // [D][width]
  float* tile = qt + D * width;                    // [kAttentionKeyBlock][width]
  float* acc = tile + kAttentionKeyBlock * width;  // [Dv][width]
  float* m = acc + Dv * width;                     // [width]
  float* l = m + width;                            // [width]
  std::memset(qt, 0, sizeof(float) * D * width);
  for (int64_t r = 0; r < rows; ++r) {
    const float* q = a.q + a.q_batch[b] + (i0 + r) * a.q_row;
    for (int64_t d = 0; d < D; ++d) qt[d * width + r] = q[d] * a.scale;
  }
  std::memset(acc, 0, sizeof(float) * Dv * width);
  for (int64_t c = 0; c < width; c += kLanes) {
    store(m + c, splat(kNegInf));
    store(l + c, V{});
  }
  const float* k = a.k + a.k_batch[b];
  const float* v = a.v + a.v_batch[b];
  // Causal: the block's last query attends to keys [0, i1) only.
  const int64_t key_end = a.causal ? std::min(a.keys, i1) : a.keys;
  for (int64_t j0 = 0; j0 < key_end; j0 += kAttentionKeyBlock) {
    const int64_t cols = std::min(kAttentionKeyBlock, key_end - j0);
    broadcast_product(cols, vectors, D, k + j0 * a.k_row, a.k_row, 1, qt, width, tile, width,
                      false);
    mask_scores(a, b, i0, rows, width, j0, cols, tile);

    for (int64_t c = 0; c < width; c += kLanes) {
      V block_max = splat(kNegInf);
      for (int64_t j = 0; j < cols; ++j) block_max = vmax(block_max, load(tile + j * width + c));
      const V m_old = load(m + c), m_new = vmax(m_old, block_max);
      // A query that attended to no key yet keeps l = 0 and acc = 0 (shift by 0, not -inf).
      const V shift = m_new == splat(kNegInf) ? V{} : m_new;
      V sum{};
      for (int64_t j = 0; j < cols; ++j) {
        const V p = vexp_nonpositive(load(tile + j * width + c) - shift);
        store(tile + j * width + c, p);
        sum += p;
      }
      const V alpha = vexp_nonpositive(m_old - shift);  // 0 while m_old is -inf
      store(l + c, madd(load(l + c), alpha, sum));
      store(m + c, m_new);
      if (j0 > 0)
        for (int64_t e = 0; e < Dv; ++e)
          store(acc + e * width + c, load(acc + e * width + c) * alpha);
    }
    // oᵀ[e][i] += sum_j v[j][e] * p[j][i]: the values read transposed, in place.
    broadcast_product(Dv, vectors, cols, v + j0 * a.v_row, 1, a.v_row, tile, width, acc, width,
                      true);
  }

  // A query that may attend to no key: zeros and a logsumexp of -inf. (l is NaN when a score
  // was: then the output is too.) l becomes 1 / l, m becomes the logsumexp.
  for (int64_t c = 0; c < width; c += kLanes) {
    const V sum = load(l + c);
    store(m + c, load(m + c) + vlog_sum(sum));
    store(l + c, sum == V{} ? V{} : splat(1.0f) / sum);
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* out = a.out + (b * a.queries + i0 + r) * Dv;
    for (int64_t e = 0; e < Dv; ++e) out[e] = acc[e * width + r] * l[r];
  }
  if (a.lse) std::memcpy(a.lse + b * a.queries + i0, m, sizeof(float) * rows);
}

}  // namespace
}  // namespace kiln::cpu::gemm
