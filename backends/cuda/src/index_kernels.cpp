// cat, slice_scatter, pad, the index ops and embedding on CUDA tensors
// (kiln/cuda/index_kernels.h).
#include "kiln/cuda/index_kernels.h"

#include <climits>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>

#include "cuda_c_builder.h"
#include "failure_flag.h"
#include "index_check.h"
#include "kernel_cache.h"
#include "kernel_source.h"
#include "tensor_views.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/error.h"
#include "kiln/ops/embedding.h"
#include "kiln/ops/layout.h"
#include "kiln/ops/one_hot.h"
#include "kiln/ops/pad.h"
#include "kiln/ops/view.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

PadDims pad_dims(IntList in, IntList out, IntList in_strides, const ops::PadAttrs& a) {
  PadDims p;
  p.rank = static_cast<int64_t>(out.size());
  KILN_CHECK(p.rank <= 8, "[pad] the CUDA kernel takes tensors of up to 8 dims, got ", p.rank,
             ". Fix: reshape to fewer dims first.");
  for (int64_t d = 0; d < p.rank; ++d) {
    const int64_t k = p.rank - 1 - d;  // the pad pair of dim d
    p.left[d] = 2 * k < static_cast<int64_t>(a.pad.size()) ? a.pad[2 * k] : 0;
    p.out_sizes[d] = out[d];
    p.in_sizes[d] = in[d];
    p.in_strides[d] = in_strides[d];
  }
  p.mode = a.mode == "reflect" ? 1 : a.mode == "replicate" ? 2 : a.mode == "circular" ? 3 : 0;
  return p;
}

IndexDims index_dims(const Tensor& index, const Tensor& data, const Tensor& other, int64_t dim) {
  IndexDims g;
  g.rank = index.dim();
  KILN_CHECK(g.rank <= 8, "[gather] the CUDA kernel takes tensors of up to 8 dims, got ", g.rank,
             ". Fix: reshape to fewer dims first.");
  g.dim = dim;
  const Shape index_strides = contiguous_strides(index.sizes());
  for (int64_t d = 0; d < g.rank; ++d) {
    g.sizes[d] = index.size(d);
    g.index_strides[d] = index_strides[d];
    g.data_strides[d] = data.stride(d);
    g.other_strides[d] = other.stride(d);
  }
  return g;
}

