// A fake cuBLASLt: a stand-in for libcublasLt that the fake-driver tests load through
// KILN_CUBLASLT, so that matmul on CUDA tensors runs on machines without a GPU. It does what
// kiln asks of cuBLASLt (kiln/cuda/cublaslt.h) with a plain loop: column-major layouts with
// leading dimensions, transposes, strided batches, float32, float64, float16 and bfloat16
// (summed in double, rounded once to the output type), on the fake driver's
// device memory (fake_memory.h). With the TF32 compute type the inputs are rounded to TF32's
// 10-bit mantissa first, as the tensor cores do, so allow_tf32 changes results as on a GPU.
// Epilogues (bias per row of D, ReLU, tanh-approximated GELU) apply as D is stored.
// Calls run synchronously, like everything on the fake driver, except on a stream that captures
// a CUDA graph: there the call is recorded (through the driver's cuLaunchHostFunc) and runs
// when the graph does.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "fake_memory.h"
#include "fake_stream.h"
#include "kiln/cuda/cublaslt.h"
#include "kiln/cuda/driver.h"
#include "kiln/half.h"

using namespace kiln::cuda::cublaslt;

namespace {

constexpr Status kNotInitialized = 1;
constexpr Status kInvalidValue = 7;
constexpr Status kNotSupported = 15;

}  // namespace

// The handles behind cublaslt.h's opaque types.
struct kiln::cuda::cublaslt::cublasLtContext {};
struct kiln::cuda::cublaslt::cublasLtMatmulDescOpaque_t {
  int compute = 0;
  int32_t trans_a = kOpN, trans_b = kOpN;
  uint32_t epilogue = kEpilogueDefault;
  const void* bias = nullptr;  // device memory, one element per row of D
};
struct kiln::cuda::cublaslt::cublasLtMatrixLayoutOpaque_t {
  int type = 0;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t batch_stride = 0;
};
struct kiln::cuda::cublaslt::cublasLtMatmulPreferenceOpaque_t {};

namespace {

// Element (r, c) of op(M) for the stored column-major matrix M.
template <class T>
double element(const T* m, const cublasLtMatrixLayoutOpaque_t& layout, bool transposed, uint64_t r,
               uint64_t c, bool tf32) {
  const double v = transposed ? m[c + r * layout.ld] : m[r + c * layout.ld];
  if (!tf32) return v;
  // Round a float32 to 10 mantissa bits, to nearest even (as the tensor cores read TF32).
  float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The epilogue of `desc` on element `v` of row `row` of D.
template <class T>
double epilogue(const cublasLtMatmulDescOpaque_t& desc, double v, uint64_t row) {
  if (desc.epilogue & kEpilogueBias) v += kiln::cuda::fake::host_address<const T>(desc.bias)[row];
  if (desc.epilogue & kEpilogueRelu) v = v > 0 ? v : 0;
  if (desc.epilogue & kEpilogueGelu) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  return v;
}

template <class T>
void multiply(const cublasLtMatmulDescOpaque_t& desc, double alpha, const T* a,
              const cublasLtMatrixLayoutOpaque_t& al, const T* b, const cublasLtMatrixLayoutOpaque_t& bl,
              double beta, const T* c, const cublasLtMatrixLayoutOpaque_t& cl, T* d,
              const cublasLtMatrixLayoutOpaque_t& dl) {
  const bool ta = desc.trans_a == kOpT, tb = desc.trans_b == kOpT;
  const uint64_t m = dl.rows, n = dl.cols, k = ta ? al.rows : al.cols;
  const bool tf32 = desc.compute == kCompute32FFastTF32;
  for (int32_t batch = 0; batch < dl.batch; ++batch) {
    const T* ab = a + batch * al.batch_stride;
    const T* bb = b + batch * bl.batch_stride;
    const T* cb = c + batch * cl.batch_stride;
    T* db = d + batch * dl.batch_stride;
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) {
        double sum = 0;
        for (uint64_t p = 0; p < k; ++p) sum += element(ab, al, ta, i, p, tf32) * element(bb, bl, tb, p, j, tf32);
        const double prior = beta != 0 ? beta * cb[i + j * cl.ld] : 0;  // beta = 0 ignores C, NaN or not
        db[i + j * dl.ld] = static_cast<T>(epilogue<T>(desc, alpha * sum + prior, i));
      }
    }
  }
}

}  // namespace

