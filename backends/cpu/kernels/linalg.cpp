// CPU matmul: OpenBLAS (sgemm/dgemm, sgemv/dgemv for single rows), measured fastest on
// the target machines (see docs/perf.md). OpenBLAS runs single-threaded; kiln's pool
// splits the work (batches, or row blocks of one large product), so the cores are never
// shared by two thread pools.
#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "kernels.h"
#include "kiln/ops/linalg.h"
#include "loops.h"

namespace kiln::cpu::kernels {

namespace {

// One operand matrix as BLAS sees it: a base pointer, a transpose flag and a leading dim.
struct MatrixView {
  bool transposed = false;
  int64_t ld = 0;
};

// BLAS takes row-major matrices with unit column stride, or their transposes.
std::optional<MatrixView> blas_view(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (col_stride == 1 && (rows == 1 || row_stride >= std::max<int64_t>(cols, 1))) return MatrixView{false, std::max<int64_t>(row_stride, std::max<int64_t>(cols, 1))};
  if (row_stride == 1 && (cols == 1 || col_stride >= std::max<int64_t>(rows, 1))) return MatrixView{true, std::max<int64_t>(col_stride, std::max<int64_t>(rows, 1))};
  return std::nullopt;
}

template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
  auto TA = ta ? CblasTrans : CblasNoTrans;
  auto TB = tb ? CblasTrans : CblasNoTrans;
  if (m == 1) {
    // y[n] = B^T x: a gemv over B (about 6x faster than a 1-row gemm in OpenBLAS).
    auto TBv = tb ? CblasNoTrans : CblasTrans;
    int64_t brows = tb ? n : k, bcols = tb ? k : n;
    int64_t incx = ta ? lda : 1;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemv(CblasRowMajor, TBv, brows, bcols, 1.0f, b, ldb, a, incx, 0.0f, c, 1);
    else
      cblas_dgemv(CblasRowMajor, TBv, brows, bcols, 1.0, b, ldb, a, incx, 0.0, c, 1);
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, TA, TB, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

template <class T>
void naive_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b,
                int64_t brs, int64_t bcs, T* c) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += a[i * ars + p * acs] * b[p * brs + j * bcs];
      c[i * n + j] = acc;
    }
}

// Multiply-adds from which one product is split across threads. A row (a batch-1 layer,
// a gemv) splits sooner: its columns are independent and the pool's round trip (~0.5 us)
// is a tenth of a 256 x 256 gemv.
constexpr int64_t kParallelGemm = int64_t{1} << 18;
constexpr int64_t kParallelGemv = int64_t{1} << 15;

template <class T>
void matmul_typed(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  Tensor a = a_in, b = b_in;
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const Shape& osz = out.impl()->sizes;
  const size_t batch_rank = osz.size() - 2;
  const int64_t batches = numel(IntList(osz).subspan(0, batch_rank));
  if (numel(osz) == 0) return;
  T* c = static_cast<T*>(out.raw_data());
  if (k == 0) {
    std::fill(c, c + numel(osz), T(0));
    return;
  }

  // Broadcast batch strides of each operand onto the output's batch dims.
  auto batch_strides = [&](const Tensor& t) {
    Shape st(batch_rank, 0);
    size_t lead = batch_rank - static_cast<size_t>(t.dim() - 2);
    for (size_t d = lead; d < batch_rank; ++d)
      st[d] = t.sizes()[d - lead] == 1 ? 0 : t.strides()[d - lead];
    return st;
  };
  Shape as = batch_strides(a), bs = batch_strides(b);
  const T* abase = static_cast<const T*>(a.raw_data());
  const T* bbase = static_cast<const T*>(b.raw_data());
  auto offset_of = [&](int64_t batch, const Shape& st) {
    int64_t off = 0;
    for (size_t d = batch_rank; d-- > 0;) {
      off += (batch % osz[d]) * st[d];
      batch /= osz[d];
    }
    return off;
  };

  if constexpr (std::is_floating_point_v<T>) {
    auto av = blas_view(m, k, a.stride(-2), a.stride(-1));
    auto bv = blas_view(k, n, b.stride(-2), b.stride(-1));
    if (!av) {
      a = dense_copy(a);
      abase = static_cast<const T*>(a.raw_data());
      as = batch_strides(a);
      av = blas_view(m, k, a.stride(-2), a.stride(-1));
    }
    if (!bv) {
      b = dense_copy(b);
      bbase = static_cast<const T*>(b.raw_data());
      bs = batch_strides(b);
      bv = blas_view(k, n, b.stride(-2), b.stride(-1));
    }
    const int64_t flops_per_batch = m * n * k;
    if (batches > 1) {
      parallel_for(0, batches, std::max<int64_t>(1, 65536 / std::max<int64_t>(flops_per_batch, 1)), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          gemm<T>(av->transposed, bv->transposed, m, n, k, abase + offset_of(i, as), av->ld,
                  bbase + offset_of(i, bs), bv->ld, c + i * m * n, n);
      });
      return;
    }
    // One product: split rows of C (or columns when there are few rows) across threads.
    const int64_t a_row_step = av->transposed ? 1 : av->ld;
    const int64_t b_col_step = bv->transposed ? bv->ld : 1;
    if (m >= 2 * num_threads() && flops_per_batch >= kParallelGemm) {
      parallel_for(0, m, std::max<int64_t>(8, (int64_t{1} << 17) / std::max<int64_t>(n * k, 1)), [&](int64_t lo, int64_t hi) {
        gemm<T>(av->transposed, bv->transposed, hi - lo, n, k, abase + lo * a_row_step, av->ld, bbase,
                bv->ld, c + lo * n, n);
      });
    } else if (flops_per_batch >= (m == 1 ? kParallelGemv : kParallelGemm) && n >= 64) {
      parallel_for(0, n, 32, [&](int64_t lo, int64_t hi) {
        gemm<T>(av->transposed, bv->transposed, m, hi - lo, k, abase, av->ld, bbase + lo * b_col_step,
                bv->ld, c + lo, n);
      });
    } else {
      gemm<T>(av->transposed, bv->transposed, m, n, k, abase, av->ld, bbase, bv->ld, c, n);
    }
  } else {
    parallel_for(0, batches, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        naive_gemm<T>(m, n, k, abase + offset_of(i, as), a.stride(-2), a.stride(-1), bbase + offset_of(i, bs),
                      b.stride(-2), b.stride(-1), c + i * m * n);
    });
  }
}