namespace {

// The parameter structs, once per source (tests put many kernels in one).
constexpr const char* kIndexStructs = R"(#ifndef KILN_INDEX_STRUCTS
#define KILN_INDEX_STRUCTS
struct KilnIndexDims {
  long long rank, dim;
  long long sizes[8], index_strides[8], data_strides[8], other_strides[8];
};
struct KilnPadDims {
  long long rank;
  long long out_sizes[8], in_sizes[8], left[8], in_strides[8];
  long long mode;
};
// ops::pad_source_index: the input index output position o of a padded dim reads, or -1 for
// constant mode's fill.
KILN_DEVICE long long kiln_pad_source(long long o, long long n, long long left, long long mode) {
  const long long i = o - left;
  if (i >= 0 && i < n) return i;
  if (mode == 1) {
    if (n == 1) return 0;
    const long long period = 2 * (n - 1);
    const long long m = ((i % period) + period) % period;
    return m < n ? m : period - m;
  }
  if (mode == 2) return i < 0 ? 0 : n - 1;
  if (mode == 3) return ((i % n) + n) % n;
  return -1;
}
// scatter_reduce's combination (0 sum, 1 prod, 2 max, 3 min; max and min propagate NaN), and
// its atomic form: a compare-and-swap loop on the GPU, a plain update on the host.
template <class T>
KILN_DEVICE T kiln_combine(T a, T b, int op) {
  if (op == 0) return a + b;
  if (op == 1) return a * b;
  if (a != a) return a;
  if (b != b) return b;
  return op == 2 ? (a > b ? a : b) : (a < b ? a : b);
}
#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)
KILN_DEVICE void kiln_atomic_combine(float* p, float v, int op) {
  unsigned int* word = (unsigned int*)p;
  unsigned int old = *word, seen;
  do {
    seen = old;
    old = atomicCAS(word, seen, __float_as_uint(kiln_combine(__uint_as_float(seen), v, op)));
  } while (old != seen);
}
KILN_DEVICE void kiln_atomic_combine(double* p, double v, int op) {
  unsigned long long* word = (unsigned long long*)p;
  unsigned long long old = *word, seen;
  do {
    seen = old;
    old = atomicCAS(word, seen,
                    (unsigned long long)__double_as_longlong(kiln_combine(__longlong_as_double((long long)seen), v, op)));
  } while (old != seen);
}
KILN_DEVICE void kiln_atomic_combine(int* p, int v, int op) {
  int old = *p, seen;
  do {
    seen = old;
    old = atomicCAS(p, seen, kiln_combine(seen, v, op));
  } while (old != seen);
}
KILN_DEVICE void kiln_atomic_combine(long long* p, long long v, int op) {
  unsigned long long* word = (unsigned long long*)p;
  unsigned long long old = *word, seen;
  do {
    seen = old;
    old = atomicCAS(word, seen, (unsigned long long)kiln_combine((long long)seen, v, op));
  } while (old != seen);
}
KILN_DEVICE void kiln_atomic_max(long long* p, long long v) { atomicMax(p, v); }
#else
template <class T>
static inline void kiln_atomic_combine(T* p, T v, int op) { *p = kiln_combine(*p, v, op); }
static inline void kiln_atomic_max(long long* p, long long v) { if (v > *p) *p = v; }
#endif
KILN_DEVICE float kiln_divide_mean(float v, long long n) { return v / (float)n; }
KILN_DEVICE double kiln_divide_mean(double v, long long n) { return v / (double)n; }
KILN_DEVICE long long kiln_divide_mean(long long v, long long n) {
  const long long q = v / n;
  return (v % n != 0 && v < 0) ? q - 1 : q;
}
KILN_DEVICE int kiln_divide_mean(int v, long long n) { return (int)kiln_divide_mean((long long)v, n); }
// The offset in the input that flat output element e reads (-1: the fill).
KILN_DEVICE long long kiln_pad_offset(long long e, const KilnPadDims& p) {
  long long offset = 0;
  for (long long d = p.rank - 1; d >= 0; --d) {
    const long long o = e % p.out_sizes[d];
    e /= p.out_sizes[d];
    const long long s = kiln_pad_source(o, p.in_sizes[d], p.left[d], p.mode);
    if (s < 0) return -1;
    offset += s * p.in_strides[d];
  }
  return offset;
}
#endif
)";

bool is_scatter(IndexKernel kind) {
  return kind == IndexKernel::AddRows || kind == IndexKernel::ScatterAdd || kind == IndexKernel::PadBackward ||
         kind == IndexKernel::ScatterCombine;
}

// The index's coordinates give its offset (at_index), the data's with the index's value along
// dim (at_data) and the other operand's (at_other).
constexpr const char* kIndexCoordinates =
    "    long long rest = e, at_index = 0, at_data = 0, at_other = 0;\n"
    "    for (long long d = g.rank - 1; d >= 0; --d) {\n"
    "      const long long c = rest % g.sizes[d];\n"
    "      rest /= g.sizes[d];\n"
    "      at_index += c * g.index_strides[d];\n"
    "      at_other += c * g.other_strides[d];\n"
    "      if (d != g.dim) at_data += c * g.data_strides[d];\n"
    "    }\n"
    "    at_data += index[at_index] * g.data_strides[g.dim];\n";

