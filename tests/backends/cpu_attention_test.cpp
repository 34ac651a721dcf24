// kiln's fused float32 attention (kiln/cpu/gemm/attention.h) against a double-precision
// softmax(q kᵀ * scale + mask) v: every instruction-set family this CPU can run, operands
// read in place through batch offsets and row strides (the heads of a packed projection),
// query counts that leave partial vectors and several query blocks, key counts that leave
// several key blocks, per-key and general masks of both kinds, causality, fully masked
// queries, NaN inputs, scores far apart (the online softmax's rescaling), and logsumexp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kiln/cpu/gemm/attention.h"
#include "kiln/cpu/gemm/gemm.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::cpu::gemm {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Problem {
  int64_t batch = 1, L = 1, S = 1, D = 1, Dv = 1;
  enum { NoMask, BoolPerKey, BoolFull, AddPerKey, AddFull } mask = NoMask;
  bool causal = false;
  float scale = 0.5f;
};

// q, k, v interleaved as one packed projection per batch: rows of (q | k | v | pad), so the
// row strides differ from the depths and the batch offsets from the products of sizes.
struct Operands {
  std::vector<float> packed, mask;
  std::vector<unsigned char> bool_mask;
  AttentionArgs args;
  std::vector<float> out, lse;
};

Operands make(const Problem& p, uint32_t seed, float spread = 1) {
  Operands o;
  const int64_t rows = std::max(p.L, p.S), row = p.D * 2 + p.Dv + 3;
  o.packed = random_floats(p.batch * rows * row, seed);
  for (float& x : o.packed) x *= spread;
  AttentionArgs& a = o.args;
  a.batch = p.batch, a.queries = p.L, a.keys = p.S, a.depth = p.D, a.value_depth = p.Dv;
  a.q = o.packed.data(), a.k = o.packed.data() + p.D, a.v = o.packed.data() + 2 * p.D;
  for (int64_t b = 0; b < p.batch; ++b) {
    a.q_batch.push_back(b * rows * row);
    a.k_batch.push_back(b * rows * row);
    a.v_batch.push_back(b * rows * row);
  }
  a.q_row = a.k_row = a.v_row = row;
  const bool per_key = p.mask == Problem::BoolPerKey || p.mask == Problem::AddPerKey;
  if (p.mask != Problem::NoMask) {
    const int64_t n = p.batch * (per_key ? 1 : p.L) * p.S;
    if (p.mask == Problem::BoolPerKey || p.mask == Problem::BoolFull) {
      std::vector<float> r = random_floats(n, seed + 1);
      for (float x : r) o.bool_mask.push_back(x > -0.3f);  // some queries see no key
      a.mask = o.bool_mask.data();
      a.mask_is_bool = true;
    } else {
      o.mask = random_floats(n, seed + 1);
      for (size_t i = 0; i < o.mask.size(); i += 5) o.mask[i] = -INFINITY;
      a.mask = o.mask.data();
    }
    for (int64_t b = 0; b < p.batch; ++b) a.mask_batch.push_back(b * (per_key ? 1 : p.L) * p.S);
    a.mask_row = per_key ? 0 : p.S;
    a.mask_col = 1;
  }
  a.scale = p.scale;
  a.causal = p.causal;
  o.out.assign(static_cast<size_t>(p.batch * p.L * p.Dv), -7.0f);
  o.lse.assign(static_cast<size_t>(p.batch * p.L), -7.0f);
  a.out = o.out.data();
  a.lse = o.lse.data();
  return o;
}

// The reference: out and logsumexp per query, in double.
void reference(const Problem& p, const Operands& o, std::vector<double>& out,
               std::vector<double>& lse) {
  const AttentionArgs& a = o.args;
  out.assign(static_cast<size_t>(p.batch * p.L * p.Dv), 0.0);
  lse.assign(static_cast<size_t>(p.batch * p.L), -kInf);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.L; ++i) {
      std::vector<double> s(static_cast<size_t>(p.S));
      double m = -kInf;
      for (int64_t j = 0; j < p.S; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < p.D; ++d)
          dot += static_cast<double>(a.q[a.q_batch[b] + i * a.q_row + d] * p.scale) *
                 a.k[a.k_batch[b] + j * a.k_row + d];
        if (a.mask) {
          const int64_t at = a.mask_batch[b] + i * a.mask_row + j * a.mask_col;
          if (a.mask_is_bool) {
            if (!o.bool_mask[at]) dot = -kInf;
          } else {
            dot += o.mask[at];
          }
        }
        if (p.causal && j > i) dot = -kInf;
        s[j] = dot;
        m = std::max(m, dot);
      }
      if (m == -kInf) continue;
      double sum = 0;
      for (double& x : s) sum += x = std::exp(x - m);
      lse[b * p.L + i] = m + std::log(sum);
      for (int64_t j = 0; j < p.S; ++j)
        for (int64_t e = 0; e < p.Dv; ++e)
          out[(b * p.L + i) * p.Dv + e] += s[j] / sum * a.v[a.v_batch[b] + j * a.v_row + e];
    }
}

