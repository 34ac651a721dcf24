// matmul on CUDA tensors through cuBLASLt (kiln/cuda/gemm.h): plan the GEMM, describe it to
// cuBLASLt, let its heuristic pick the algorithm, and queue one call per plan entry on the
// thread's current stream, with a workspace from the caching allocator.
#include <array>
#include <atomic>
#include <mutex>

#include "device_context.h"
#include "kiln/cuda/integer_gemm.h"
#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/cublaslt.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/cuda/fused_kernels.h"
#include "kiln/cuda/gemm.h"
#include "kiln/cuda/stream.h"
#include "kiln/error.h"
#include "kiln/ops/linalg.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

std::atomic<bool> g_allow_tf32{false};

// cuBLASLt's own limit for its heuristics' workspace; what PyTorch gives it on Hopper.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

void check(cublaslt::Status status, const char* call) {
  KILN_CHECK(status == cublaslt::kSuccess, "[matmul] ", call, " failed with ",
             cublaslt::status_name(status),
             ". Fix: check nvidia-smi; an earlier kernel may have failed (rerun with "
             "CUDA_LAUNCH_BLOCKING=1 to find it).");
}

// The cuBLASLt handle of each GPU, made with its context current; kept until exit.
cublaslt::Handle handle_for(int device) {
  static std::mutex mutex;
  static std::array<cublaslt::Handle, 64> handles{};
  std::lock_guard<std::mutex> lock(mutex);
  KILN_CHECK(device < 64, "[matmul] kiln supports up to 64 GPUs per process, got ", device, ".");
  if (!handles[static_cast<size_t>(device)]) {
    use_device(device);
    check(cublaslt::loaded().api->cublasLtCreate(&handles[static_cast<size_t>(device)]),
          "cublasLtCreate");
  }
  return handles[static_cast<size_t>(device)];
}

// The descriptors of one GEMM, destroyed with it.
struct Descriptors {
  const cublaslt::Api& api;
  cublaslt::MatmulDesc desc = nullptr;
  cublaslt::MatrixLayout x = nullptr, y = nullptr, d = nullptr;
  cublaslt::Preference preference = nullptr;
  ~Descriptors() {
    if (preference) api.cublasLtMatmulPreferenceDestroy(preference);
    for (cublaslt::MatrixLayout layout : {x, y, d})
      if (layout) api.cublasLtMatrixLayoutDestroy(layout);
    if (desc) api.cublasLtMatmulDescDestroy(desc);
  }
};