// The body of the grid-stride loop over `count` elements e.
std::string loop_body(IndexKernel kind) {
  switch (kind) {
    case IndexKernel::Check:
      return "    const long long v = index[e];\n"
             "    if ((v < 0 || v >= size) && !(has_allowed && v == allowed)) kiln_atomic_min(first_bad, e);\n";
    case IndexKernel::Rows:
      return "    const long long j = e % inner, r = e / inner, k = r % m, o = r / m;\n"
             "    out[e] = x[(o * n + index[k]) * inner + j];\n";
    case IndexKernel::AddRows:
      return "    const long long j = e % inner, r = e / inner, k = r % m, o = r / m;\n"
             "    if (index[k] == skip) continue;\n"
             "    kiln_atomic_add(&out[(o * n + index[k]) * inner + j], src[e]);\n";
    case IndexKernel::Gather:
      return std::string(kIndexCoordinates) + "    out[e] = x[at_data];\n";
    case IndexKernel::ScatterAdd:
      return std::string(kIndexCoordinates) + "    kiln_atomic_add(&out[at_data], src[at_other]);\n";
    case IndexKernel::ScatterCount:
      return std::string(kIndexCoordinates) + "    kiln_atomic_add(&counts[at_data], 1LL);\n";
    case IndexKernel::ScatterReset:
      return std::string(kIndexCoordinates) + "    out[at_data] = identity;\n";
    case IndexKernel::ScatterCombine:
      return std::string(kIndexCoordinates) +
             "    if (op == 0) kiln_atomic_add(&out[at_data], src[at_other]);\n"
             "    else kiln_atomic_combine(&out[at_data], src[at_other], op);\n";
    case IndexKernel::ScatterWinner:
      return std::string(kIndexCoordinates) + "    kiln_atomic_max(&winner[at_data], e);\n";
    case IndexKernel::ScatterTake:
      return std::string(kIndexCoordinates) + "    if (winner[at_data] == e) out[at_data] = src[at_other];\n";
    case IndexKernel::ScatterMean:
      // A floating mean divides; an integer one floors, as PyTorch's.
      return "    if (counts[e] == 0) continue;\n"
             "    const long long n = counts[e] + include_self;\n"
             "    out[e] = kiln_divide_mean(out[e], n);\n";
    case IndexKernel::OneHot:
      return "    out[e] = index[e / classes] == e % classes ? 1 : 0;\n";
    case IndexKernel::Pad:
      return "    const long long at = kiln_pad_offset(e, p);\n"
             "    out[e] = at < 0 ? fill : x[at];\n";
    case IndexKernel::PadBackward:
      return "    kiln_atomic_add(&grad_x[kiln_pad_offset(e, p)], grad[e]);\n";
  }
  return "";
}

std::string parameters(IndexKernel kind, const std::string& t) {
  const std::string in = "const " + t + "* __restrict__ ";
  const std::string index = "const long long* __restrict__ index, ";
  switch (kind) {
    case IndexKernel::Check:
      return "const long long* __restrict__ index, long long count, long long size, long long allowed, "
             "int has_allowed, long long* first_bad";
    case IndexKernel::Rows:
      return in + "x, " + index + t + "* __restrict__ out, long long count, long long m, long long n, "
             "long long inner";
    case IndexKernel::AddRows:
      return in + "src, " + index + t + "* out, long long count, long long m, long long n, "
             "long long inner, long long skip";
    case IndexKernel::Gather:
      return in + "x, " + index + t + "* __restrict__ out, long long count, KilnIndexDims g";
    case IndexKernel::ScatterAdd:
      return in + "src, " + index + t + "* out, long long count, KilnIndexDims g";
    case IndexKernel::ScatterCount:
      return index + "long long* counts, long long count, KilnIndexDims g";
    case IndexKernel::ScatterReset:
      return index + t + "* out, long long count, KilnIndexDims g, " + t + " identity";
    case IndexKernel::ScatterCombine:
      return in + "src, " + index + t + "* out, long long count, KilnIndexDims g, int op";
    case IndexKernel::ScatterWinner:
      return index + "long long* winner, long long count, KilnIndexDims g";
    case IndexKernel::ScatterTake:
      return in + "src, " + index + "const long long* __restrict__ winner, " + t +
             "* __restrict__ out, long long count, KilnIndexDims g";
    case IndexKernel::ScatterMean:
      return "const long long* __restrict__ counts, " + t + "* out, long long count, long long include_self";
    case IndexKernel::OneHot:
      return index + "long long* __restrict__ out, long long count, long long classes";
    case IndexKernel::Pad:
      return in + "x, " + t + "* __restrict__ out, long long count, KilnPadDims p, " + t + " fill";
    case IndexKernel::PadBackward:
      return in + "grad, " + t + "* grad_x, long long count, KilnPadDims p";
  }
  return "";
}

// ---- host side ----

const GeneratedKernel& kernel_for(IndexKernel kind, const char* what, DType dtype, int device) {
  return kernel_of_kind(device, what, kind, dtype, index_kernel_source);
}

Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : contiguous_on_gpu(t); }


