// cuBLASLt, NVIDIA's GEMM library, loaded at run time like the driver and NVRTC: kiln never
// links it, so the CUDA toolkit is needed neither to build kiln nor to run it on a CPU. kiln
// looks for KILN_CUBLASLT (a path) when set, else libcublasLt.so.13, .so.12 and .so through
// the dynamic loader, else lib64/libcublasLt.so under $CUDA_HOME, $CUDA_PATH and
// /usr/local/cuda. The types and values below are cuBLASLt's own (cublasLt.h, stable within a
// major version); declaring them keeps the toolkit out of the build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::cuda::cublaslt {

using Status = int;  // cublasStatus_t
using Handle = struct cublasLtContext*;
using MatmulDesc = struct cublasLtMatmulDescOpaque_t*;
using MatrixLayout = struct cublasLtMatrixLayoutOpaque_t*;
using Preference = struct cublasLtMatmulPreferenceOpaque_t*;
using Stream = struct CUstream_st*;

constexpr Status kSuccess = 0;

// cudaDataType_t
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;
// cublasComputeType_t
constexpr int kCompute32F = 68, kCompute32FFastTF32 = 77, kCompute64F = 70;
// cublasOperation_t
constexpr int32_t kOpN = 0, kOpT = 1;
// cublasLtMatmulDescAttributes_t
constexpr int kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7, kDescBiasPointer = 8;
// cublasLtEpilogue_t (uint32_t): what the GEMM applies to D as it stores it. The bias has one
// element per row of D; GELU is the tanh approximation.
constexpr uint32_t kEpilogueDefault = 1, kEpilogueRelu = 2, kEpilogueBias = 4,
                   kEpilogueReluBias = 6, kEpilogueGelu = 32, kEpilogueGeluBias = 36;
// cublasLtMatrixLayoutAttribute_t
constexpr int kLayoutBatchCount = 5, kLayoutStridedBatchOffset = 6;
// cublasLtMatmulPreferenceAttributes_t
constexpr int kPrefMaxWorkspaceBytes = 1;

struct MatmulAlgo {
  uint64_t data[8];
};
struct HeuristicResult {
  MatmulAlgo algo;
  size_t workspace_size;
  Status state;
  float waves_count;
  int reserved[4];
};

// The entry points kiln calls, resolved by name.
struct Api {
  Status (*cublasLtCreate)(Handle* handle);
  Status (*cublasLtDestroy)(Handle handle);
  size_t (*cublasLtGetVersion)();
  const char* (*cublasLtGetStatusName)(Status status);
  Status (*cublasLtMatmulDescCreate)(MatmulDesc* desc, int compute_type, int scale_type);
  Status (*cublasLtMatmulDescDestroy)(MatmulDesc desc);
  Status (*cublasLtMatmulDescSetAttribute)(MatmulDesc desc, int attribute, const void* value,
                                           size_t bytes);
  Status (*cublasLtMatrixLayoutCreate)(MatrixLayout* layout, int type, uint64_t rows,
                                       uint64_t cols, int64_t ld);
  Status (*cublasLtMatrixLayoutDestroy)(MatrixLayout layout);
  Status (*cublasLtMatrixLayoutSetAttribute)(MatrixLayout layout, int attribute,
                                             const void* value, size_t bytes);
  Status (*cublasLtMatmulPreferenceCreate)(Preference* preference);
  Status (*cublasLtMatmulPreferenceDestroy)(Preference preference);
  Status (*cublasLtMatmulPreferenceSetAttribute)(Preference preference, int attribute,
                                                 const void* value, size_t bytes);
  Status (*cublasLtMatmulAlgoGetHeuristic)(Handle handle, MatmulDesc desc, MatrixLayout a,
                                           MatrixLayout b, MatrixLayout c, MatrixLayout d,
                                           Preference preference, int requested,
                                           HeuristicResult* results, int* returned);
  Status (*cublasLtMatmul)(Handle handle, MatmulDesc desc, const void* alpha, const void* a,
                           MatrixLayout a_layout, const void* b, MatrixLayout b_layout,
                           const void* beta, const void* c, MatrixLayout c_layout, void* d,
                           MatrixLayout d_layout, const MatmulAlgo* algo, void* workspace,
                           size_t workspace_bytes, Stream stream);
};

// The outcome of loading cuBLASLt: the API, or why not in words a user can act on.
struct Loaded {
  std::unique_ptr<Api> api;  // null when unavailable
  std::string library;
  size_t version = 0;  // cublasLtGetVersion: 130001 for 13.0.1
  std::string unavailable_reason;
};

// Opens `explicit_path` alone when not empty, else searches as above. Never throws; each call
// loads afresh (tests check the reasons with it).
Loaded load(const std::string& explicit_path);
// The process's cuBLASLt: load(KILN_CUBLASLT or ""), once, on first use.
const Loaded& loaded();

bool available();
std::string unavailable_reason();

// "CUBLAS_STATUS_NOT_SUPPORTED", or "cublasStatus_t 15" when the library cannot name it.
std::string status_name(Status status);

}  // namespace kiln::cuda::cublaslt