cublaslt::MatrixLayout layout(const cublaslt::Api& api, int type, const GemmMatrix& m,
                              int64_t batch) {
  cublaslt::MatrixLayout out = nullptr;
  check(api.cublasLtMatrixLayoutCreate(&out, type, static_cast<uint64_t>(m.rows),
                                       static_cast<uint64_t>(m.cols), m.ld),
        "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    check(api.cublasLtMatrixLayoutSetAttribute(out, cublaslt::kLayoutBatchCount, &count, sizeof(count)),
          "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
    check(api.cublasLtMatrixLayoutSetAttribute(out, cublaslt::kLayoutStridedBatchOffset,
                                               &m.batch_stride, sizeof(m.batch_stride)),
          "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
  }
  return out;
}

// The epilogue attribute for `e` (kEpilogueDefault when it has none).
uint32_t epilogue_mode(const GemmEpilogue& e) {
  const bool bias = e.bias.defined();
  switch (e.activation) {
    case GemmActivation::Relu:
      return bias ? cublaslt::kEpilogueReluBias : cublaslt::kEpilogueRelu;
    case GemmActivation::GeluTanh:
      return bias ? cublaslt::kEpilogueGeluBias : cublaslt::kEpilogueGelu;
    case GemmActivation::None:
      break;
  }
  return bias ? cublaslt::kEpilogueBias : cublaslt::kEpilogueDefault;
}

// out = epilogue(a · b), queued on the current stream; `epilogue` null for a plain matmul.
void run_gemm(Tensor a, Tensor b, const Tensor& out, const GemmEpilogue* epilogue) {
  const DType dtype = out.dtype();
  if (dtype == kInt32 || dtype == kInt64) {
    integer_matmul(a, b, out);
    return;
  }
  const bool half = dtype == kFloat16 || dtype == kBFloat16;
  KILN_CHECK(dtype == kFloat32 || dtype == kFloat64 || half, "[matmul] on ", out.device(),
             " multiplies float32, float64, float16, bfloat16 (cuBLASLt), int32 and int64 "
             "tensors, found ", dtype, ". Fix: convert with .to(kiln::kFloat32), or multiply on "
             "the cpu.");
  if (out.numel() == 0) return;
  if (a.sizes().back() == 0) {  // an empty sum: zeros
    fill_on_gpu(out, 0);
    return;
  }
  GemmPlan plan = plan_gemm(a.sizes(), a.strides(), b.sizes(), b.strides(), out.sizes());
  if (plan.a_needs_copy || plan.b_needs_copy) {
    if (plan.a_needs_copy) a = contiguous_on_gpu(a);
    if (plan.b_needs_copy) b = contiguous_on_gpu(b);
    plan = plan_gemm(a.sizes(), a.strides(), b.sizes(), b.strides(), out.sizes());
  }
  const cublaslt::Loaded& library = cublaslt::loaded();
  KILN_CHECK(library.api, "[matmul] on ", out.device(), ": ", library.unavailable_reason);
  const cublaslt::Api& api = *library.api;
  const int device = out.device().index;
  const cublaslt::Handle handle = handle_for(device);

  // float16 and bfloat16 accumulate and scale in float32, as cuBLAS's default for them (and
  // PyTorch's); TF32 applies to float32 inputs only.
  const bool single = dtype != kFloat64;  // alpha and beta are float32
  const int type = dtype == kFloat32   ? cublaslt::kR32F
                   : dtype == kFloat64 ? cublaslt::kR64F
                   : dtype == kFloat16 ? cublaslt::kR16F
                                       : cublaslt::kR16BF;
  const int compute = !single                                ? cublaslt::kCompute64F
                      : dtype == kFloat32 && allow_tf32() ? cublaslt::kCompute32FFastTF32
                                                             : cublaslt::kCompute32F;
  Descriptors g{api};
  check(api.cublasLtMatmulDescCreate(&g.desc, compute, single ? cublaslt::kR32F : cublaslt::kR64F),
        "cublasLtMatmulDescCreate");
  const int32_t trans_x = plan.x.transposed ? cublaslt::kOpT : cublaslt::kOpN;
  const int32_t trans_y = plan.y.transposed ? cublaslt::kOpT : cublaslt::kOpN;
  check(api.cublasLtMatmulDescSetAttribute(g.desc, cublaslt::kDescTransA, &trans_x, sizeof(trans_x)),
        "cublasLtMatmulDescSetAttribute(TRANSA)");
  check(api.cublasLtMatmulDescSetAttribute(g.desc, cublaslt::kDescTransB, &trans_y, sizeof(trans_y)),
        "cublasLtMatmulDescSetAttribute(TRANSB)");
  if (epilogue) {
    // D is the column-major Cᵀ: its rows are out's columns, one bias element each.
    const uint32_t mode = epilogue_mode(*epilogue);
    check(api.cublasLtMatmulDescSetAttribute(g.desc, cublaslt::kDescEpilogue, &mode, sizeof(mode)),
          "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    if (epilogue->bias.defined()) {
      const void* bias = epilogue->bias.raw_data();
      check(api.cublasLtMatmulDescSetAttribute(g.desc, cublaslt::kDescBiasPointer, &bias, sizeof(bias)),
            "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    }
  }
  g.x = layout(api, type, plan.x, plan.batch);
  g.y = layout(api, type, plan.y, plan.batch);
  g.d = layout(api, type, plan.d, plan.batch);
  check(api.cublasLtMatmulPreferenceCreate(&g.preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace_limit = kWorkspaceBytes;
  check(api.cublasLtMatmulPreferenceSetAttribute(g.preference, cublaslt::kPrefMaxWorkspaceBytes,
                                                 &workspace_limit, sizeof(workspace_limit)),
        "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  cublaslt::HeuristicResult choice{};
  int found = 0;
  check(api.cublasLtMatmulAlgoGetHeuristic(handle, g.desc, g.x, g.y, g.d, g.d, g.preference, 1,
                                           &choice, &found),
        "cublasLtMatmulAlgoGetHeuristic");
  KILN_CHECK(found > 0, "[matmul] cuBLASLt has no algorithm for ", dtype_name(dtype), " ",
             shape_str(a.sizes()), " x ", shape_str(b.sizes()), " on ", out.device(),
             ". Fix: make the operands contiguous (x.contiguous()).");

  const Stream stream = current_stream(device);
  CachingAllocator& allocator = device_allocator(device);
  void* workspace = choice.workspace_size ? allocator.allocate(choice.workspace_size, stream.id()) : nullptr;
  const float alpha32 = 1, beta32 = 0;
  const double alpha64 = 1, beta64 = 0;
  const size_t itemsize = out.element_size();
  const char* x_base = static_cast<const char*>(b.raw_data());
  const char* y_base = static_cast<const char*>(a.raw_data());
  char* d_base = static_cast<char*>(out.raw_data());
  for (const auto& call : plan.calls) {
    detail::count_library_call();
    char* d = d_base + call[2] * static_cast<int64_t>(itemsize);
    check(api.cublasLtMatmul(handle, g.desc, single ? static_cast<const void*>(&alpha32) : &alpha64,
                             x_base + call[0] * static_cast<int64_t>(itemsize), g.x,
                             y_base + call[1] * static_cast<int64_t>(itemsize), g.y,
                             single ? static_cast<const void*>(&beta32) : &beta64, d, g.d, d, g.d,
                             &choice.algo, workspace, choice.workspace_size,
                             static_cast<cublaslt::Stream>(stream.handle())),
          "cublasLtMatmul");
  }
  // Freed on the stream that uses it: the next block from this stream's pool runs after it.
  if (workspace) allocator.deallocate(workspace);
}

void matmul_kernel(KernelCall& c) { run_gemm(c.inputs[0], c.inputs[1], c.outputs[0], nullptr); }

}  // namespace

void matmul_with_epilogue(const Tensor& a, const Tensor& b, const GemmEpilogue& epilogue,
                          const Tensor& out) {
  const DType dtype = out.dtype();
  KILN_CHECK(a.dim() == 2 && b.dim() == 2 && out.dim() == 2 && a.size(1) == b.size(0) &&
                 out.size(0) == a.size(0) && out.size(1) == b.size(1) && out.is_contiguous(),
             "[matmul_with_epilogue] expected a [M, K] · b [K, N] into a contiguous [M, N], got ",
             shape_str(a.sizes()), " · ", shape_str(b.sizes()), " into ", shape_str(out.sizes()),
             ". Fix: flatten batch dims into M first.");
  KILN_CHECK((dtype == kFloat32 || dtype == kFloat64) && a.dtype() == dtype && b.dtype() == dtype,
             "[matmul_with_epilogue] expected float32 or float64 operands of one dtype, got ",
             a.dtype(), " · ", b.dtype(), " into ", dtype, ".");
  const Tensor& bias = epilogue.bias;
  KILN_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == out.size(1) &&
                                 bias.dtype() == dtype && bias.device() == out.device() &&
                                 bias.is_contiguous()),
             "[matmul_with_epilogue] expected a contiguous ", dtype_name(dtype), "[",
             out.size(1), "] bias on ", out.device(), ", got ",
             bias.defined() ? bias.type_str() : std::string("none"), ".");
  if (out.numel() == 0) return;
  KILN_CHECK(a.size(1) > 0, "[matmul_with_epilogue] expected K > 0, got an empty sum. Fix: "
             "compute the epilogue of zeros without a GEMM.");
  run_gemm(a, b, out, &epilogue);
}

void set_allow_tf32(bool allow) {
  g_allow_tf32.store(allow, std::memory_order_relaxed);
}

bool allow_tf32() {
  return g_allow_tf32.load(std::memory_order_relaxed);
}

void register_gemm_kernels() {
  ops::matmul.kernels[static_cast<size_t>(DeviceType::CUDA)] = matmul_kernel;
}

}  // namespace kiln::cuda