#define KILN_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

KILN_FAKE_EXPORT Status cublasLtCreate(Handle* handle) {
  if (!handle) return kInvalidValue;
  *handle = new cublasLtContext;
  return kSuccess;
}

KILN_FAKE_EXPORT Status cublasLtDestroy(Handle handle) {
  if (!handle) return kNotInitialized;
  delete handle;
  return kSuccess;
}

KILN_FAKE_EXPORT size_t cublasLtGetVersion() { return 130000; }

KILN_FAKE_EXPORT const char* cublasLtGetStatusName(Status status) {
  switch (status) {
    case kSuccess:
      return "CUBLAS_STATUS_SUCCESS";
    case kNotInitialized:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case kInvalidValue:
      return "CUBLAS_STATUS_INVALID_VALUE";
    default:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
}

KILN_FAKE_EXPORT Status cublasLtMatmulDescCreate(MatmulDesc* desc, int compute_type, int) {
  if (!desc) return kInvalidValue;
  *desc = new cublasLtMatmulDescOpaque_t{compute_type};
  return kSuccess;
}

KILN_FAKE_EXPORT Status cublasLtMatmulDescDestroy(MatmulDesc desc) {
  delete desc;
  return kSuccess;
}

// Only the attributes kiln sets; anything else is refused, so a new one shows up in tests.
KILN_FAKE_EXPORT Status cublasLtMatmulDescSetAttribute(MatmulDesc desc, int attribute, const void* value,
                                                       size_t bytes) {
  if (!desc || !value) return kInvalidValue;
  if (attribute == kDescBiasPointer) {
    if (bytes != sizeof(void*)) return kInvalidValue;
    std::memcpy(&desc->bias, value, bytes);
    return kSuccess;
  }
  if (bytes != sizeof(int32_t)) return kInvalidValue;
  if (attribute == kDescTransA) std::memcpy(&desc->trans_a, value, bytes);
  else if (attribute == kDescTransB) std::memcpy(&desc->trans_b, value, bytes);
  else if (attribute == kDescEpilogue) std::memcpy(&desc->epilogue, value, bytes);
  else return kNotSupported;
  return kSuccess;
}

KILN_FAKE_EXPORT Status cublasLtMatrixLayoutCreate(MatrixLayout* layout, int type, uint64_t rows, uint64_t cols,
                                                   int64_t ld) {
  if (!layout || (type != kR32F && type != kR64F && type != kR16F && type != kR16BF))
    return kNotSupported;
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return kSuccess;
}

KILN_FAKE_EXPORT Status cublasLtMatrixLayoutDestroy(MatrixLayout layout) {
  delete layout;
  return kSuccess;
}

KILN_FAKE_EXPORT Status cublasLtMatrixLayoutSetAttribute(MatrixLayout layout, int attribute, const void* value,
                                                         size_t bytes) {
  if (!layout || !value) return kInvalidValue;
  if (attribute == kLayoutBatchCount && bytes == sizeof(int32_t)) std::memcpy(&layout->batch, value, bytes);
  else if (attribute == kLayoutStridedBatchOffset && bytes == sizeof(int64_t)) std::memcpy(&layout->batch_stride, value, bytes);
  else return kNotSupported;
  return kSuccess;
}

KILN_FAKE_EXPORT Status cublasLtMatmulPreferenceCreate(Preference* preference) {
  if (!preference) return kInvalidValue;
  *preference = new cublasLtMatmulPreferenceOpaque_t;
  return kSuccess;
}

KILN_FAKE_EXPORT Status cublasLtMatmulPreferenceDestroy(Preference preference) {
  delete preference;
  return kSuccess;
}

KILN_FAKE_EXPORT Status cublasLtMatmulPreferenceSetAttribute(Preference preference, int attribute, const void*,
                                                             size_t) {
  if (!preference) return kInvalidValue;
  return attribute == kPrefMaxWorkspaceBytes ? kSuccess : kNotSupported;
}

// One algorithm, needing no workspace.
KILN_FAKE_EXPORT Status cublasLtMatmulAlgoGetHeuristic(Handle handle, MatmulDesc desc, MatrixLayout,
                                                       MatrixLayout, MatrixLayout, MatrixLayout, Preference,
                                                       int requested, HeuristicResult* results, int* returned) {
  if (!handle || !desc || !results || !returned || requested < 1) return kInvalidValue;
  results[0] = HeuristicResult{};
  *returned = 1;
  return kSuccess;
}

KILN_FAKE_EXPORT Status cublasLtMatmul(Handle handle, MatmulDesc desc, const void* alpha, const void* a,
                                       MatrixLayout al, const void* b, MatrixLayout bl, const void* beta,
                                       const void* c, MatrixLayout cl, void* d, MatrixLayout dl,
                                       const MatmulAlgo*, void*, size_t, Stream stream) {
  if (!handle || !desc || !al || !bl || !cl || !dl || !alpha || !beta) return kInvalidValue;
  using kiln::cuda::fake::host_address;
  // Everything by value: a recorded call runs after the caller's descriptors and scalars are gone.
  const bool single = dl->type != kR64F;  // the scale type: float32 but for float64 GEMMs
  const double alpha_value = single ? *static_cast<const float*>(alpha) : *static_cast<const double*>(alpha);
  const double beta_value = single ? *static_cast<const float*>(beta) : *static_cast<const double*>(beta);
  kiln::cuda::fake::on_stream(stream, [=, desc = *desc, al = *al, bl = *bl, cl = *cl, dl = *dl] {
    using kiln::BFloat16;
    using kiln::Half;
    if (dl.type == kR16F) {
      multiply(desc, alpha_value, host_address<const Half>(a), al, host_address<const Half>(b), bl, beta_value,
               host_address<const Half>(c), cl, host_address<Half>(d), dl);
    } else if (dl.type == kR16BF) {
      multiply(desc, alpha_value, host_address<const BFloat16>(a), al, host_address<const BFloat16>(b), bl,
               beta_value, host_address<const BFloat16>(c), cl, host_address<BFloat16>(d), dl);
    } else if (dl.type == kR32F) {
      multiply(desc, alpha_value, host_address<const float>(a), al, host_address<const float>(b), bl, beta_value,
               host_address<const float>(c), cl, host_address<float>(d), dl);
    } else {
      multiply(desc, alpha_value, host_address<const double>(a), al, host_address<const double>(b), bl,
               beta_value, host_address<const double>(c), cl, host_address<double>(d), dl);
    }
  });
  return kSuccess;
}

// Every entry point has exactly the signature kiln resolves it with (cublaslt.h's Api).
#define KILN_FAKE_SAME(name) static_assert(std::is_same_v<decltype(&name), decltype(Api::name)>, #name)
KILN_FAKE_SAME(cublasLtCreate);
KILN_FAKE_SAME(cublasLtDestroy);
KILN_FAKE_SAME(cublasLtGetVersion);
KILN_FAKE_SAME(cublasLtGetStatusName);
KILN_FAKE_SAME(cublasLtMatmulDescCreate);
KILN_FAKE_SAME(cublasLtMatmulDescDestroy);
KILN_FAKE_SAME(cublasLtMatmulDescSetAttribute);
KILN_FAKE_SAME(cublasLtMatrixLayoutCreate);
KILN_FAKE_SAME(cublasLtMatrixLayoutDestroy);
KILN_FAKE_SAME(cublasLtMatrixLayoutSetAttribute);
KILN_FAKE_SAME(cublasLtMatmulPreferenceCreate);
KILN_FAKE_SAME(cublasLtMatmulPreferenceDestroy);
KILN_FAKE_SAME(cublasLtMatmulPreferenceSetAttribute);
KILN_FAKE_SAME(cublasLtMatmulAlgoGetHeuristic);
KILN_FAKE_SAME(cublasLtMatmul);
#undef KILN_FAKE_SAME
