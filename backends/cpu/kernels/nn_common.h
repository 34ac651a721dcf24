// Small helpers shared by the neural-network CPU kernels: dense views of inputs, typed
// data pointers, index reading with range checks and a BLAS GEMM for float/double.
#pragma once

#include <cblas.h>

#include <optional>
#include <string>
#include <vector>

#include "kiln/op.h"
#include "loops.h"

namespace kiln::cpu::kernels::nn {

// `t` itself when it is contiguous, else a dense copy (kernels then index it row-major).
inline Tensor dense(const Tensor& t) {
  return t.is_contiguous() ? t : dense_copy(t);
}

template <class T>
const T* cdata(const Tensor& t) {
  return static_cast<const T*>(t.raw_data());
}
template <class T>
T* mdata(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// Reads an int32/int64 index tensor (any strides) in row-major order.
inline std::vector<int64_t> read_indices(const Tensor& t) {
  return t.to_vector<int64_t>();
}

// Throws unless every index is in [0, n) (or equals `allowed`, e.g. an ignore_index).
inline void check_indices(const std::vector<int64_t>& idx, int64_t n, const char* op,
                          const char* what, const char* fix,
                          std::optional<int64_t> allowed = std::nullopt) {
  for (size_t i = 0; i < idx.size(); ++i) {
    int64_t v = idx[i];
    if ((v < 0 || v >= n) && !(allowed && v == *allowed)) [[unlikely]]
      KILN_FAIL("[", op, "] index ", v, " (element ", i, " of the ", what, ") is out of range for ",
                n, " entries: expected 0 <= index < ", n, ". Fix: ", fix);
  }
}

// Row-major C[m, n] = alpha * op(A) op(B) + beta * C with BLAS.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  auto TA = ta ? CblasTrans : CblasNoTrans;
  auto TB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, TA, TB, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// How many chunks (at most num_threads(), each of >= min_per_chunk tasks) to cut `tasks` into.
inline int64_t chunk_count(int64_t tasks, int64_t min_per_chunk) {
  if (tasks <= 0) return 0;
  return std::max<int64_t>(
      1, std::min<int64_t>(num_threads(), tasks / std::max<int64_t>(min_per_chunk, 1)));
}

// Runs fn(chunk, begin, end) for `chunks` near-equal slices of [0, tasks) in parallel;
// kernels that keep per-chunk partial results index them by `chunk`.
template <class F>
void run_chunks(int64_t tasks, int64_t chunks, F fn) {
  if (chunks <= 0) return;
  parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t ch = b; ch < e; ++ch) fn(ch, ch * tasks / chunks, (ch + 1) * tasks / chunks);
  });
}

}  // namespace kiln::cpu::kernels::nn