int64_t dim_of(const KernelCall& c, int64_t rank) {
  return wrap_dim(static_cast<const ops::DimAttrs&>(c.attrs).dim, rank, c.op.name.c_str());
}

// The CPU kernels' message for an index out of range along a dim.
void check_along_dim(const Tensor& index, const char* op, int64_t dim, int64_t size) {
  check_indices(index, size, std::nullopt, [op, dim, size](const BadIndex& bad) {
    KILN_FAIL("[", op, "] index ", bad.value, " is out of range for dim ", dim, " of size ", size,
              " (expected 0 <= index < ", size, "). Fix: check the index tensor (negative indices are not wrapped by ",
              op, ").");
  });
}

// The CPU kernels' message for a class or row index out of [0, n).
void check_entries(const Tensor& index, int64_t n, const char* op, const char* fix) {
  check_indices(index, n, std::nullopt, [n, op, fix](const BadIndex& bad) {
    KILN_FAIL("[", op, "] index ", bad.value, " (element ", bad.element, " of the indices) is out of range for ",
              n, " entries: expected 0 <= index < ", n, ". Fix: ", fix);
  });
}

// out[o, k, j] = x[o, index[k], j] for x [outer, n, inner] (contiguous) and index [m].
void gather_rows(const Tensor& x, const Tensor& index, const Tensor& out, long long n, long long inner) {
  long long count = out.numel(), m = index.numel();
  if (count == 0) return;
  const void* x_pointer = x.raw_data();
  const void* index_pointer = index.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&x_pointer, &index_pointer, &out_pointer, &count, &m, &n, &inner};
  launch_over_elements(kernel_for(IndexKernel::Rows, "index_rows", x.dtype(), out.device().index), count, params);
}

// out[o, index[k], j] += src[o, k, j] for src [outer, m, inner] (contiguous), out [outer, n, inner].
void scatter_rows(const Tensor& src, const Tensor& index, const Tensor& out, long long n, long long inner,
                  long long skip) {
  long long count = src.numel(), m = index.numel();
  if (count == 0) return;
  const void* src_pointer = src.raw_data();
  const void* index_pointer = index.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&src_pointer, &index_pointer, &out_pointer, &count, &m, &n, &inner, &skip};
  launch_over_elements(kernel_for(IndexKernel::AddRows, "index_add_rows", out.dtype(), out.device().index), count,
                       params);
}

// x seen as [outer, n, inner] around dim.
struct Around {
  long long outer = 1, n = 1, inner = 1;
  Around(IntList sizes, int64_t dim) {
    if (sizes.empty()) return;
    for (int64_t k = 0; k < dim; ++k) outer *= sizes[k];
    n = sizes[dim];
    for (size_t k = dim + 1; k < sizes.size(); ++k) inner *= sizes[k];
  }
};

void cat_kernel(KernelCall& c) {
  const Tensor& out = c.outputs[0];
  if (out.numel() == 0) return;
  const int64_t d = dim_of(c, out.dim());
  int64_t start = 0;
  for (const Tensor& t : c.inputs) {
    if (t.dim() == 1 && t.size(0) == 0 && out.dim() != 1) continue;  // legacy empty parts
    const Tensor part = out.alias(t.sizes(), out.strides(), out.storage_offset() + start * out.stride(d));
    start += t.size(d);
    if (t.numel() > 0) copy_on_gpu(t, part);
  }
}

void slice_scatter_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::SliceAttrs&>(c.attrs);
  const Tensor& out = c.outputs[0];
  const int64_t d = wrap_dim(a.dim, out.dim(), "slice_scatter");
  ops::check_slice_fits(a, out.sizes()[d], "slice_scatter");
  copy_on_gpu(c.inputs[0], out);
  Shape strides(out.strides());
  strides[d] *= a.step;
  if (c.inputs[1].numel() > 0) copy_on_gpu(c.inputs[1], out.alias(c.inputs[1].sizes(), strides, a.start * out.strides()[d]));
}

void pad_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::PadAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  const Tensor& out = c.outputs[0];
  long long count = out.numel();
  if (count == 0) return;
  PadDims p = pad_dims(x.sizes(), out.sizes(), x.strides(), a);
  // The fill, converted on the host as the CPU kernel converts it, passed in its storage bytes.
  uint64_t fill = 0;
  const Tensor fill_value = Tensor::scalar(a.value, x.dtype());
  std::memcpy(&fill, fill_value.raw_data(), x.element_size());
  const void* x_pointer = x.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&x_pointer, &out_pointer, &count, &p, &fill};
  launch_over_elements(kernel_for(IndexKernel::Pad, "pad", x.dtype(), out.device().index), count, params);
}

