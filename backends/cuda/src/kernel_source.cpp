// The shared pieces of the generated kernels' source (kernel_source.h).
#include "kernel_source.h"

#include <sstream>
#include <string>

#include "cuda_c_builder.h"

namespace kiln::cuda {

const char* storage_type(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return "unsigned char";
    case DType::Float16:
    case DType::BFloat16:
      return "unsigned short";
    default:
      return CudaCBuilder::compute_type(dtype);
  }
}

std::string load(DType dtype, const std::string& element) {
  switch (dtype) {
    case DType::Bool:
      return "(" + element + " != 0)";
    case DType::Float16:
      return "kiln_load_f16(" + element + ")";
    case DType::BFloat16:
      return "kiln_load_bf16(" + element + ")";
    default:
      return element;
  }
}

std::string store(DType dtype, const std::string& value) {
  switch (dtype) {
    case DType::Bool:
      return "(unsigned char)(" + value + ")";
    case DType::Float16:
      return "kiln_store_f16(" + value + ")";
    case DType::BFloat16:
      return "kiln_store_bf16(" + value + ")";
    default:
      return value;
  }
}

std::string offset_code(const std::string& flat, const std::string& offset, const char* sizes,
                        const char* strides, int rank, const std::string& indent) {
  std::ostringstream s;
  if (rank == 0) return "";
  s << indent << "{\n" << indent << "  long long rest = " << flat << ";\n";
  for (int d = rank; d-- > 0;) {
    const std::string index =
        d == 0 ? "rest" : "rest % dims." + std::string(sizes) + "[" + std::to_string(d) + "]";
    s << indent << "  " << offset << " += (" << index << ") * dims." << strides << "[" << d
      << "];\n";
    if (d > 0) s << indent << "  rest /= dims." << sizes << "[" << d << "];\n";
  }
  s << indent << "}\n";
  return s.str();
}

std::string block_reduce_source(const std::string& function, const std::string& type,
                                const std::string& combine, const std::string& identity,
                                bool to_all_threads) {
  std::string s = "KILN_DEVICE " + type + " " + function + "(" + type + " v) {\n" +
                  "#if KILN_COOPERATIVE_BLOCKS\n"
                  "  __shared__ " + type + " partial[32];\n"
                  "  for (int offset = 16; offset > 0; offset >>= 1)\n"
                  "    v = " + combine + "(v, kiln_shfl_down(v, offset));\n"
                  "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
                  "  __syncthreads();  // partial may still be read for the previous row\n"
                  "  if (lane == 0) partial[warp] = v;\n"
                  "  __syncthreads();\n"
                  "  v = threadIdx.x < (blockDim.x + 31) / 32 ? partial[threadIdx.x] : " + identity + ";\n"
                  "  if (warp == 0)\n"
                  "    for (int offset = 16; offset > 0; offset >>= 1)\n"
                  "      v = " + combine + "(v, kiln_shfl_down(v, offset));\n";
  if (to_all_threads)
    s += "  __syncthreads();\n"
         "  if (threadIdx.x == 0) partial[0] = v;\n"
         "  __syncthreads();\n"
         "  v = partial[0];\n";
  return s + "#endif\n  return v;\n}\n";
}

// The float16/bfloat16 conversions are PTX's cvt, so no CUDA header is needed.
const char* const kKernelPrelude = R"(#ifndef KILN_KERNEL_PRELUDE
#define KILN_KERNEL_PRELUDE
#define KILN_DEVICE static __device__ __forceinline__
#define KILN_KERNEL extern "C" __global__
#define KILN_FOR_EACH_ELEMENT(i, n) \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (long long)blockDim.x * gridDim.x)
KILN_DEVICE float kiln_load_f16(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
KILN_DEVICE unsigned short kiln_store_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
KILN_DEVICE float kiln_load_bf16(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
KILN_DEVICE unsigned short kiln_store_bf16(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
struct KilnDims {
  long long sizes[8];
  long long strides[5][8];  // the inputs', then the output's
};
// Reductions: a grid-stride loop over blocks, each block's threads cooperating.
#define KILN_BLOCK_INDEX blockIdx.x
#define KILN_BLOCK_COUNT gridDim.x
#define KILN_THREAD_INDEX threadIdx.x
#define KILN_THREAD_COUNT blockDim.x
#define KILN_COOPERATIVE_BLOCKS 1
template <class T>
KILN_DEVICE T kiln_shfl_down(T v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}
KILN_DEVICE bool kiln_shfl_down(bool v, int offset) {
  return __shfl_down_sync(0xffffffffu, (int)v, offset) != 0;
}
struct KilnReduceDims {
  long long kept_sizes[8], kept_strides[8];
  long long reduced_sizes[8], reduced_strides[8];
};
// Scatters (index_add, embedding's gradient, pad's): adds from many threads into one element.
KILN_DEVICE void kiln_atomic_add(float* p, float v) { atomicAdd(p, v); }
KILN_DEVICE void kiln_atomic_add(double* p, double v) { atomicAdd(p, v); }
KILN_DEVICE void kiln_atomic_add(int* p, int v) { atomicAdd(p, v); }
KILN_DEVICE void kiln_atomic_add(long long* p, long long v) {
  atomicAdd((unsigned long long*)p, (unsigned long long)v);  // two's complement wraps alike
}
KILN_DEVICE void kiln_atomic_add(unsigned char* p, unsigned char v) {
  if (v) *p = 1;  // bool: an or; every writer stores the same 1
}
KILN_DEVICE void kiln_atomic_min(long long* p, long long v) { atomicMin(p, v); }
#endif
)";

}  // namespace kiln::cuda