std::string describe(const Problem& p, const char* isa) {
  return std::string(isa) + " batch " + std::to_string(p.batch) + " L " + std::to_string(p.L) +
         " S " + std::to_string(p.S) + " D " + std::to_string(p.D) + " Dv " + std::to_string(p.Dv) +
         " mask " + std::to_string(p.mask) + (p.causal ? " causal" : "");
}

void expect_matches(const Problem& p, const char* isa, float spread = 1) {
  Operands o = make(p, 17, spread);
  attention(o.args, isa);
  std::vector<double> out, lse;
  reference(p, o, out, lse);
  double worst = 0, worst_lse = 0;
  for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(o.out[i] - out[i]));
  for (size_t i = 0; i < lse.size(); ++i) {
    if (lse[i] == -kInf) {
      EXPECT_EQ(o.lse[i], -INFINITY) << describe(p, isa) << " query " << i;
      continue;
    }
    worst_lse =
        std::max(worst_lse, std::fabs(o.lse[i] - lse[i]) / std::max(1.0, std::fabs(lse[i])));
  }
  EXPECT_LT(worst, 2e-6 * spread) << describe(p, isa);
  EXPECT_LT(worst_lse, 1e-6) << describe(p, isa);
}

std::vector<const char*> families() {
  std::vector<const char*> out;
  for (const MicroKernel* k : available_kernels()) out.push_back(kernel_name(*k));
  return out;
}

TEST(CpuAttention, MatchesTheReferenceOnEveryFamily) {
  for (const char* isa : families()) {
    for (auto [L, S, D, Dv] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1},
                                                                  {28, 28, 16, 16},
                                                                  {41, 41, 32, 32},
                                                                  {5, 7, 3, 5},
                                                                  {17, 9, 8, 24},
                                                                  {70, 300, 64, 64},
                                                                  {130, 40, 12, 7},
                                                                  {3, 257, 5, 2}})
      for (auto mask : {Problem::NoMask, Problem::BoolPerKey, Problem::BoolFull, Problem::AddPerKey,
                        Problem::AddFull})
        expect_matches({.batch = 3, .L = L, .S = S, .D = D, .Dv = Dv, .mask = mask}, isa);
  }
}

TEST(CpuAttention, CausalSkipsFutureKeysOnEveryFamily) {
  for (const char* isa : families())
    for (auto [L, S] : std::vector<std::array<int64_t, 2>>{
             {5, 5}, {7, 3}, {3, 9}, {100, 100}, {200, 300}, {64, 129}})
      expect_matches({.batch = 2, .L = L, .S = S, .D = 8, .Dv = 6, .causal = true}, isa);
}

TEST(CpuAttention, ScoresFarApartRescaleTheRunningSums) {
  // Large scores make later key blocks' maxima exceed earlier ones by far: exp(m_old - m)
  // underflows to 0 and the accumulator must be reset, not kept.
  for (const char* isa : families())
    expect_matches({.batch = 2, .L = 20, .S = 400, .D = 4, .Dv = 3, .scale = 1}, isa, 30);
}

TEST(CpuAttention, NoKeysGivesZerosAndFullyMaskedQueriesToo) {
  for (const char* isa : families()) {
    Operands o = make({.batch = 2, .L = 3, .S = 0, .D = 4, .Dv = 5}, 3);
    attention(o.args, isa);
    for (float x : o.out) EXPECT_EQ(x, 0.0f) << isa;
    for (float x : o.lse) EXPECT_EQ(x, -INFINITY) << isa;
  }
}

TEST(CpuAttention, NanScoresGiveNanOutputsForTheirQueryOnly) {
  for (const char* isa : families()) {
    Problem p{.batch = 1, .L = 4, .S = 6, .D = 3, .Dv = 2};
    Operands o = make(p, 5);
    o.packed[1 * o.args.q_row + 2] = NAN;  // query 1, feature 2
    attention(o.args, isa);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t e = 0; e < 2; ++e)
        EXPECT_EQ(std::isnan(o.out[i * 2 + e]), i == 1) << isa << " query " << i;
  }
}

TEST(CpuAttention, AFamilyThisCpuCannotRunIsAnErrorNamingTheChoices) {
  Operands o = make({.batch = 1, .L = 2, .S = 2, .D = 2, .Dv = 2}, 3);
  expect_error([&] { attention(o.args, "sse9"); }, {"gemm::attention", "sse9", "generic"});
}

TEST(CpuAttention, SplitsAcrossThreadsWithTheSameResult) {
  ScopedThreads two(2);
  for (const char* isa : families())
    expect_matches({.batch = 16, .L = 70, .S = 90, .D = 16, .Dv = 16, .mask = Problem::BoolFull},
                   isa);
}

}  // namespace
}  // namespace kiln::cpu::gemm