void pad_backward_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::PadAttrs&>(c.attrs);
  const Tensor grad = dense(c.inputs[0]);
  const Tensor& grad_x = c.outputs[0];
  fill_on_gpu(grad_x, 0);
  long long count = grad.numel();
  if (count == 0 || grad_x.numel() == 0) return;
  PadDims p = pad_dims(grad_x.sizes(), grad.sizes(), contiguous_strides(grad_x.sizes()), a);
  const void* grad_pointer = grad.raw_data();
  void* out_pointer = grad_x.raw_data();
  void* params[] = {&grad_pointer, &out_pointer, &count, &p};
  launch_over_elements(kernel_for(IndexKernel::PadBackward, "pad_backward", grad.dtype(), grad_x.device().index),
                       count, params);
}

void index_select_kernel(KernelCall& c) {
  const int64_t d = dim_of(c, c.inputs[0].dim());
  const Tensor x = dense(c.inputs[0]), index = dense(c.inputs[1]);
  const Around a(x.sizes(), d);
  check_along_dim(index, "index_select", d, a.n);
  gather_rows(x, index, c.outputs[0], a.n, a.inner);
}

void index_add_kernel(KernelCall& c) {
  const Tensor& out = c.outputs[0];
  const int64_t d = dim_of(c, c.inputs[0].dim());
  const Around a(out.sizes(), d);
  const Tensor index = dense(c.inputs[1]);
  check_along_dim(index, "index_add", d, a.n);
  copy_on_gpu(c.inputs[0], out);
  scatter_rows(dense(c.inputs[2]), index, out, a.n, a.inner, LLONG_MIN);
}

constexpr const char* kEmbeddingFix = "indices must lie in [0, num_embeddings); grow the table or fix the data.";

void embedding_kernel(KernelCall& c) {
  const Tensor weight = dense(c.inputs[0]), indices = dense(c.inputs[1]);
  const int64_t rows = weight.size(0);
  check_indices(indices, rows, std::nullopt,
                [rows, indices_type = c.inputs[1].type_str(), weight_type = c.inputs[0].type_str()](const BadIndex& bad) {
                  KILN_FAIL("[embedding] index ", bad.value, " (element ", bad.element, " of indices ",
                            indices_type, ") is out of range for an embedding table of ", rows, " rows (weight ",
                            weight_type, "). Fix: ", kEmbeddingFix);
                });
  gather_rows(weight, indices, c.outputs[0], rows, weight.size(1));
}

void embedding_backward_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::EmbeddingBackwardAttrs&>(c.attrs);
  const Tensor grad = dense(c.inputs[0]), indices = dense(c.inputs[1]);
  const Tensor& out = c.outputs[0];
  check_entries(indices, a.num_weights, "embedding_backward", kEmbeddingFix);
  fill_on_gpu(out, 0);
  scatter_rows(grad, indices, out, a.num_weights, out.size(1), a.padding_idx.value_or(LLONG_MIN));
}

void gather_kernel(KernelCall& c) {
  const Tensor &x = c.inputs[0], &out = c.outputs[0];
  const Tensor index = dense(c.inputs[1]);
  const int64_t d = dim_of(c, x.dim());
  check_along_dim(index, "gather", d, x.dim() > 0 ? x.size(d) : 1);
  long long count = out.numel();
  if (count == 0) return;
  IndexDims g = index_dims(index, x, out, d);
  const void* x_pointer = x.raw_data();
  const void* index_pointer = index.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&x_pointer, &index_pointer, &out_pointer, &count, &g};
  launch_over_elements(kernel_for(IndexKernel::Gather, "gather", x.dtype(), out.device().index), count, params);
}

