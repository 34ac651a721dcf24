// Integer matmul on CUDA tensors (integer_gemm.h).
#include "kiln/cuda/integer_gemm.h"

#include <sstream>

#include "kernel_cache.h"
#include "kernel_source.h"
#include "kiln/error.h"

namespace kiln::cuda {

namespace {

struct MatmulGeometry {
  int64_t rank = 0, M = 0, N = 0, K = 0;
  int64_t batch_sizes[8] = {}, a_batch[8] = {}, b_batch[8] = {};
  int64_t a_row = 0, a_col = 0, b_row = 0, b_col = 0;
};

// The stride of `t` along out's batch dim d (right-aligned; 0 where it broadcasts).
int64_t batch_stride(const Tensor& t, size_t d, size_t batch_rank) {
  const size_t t_batch = static_cast<size_t>(t.dim()) - 2;
  if (d + t_batch < batch_rank) return 0;
  const size_t k = d + t_batch - batch_rank;
  return t.size(static_cast<int64_t>(k)) == 1 ? 0 : t.stride(static_cast<int64_t>(k));
}

}  // namespace

std::string integer_gemm_source(DType dtype, const std::string& name) {
  KILN_CHECK(dtype == kInt32 || dtype == kInt64, "[cuda] the integer matmul kernel takes int32 or int64, got ",
             dtype, ".");
  const std::string t = storage_type(dtype), u = dtype == kInt32 ? "unsigned int" : "unsigned long long";
  std::ostringstream s;
  s << "// kiln eager kernel: " << name << "(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << "#ifndef KILN_MATMUL_STRUCT\n#define KILN_MATMUL_STRUCT\n"
    << "struct KilnMatmul {\n"
       "  long long rank, M, N, K;\n"
       "  long long batch_sizes[8], a_batch[8], b_batch[8];\n"
       "  long long a_row, a_col, b_row, b_col;\n"
       "};\n#endif\n"
    << "KILN_KERNEL void " << name << "(const " << t << "* __restrict__ a, const " << t << "* __restrict__ b, " << t
    << "* __restrict__ out, long long count, KilnMatmul p) {\n"
    << "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
       "    const long long j = e % p.N, i = (e / p.N) % p.M;\n"
       "    long long rest = e / (p.M * p.N), at_a = i * p.a_row, at_b = j * p.b_col;\n"
       "    for (long long d = p.rank - 1; d >= 0; --d) {\n"
       "      const long long index = rest % p.batch_sizes[d];\n"
       "      rest /= p.batch_sizes[d];\n"
       "      at_a += index * p.a_batch[d];\n"
       "      at_b += index * p.b_batch[d];\n"
       "    }\n"
       "    // Unsigned, so the sum wraps as two's complement does.\n"
       "    " << u << " sum = 0;\n"
       "    for (long long k = 0; k < p.K; ++k)\n"
       "      sum += (" << u << ")a[at_a + k * p.a_col] * (" << u << ")b[at_b + k * p.b_row];\n"
       "    out[e] = (" << t << ")sum;\n"
       "  }\n}\n";
  return s.str();
}

void integer_matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  long long count = out.numel();
  if (count == 0) return;
  MatmulGeometry p;
  const size_t batch_rank = static_cast<size_t>(out.dim()) - 2;
  KILN_CHECK(batch_rank <= 8, "[matmul] the CUDA integer kernel takes up to 8 batch dims, got ", batch_rank,
             ". Fix: reshape the batch dims into fewer.");
  p.rank = static_cast<int64_t>(batch_rank);
  p.M = out.size(-2), p.N = out.size(-1), p.K = a.size(-1);
  for (size_t d = 0; d < batch_rank; ++d) {
    p.batch_sizes[d] = out.size(static_cast<int64_t>(d));
    p.a_batch[d] = batch_stride(a, d, batch_rank);
    p.b_batch[d] = batch_stride(b, d, batch_rank);
  }
  p.a_row = a.stride(-2), p.a_col = a.stride(-1), p.b_row = b.stride(-2), p.b_col = b.stride(-1);
  const GeneratedKernel& kernel = generated_kernel(
      out.device().index, "integer_matmul(" + std::string(dtype_name(out.dtype())) + ")", "integer_matmul",
      [&](const std::string& name) { return integer_gemm_source(out.dtype(), name); });
  const void *a_pointer = a.raw_data(), *b_pointer = b.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&a_pointer, &b_pointer, &out_pointer, &count, &p};
  launch_over_elements(kernel, count, params);
}

}  // namespace kiln::cuda