void matmul_kernel(KernelCall& c) {
  visit_compute_dtype(c.inputs[0].dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) matmul_typed<T>(c.inputs[0], c.inputs[1], c.outputs[0]);
  });
}

// OpenBLAS 0.3.21 (Debian 12) picks its kernels by CPU model, and recent models fool it:
// on Emerald Rapids it falls back to Prescott (sgemm 1024^3 at ~10 GFLOP/s instead of
// ~140), and on AMD Zen 4/5, which have AVX-512, it picks its AVX2 Haswell/Zen kernels
// (half the FMA peak). The right kernels follow from the CPU's features, not its model:
// AVX-512 F/BW/DQ/VL -> SkylakeX, else AVX2 + FMA -> Haswell. When OpenBLAS chose a core
// weaker than that, re-run its dynamic-arch selection with the matching core type. The
// two entry points are looked up at run time, so a non-dynamic OpenBLAS build is left
// alone, and an OPENBLAS_CORETYPE set by the user always wins.
bool has_avx512_gemm_features() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

bool is_one_of(const char* name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

// The core OpenBLAS should run on this CPU, or nullptr when its own choice is as good.
const char* better_openblas_core(const char* chosen) {
  if (!chosen) return nullptr;
  if (is_one_of(chosen, {"SkylakeX", "Cooperlake", "SapphireRapids"})) return nullptr;
  if (has_avx512_gemm_features()) return "SkylakeX";
  if (is_one_of(chosen, {"Haswell", "Zen", "Excavator"})) return nullptr;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

void select_openblas_core() {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const char* wanted = better_openblas_core(openblas_get_corename());
  if (!wanted) return;
  auto quit = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto init = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (!quit || !init) return;
  setenv("OPENBLAS_CORETYPE", wanted, 0);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace

// OpenBLAS's pthreads build starts its worker threads when it loads (and again when
// select_openblas_core re-initializes it), and an idle worker spins in sched_yield for a
// while before it sleeps. kiln calls OpenBLAS single-threaded from its own pool, so those
// workers only take cycles from kiln's: in a short process (`kiln run` of an exported
// BatchNormCNN at 2 threads) the spinning worker made each call 2x slower. Stop them; a
// later multi-threaded OpenBLAS call would start them again.
void keep_openblas_single_threaded() {
  openblas_set_num_threads(1);  // kiln's pool owns the cores
  using Shutdown = int (*)();
  if (auto shutdown = reinterpret_cast<Shutdown>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_")))
    shutdown();
}

void register_linalg_kernels() {
  select_openblas_core();
  keep_openblas_single_threaded();
  ops::matmul.kernels[static_cast<size_t>(DeviceType::CPU)] = matmul_kernel;
}

}  // namespace kiln::cpu::kernels