void scatter_add_kernel(KernelCall& c) {
  const Tensor &x = c.inputs[0], &src = c.inputs[2], &out = c.outputs[0];
  const Tensor index = dense(c.inputs[1]);
  const int64_t d = dim_of(c, x.dim());
  check_along_dim(index, "scatter_add", d, x.dim() > 0 ? x.size(d) : 1);
  copy_on_gpu(x, out);
  long long count = index.numel();
  if (count == 0) return;
  IndexDims g = index_dims(index, out, src, d);
  const void* src_pointer = src.raw_data();
  const void* index_pointer = index.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&src_pointer, &index_pointer, &out_pointer, &count, &g};
  launch_over_elements(kernel_for(IndexKernel::ScatterAdd, "scatter_add", out.dtype(), out.device().index), count,
                       params);
}

// The bytes of scatter_reduce's identity for `reduce` in `dtype` (what a position reached by
// a value starts from when include_self is false).
uint64_t scatter_identity(const std::string& reduce, DType dtype) {
  uint64_t bytes = 0;
  auto put = [&](auto v) { std::memcpy(&bytes, &v, sizeof(v)); };
  const bool max = reduce == "amax", min = reduce == "amin";
  const double one = reduce == "prod" ? 1 : 0;
  switch (dtype) {
    case DType::Float32:
      put(max ? -std::numeric_limits<float>::infinity()
              : min ? std::numeric_limits<float>::infinity() : static_cast<float>(one));
      break;
    case DType::Float64:
      put(max ? -std::numeric_limits<double>::infinity() : min ? std::numeric_limits<double>::infinity() : one);
      break;
    case DType::Int32:
      put(max ? std::numeric_limits<int32_t>::lowest()
              : min ? std::numeric_limits<int32_t>::max() : static_cast<int32_t>(one));
      break;
    default:
      put(max ? std::numeric_limits<int64_t>::lowest()
              : min ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(one));
      break;
  }
  return bytes;
}

// Passes over the index (see IndexKernel): "replace" picks the last value per position and
// writes it; the reductions reset the reached positions (include_self = false), combine
// atomically, and divide for "mean". Sums and means add in an unspecified order, as
// scatter_add does; the others are exact.
void scatter_reduce_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::ScatterReduceAttrs&>(c.attrs);
  const Tensor &x = c.inputs[0], &src = c.inputs[2], &out = c.outputs[0];
  const Tensor index = dense(c.inputs[1]);
  const int64_t d = wrap_dim(a.dim, x.dim(), "scatter_reduce");
  check_along_dim(index, "scatter_reduce", d, x.dim() > 0 ? x.size(d) : 1);
  const DType dtype = x.dtype();
  KILN_CHECK(dtype != kFloat16 && dtype != kBFloat16, "[cuda] scatter_reduce takes bool, int32, int64, float32 and "
             "float64, got ", dtype, ". Fix: scatter in float32 and convert with .to().");
  copy_on_gpu(x, out);
  long long count = index.numel();
  if (count == 0) return;
  const int device = out.device().index;
  IndexDims g = index_dims(index, out, src, d);
  const void* src_pointer = src.raw_data();
  const void* index_pointer = index.raw_data();
  void* out_pointer = out.raw_data();
  if (a.reduce == "replace") {
    const Tensor winner = Tensor::empty({out.numel()}, kInt64, out.device());
    fill_on_gpu(winner, -1);
    void* winner_pointer = winner.raw_data();
    void* mark[] = {&index_pointer, &winner_pointer, &count, &g};
    launch_over_elements(kernel_for(IndexKernel::ScatterWinner, "scatter_winner", kInt64, device), count, mark);
    const void* winners = winner_pointer;
    void* take[] = {&src_pointer, &index_pointer, &winners, &out_pointer, &count, &g};
    launch_over_elements(kernel_for(IndexKernel::ScatterTake, "scatter_take", dtype, device), count, take);
    return;
  }
  int op = a.reduce == "prod" ? 1 : a.reduce == "amax" ? 2 : a.reduce == "amin" ? 3 : 0;
  Tensor counts;
  void* counts_pointer = nullptr;
  if (a.reduce == "mean" || !a.include_self) {
    counts = Tensor::empty({out.numel()}, kInt64, out.device());
    fill_on_gpu(counts, 0);
    counts_pointer = counts.raw_data();
    void* tally[] = {&index_pointer, &counts_pointer, &count, &g};
    launch_over_elements(kernel_for(IndexKernel::ScatterCount, "scatter_count", kInt64, device), count, tally);
  }
  if (!a.include_self) {
    uint64_t identity = scatter_identity(a.reduce, dtype);
    void* reset[] = {&index_pointer, &out_pointer, &count, &g, &identity};
    launch_over_elements(kernel_for(IndexKernel::ScatterReset, "scatter_reset", dtype, device), count, reset);
  }
  void* combine[] = {&src_pointer, &index_pointer, &out_pointer, &count, &g, &op};
  launch_over_elements(kernel_for(IndexKernel::ScatterCombine, "scatter_combine", dtype, device), count, combine);
  if (a.reduce == "mean") {
    long long positions = out.numel(), include_self = a.include_self ? 1 : 0;
    const void* counted = counts_pointer;
    void* divide[] = {&counted, &out_pointer, &positions, &include_self};
    launch_over_elements(kernel_for(IndexKernel::ScatterMean, "scatter_mean", dtype, device), positions, divide);
  }
}

void one_hot_kernel(KernelCall& c) {
  const Tensor indices = dense(c.inputs[0]);
  const Tensor& out = c.outputs[0];
  long long classes = static_cast<const ops::OneHotAttrs&>(c.attrs).num_classes;
  check_entries(indices, classes, "one_hot",
                "class values must be in [0, num_classes); pass a larger num_classes (or -1 to infer it).");
  long long count = out.numel();
  if (count == 0) return;
  const void* index_pointer = indices.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&index_pointer, &out_pointer, &count, &classes};
  launch_over_elements(kernel_for(IndexKernel::OneHot, "one_hot", kInt64, out.device().index), count, params);
}

}  // namespace

void check_indices(const Tensor& index, int64_t size, std::optional<int64_t> allowed,
                   std::function<void(const BadIndex&)> report) {
  long long n = index.numel();
  if (n == 0) return;
  const Tensor first_bad = failure_flag(index.device());
  const void* index_pointer = index.raw_data();
  long long limit = size, allowed_value = allowed.value_or(0);
  int has_allowed = allowed ? 1 : 0;
  void* bad_pointer = first_bad.raw_data();
  void* params[] = {&index_pointer, &n, &limit, &allowed_value, &has_allowed, &bad_pointer};
  launch_over_elements(kernel_for(IndexKernel::Check, "index_check", kInt64, index.device().index), n, params);
  check_failure(first_bad, [index, report = std::move(report)](int64_t e) {
    report(BadIndex{e, cuda::element(index, e).item<int64_t>()});
  });
}

std::string index_kernel_source(IndexKernel kind, DType dtype, const std::string& name) {
  if (kind == IndexKernel::Check || kind == IndexKernel::OneHot || kind == IndexKernel::ScatterCount ||
      kind == IndexKernel::ScatterWinner)
    dtype = kInt64;
  KILN_CHECK(!is_scatter(kind) || (dtype != kFloat16 && dtype != kBFloat16), "[cuda] the scatter kernels "
             "(index_add, scatter_add, the gradients of embedding and pad) take bool, int32, int64, float32 "
             "and float64, got ", dtype, ". Fix: scatter in float32 and convert with .to().");
  const std::string t = storage_type(dtype);
  std::ostringstream s;
  s << "// kiln eager kernel: " << name << "(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << kIndexStructs << "KILN_KERNEL void " << name << "(" << parameters(kind, t) << ") {\n"
    << "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
    << loop_body(kind) << "  }\n}\n";
  return s.str();
}

void register_index_kernels() {
  auto set = [](OpDef& op, KernelFn kernel) { op.kernels[static_cast<size_t>(DeviceType::CUDA)] = kernel; };
  set(ops::cat, cat_kernel);
  set(ops::slice_scatter, slice_scatter_kernel);
  set(ops::pad, pad_kernel);
  set(ops::pad_backward, pad_backward_kernel);
  set(ops::index_select, index_select_kernel);
  set(ops::index_add, index_add_kernel);
  set(ops::embedding, embedding_kernel);
  set(ops::embedding_backward, embedding_backward_kernel);
  set(ops::gather, gather_kernel);
  set(ops::scatter_add, scatter_add_kernel);
  set(ops::scatter_reduce, scatter_reduce_kernel);
  set(ops::one_hot, one_hot_kernel);
}

}  // namespace kiln::cuda
