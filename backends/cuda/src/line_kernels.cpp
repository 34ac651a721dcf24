// sort, topk, cumsum, cumprod and searchsorted on CUDA tensors (kiln/cuda/line_kernels.h).
#include "kiln/cuda/line_kernels.h"

#include <sstream>

#include "kernel_cache.h"
#include "kernel_source.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/error.h"
#include "kiln/ops/cumulative.h"
#include "kiln/ops/sort.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

// A line is (o, j) for x seen as [outer, n, inner]: its element i sits at (o * n + i) * inner + j.
constexpr const char* kLineOffset =
    "    const long long o = line / inner, j = line % inner;\n";

std::string parameters(LineKernel kind, const std::string& t, const std::string& out_t) {
  switch (kind) {
    case LineKernel::SortFill:
      return "const " + t + "* __restrict__ x, " + t + "* keys, long long* positions, long long count, "
             "long long n, long long padded, long long inner";
    case LineKernel::SortExchange:
      return t + "* keys, long long* positions, long long count, long long padded, long long k, long long j, "
             "int descending";
    case LineKernel::SortTake:
      return "const " + t + "* __restrict__ keys, const long long* __restrict__ positions, " + t +
             "* __restrict__ values, long long* __restrict__ indices, long long count, long long m, "
             "long long padded, long long inner";
    case LineKernel::Cumsum:
    case LineKernel::Cumprod:
      return "const " + t + "* __restrict__ x, " + out_t + "* __restrict__ out, long long count, long long n, "
             "long long inner";
    case LineKernel::SearchSorted:
      return "const " + t + "* __restrict__ sorted, const " + t + "* __restrict__ values, "
             "long long* __restrict__ out, long long count, long long m, long long n, long long shared, int right";
  }
  return "";
}

std::string body(LineKernel kind, DType dtype) {
  const std::string value_a = load(dtype, "keys[e]"), value_b = load(dtype, "keys[partner]");
  switch (kind) {
    case LineKernel::SortFill:
      return "    const long long line = e / padded, i = e % padded;\n" + std::string(kLineOffset) +
             "    if (i < n) {\n"
             "      keys[e] = x[(o * n + i) * inner + j];\n"
             "      positions[e] = i;\n"
             "    } else {\n"
             "      keys[e] = 0;\n"
             "      positions[e] = -1;\n"
             "    }\n";
    case LineKernel::SortExchange:
      // Element e and its partner e ^ j (within the row) are exchanged when out of order for
      // this bitonic stage: rising where (i & k) == 0, falling elsewhere.
      return "    const long long i = e % padded, other = i ^ j;\n"
             "    if (other <= i) continue;\n"
             "    const long long partner = e - i + other;\n"
             "    const bool rising = (i & k) == 0;\n"
             "    if (kiln_line_after(" + value_a + ", positions[e], " + value_b +
             ", positions[partner], descending) == rising) {\n"
             "      const " + std::string(storage_type(dtype)) + " key = keys[e];\n"
             "      keys[e] = keys[partner];\n"
             "      keys[partner] = key;\n"
             "      const long long position = positions[e];\n"
             "      positions[e] = positions[partner];\n"
             "      positions[partner] = position;\n"
             "    }\n";
    case LineKernel::SortTake:
      return "    const long long line = e / m, i = e % m;\n" + std::string(kLineOffset) +
             "    const long long at = (o * m + i) * inner + j;\n"
             "    values[at] = keys[line * padded + i];\n"
             "    indices[at] = positions[line * padded + i];\n";
    case LineKernel::Cumsum:
    case LineKernel::Cumprod: {
      const bool floating = is_floating(dtype);
      const std::string acc = floating ? "double" : "unsigned long long";
      const std::string op = kind == LineKernel::Cumsum ? " + " : " * ";
      // Integers widen to long long first, so negative int32 values wrap like int64.
      const std::string value =
          (floating ? "(double)" : "(unsigned long long)(long long)") + load(dtype, "x[at]");
      return "    const long long line = e;\n" + std::string(kLineOffset) + "    " + acc + " acc = " +
             (kind == LineKernel::Cumsum ? "0" : "1") + ";\n"
             "    for (long long i = 0; i < n; ++i) {\n"
             "      const long long at = (o * n + i) * inner + j;\n"
             "      acc = acc" + op + value + ";\n"
             "      out[at] = (" + (floating ? std::string(storage_type(dtype)) : "long long") + ")acc;\n"
             "    }\n";
    }
    case LineKernel::SearchSorted: {
      // left: the first position whose element does not rank below the value; right: the
      // first whose element ranks above it.
      const std::string ct = CudaCBuilder::compute_type(dtype);
      return "    const long long line = shared ? 0 : e / n;\n"
             "    const " + ct + " v = " + load(dtype, "values[e]") + ";\n"
             "    long long lo = 0, hi = m;\n"
             "    while (lo < hi) {\n"
             "      const long long mid = lo + (hi - lo) / 2;\n"
             "      const " + ct + " s = " + load(dtype, "sorted[line * m + mid]") + ";\n"
             "      if (right ? !kiln_line_below(v, s) : kiln_line_below(s, v)) lo = mid + 1; else hi = mid;\n"
             "    }\n"
             "    out[e] = lo;\n";
    }
  }
  return "";
}

// Whether (a, position pa) goes after (b, pb): padding (-1) after everything, NaN above every
// number, ties by position.
std::string after_function(const std::string& t) {
  return "KILN_DEVICE bool kiln_line_below(" + t + " a, " + t + " b) {\n"
         "  if (a != a) return false;\n"
         "  if (b != b) return true;\n"
         "  return a < b;\n"
         "}\n"
         "KILN_DEVICE bool kiln_line_after(" + t + " a, long long pa, " + t + " b, long long pb, int descending) {\n"
         "  if (pa < 0 || pb < 0) return pa < 0 && pb >= 0;\n"
         "  if (descending ? kiln_line_below(b, a) : kiln_line_below(a, b)) return false;\n"
         "  if (descending ? kiln_line_below(a, b) : kiln_line_below(b, a)) return true;\n"
         "  return pa > pb;\n"
         "}\n";
}

const GeneratedKernel& kernel_for(LineKernel kind, const char* what, DType dtype, int device) {
  return kernel_of_kind(device, what, kind, dtype, line_kernel_source);
}

Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : contiguous_on_gpu(t); }

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

// Writes the first m of every line of x along dim d, in order, to values and indices.
void ordered_lines(const Tensor& input, int64_t d, long long m, bool descending, const Tensor& values,
                   const Tensor& indices) {
  if (values.numel() == 0) return;
  const Tensor x = dense(input);
  const DType dtype = x.dtype();
  const int device = x.device().index;
  const Around a(x.sizes(), d);
  long long n = a.n, inner = a.inner, padded = 1, lines = a.outer * a.inner;
  while (padded < n) padded *= 2;
  const Tensor keys = Tensor::empty({lines, padded}, dtype, x.device());
  const Tensor positions = Tensor::empty({lines, padded}, kInt64, x.device());
  long long count = lines * padded;
  const void* x_pointer = x.raw_data();
  void* keys_pointer = keys.raw_data();
  void* positions_pointer = positions.raw_data();
  void* fill[] = {&x_pointer, &keys_pointer, &positions_pointer, &count, &n, &padded, &inner};
  launch_over_elements(kernel_for(LineKernel::SortFill, "sort_fill", dtype, device), count, fill);
  const GeneratedKernel& exchange = kernel_for(LineKernel::SortExchange, "sort_exchange", dtype, device);
  int falling = descending ? 1 : 0;
  for (long long k = 2; k <= padded; k *= 2) {
    for (long long j = k / 2; j > 0; j /= 2) {
      void* pass[] = {&keys_pointer, &positions_pointer, &count, &padded, &k, &j, &falling};
      launch_over_elements(exchange, count, pass);
    }
  }
  long long taken = lines * m;
  void* values_pointer = values.raw_data();
  void* indices_pointer = indices.raw_data();
  const void* sorted_keys = keys_pointer;
  const void* sorted_positions = positions_pointer;
  void* take[] = {&sorted_keys, &sorted_positions, &values_pointer, &indices_pointer, &taken, &m, &padded, &inner};
  launch_over_elements(kernel_for(LineKernel::SortTake, "sort_take", dtype, device), taken, take);
}

void sort_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::SortAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  const int64_t d = wrap_dim(a.dim, x.dim(), "sort");
  ordered_lines(x, d, x.dim() > 0 ? x.size(d) : 1, a.descending, c.outputs[0], c.outputs[1]);
}

void topk_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::TopkAttrs&>(c.attrs);
  const Tensor& x = c.inputs[0];
  ordered_lines(x, wrap_dim(a.dim, x.dim(), "topk"), a.k, a.largest, c.outputs[0], c.outputs[1]);
}

template <LineKernel kKind>
void cumulative_kernel(KernelCall& c) {
  const Tensor& out = c.outputs[0];
  if (out.numel() == 0) return;
  const Tensor x = dense(c.inputs[0]);
  const int64_t d = wrap_dim(static_cast<const ops::DimAttrs&>(c.attrs).dim, x.dim(), c.op.name.c_str());
  const Around a(x.sizes(), d);
  long long lines = a.outer * a.inner, n = a.n, inner = a.inner;
  const void* x_pointer = x.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&x_pointer, &out_pointer, &lines, &n, &inner};
  launch_over_elements(kernel_for(kKind, c.op.name.c_str(), x.dtype(), out.device().index), lines, params);
}

void searchsorted_kernel(KernelCall& c) {
  const Tensor& out = c.outputs[0];
  if (out.numel() == 0) return;
  const Tensor sorted = dense(c.inputs[0]), values = dense(c.inputs[1]);
  long long count = out.numel(), m = sorted.size(-1), n = values.dim() > 0 ? values.size(-1) : 1;
  long long shared = sorted.dim() == 1 ? 1 : 0;
  int right = static_cast<const ops::SearchSortedAttrs&>(c.attrs).right ? 1 : 0;
  const void* sorted_pointer = sorted.raw_data();
  const void* values_pointer = values.raw_data();
  void* out_pointer = out.raw_data();
  void* params[] = {&sorted_pointer, &values_pointer, &out_pointer, &count, &m, &n, &shared, &right};
  launch_over_elements(kernel_for(LineKernel::SearchSorted, "searchsorted", sorted.dtype(), out.device().index),
                       count, params);
}

}  // namespace

std::string line_kernel_source(LineKernel kind, DType dtype, const std::string& name) {
  KILN_CHECK(is_compute_type(dtype), "[cuda] sort and scan kernels take bool, int32, int64, float32 and "
             "float64, got ", dtype, ". Fix: convert with .to(kiln::kFloat32) first.");
  const std::string t = storage_type(dtype);
  const std::string out_t = is_floating(dtype) ? t : "long long";
  std::ostringstream s;
  s << "// kiln eager kernel: " << name << "(" << dtype_name(dtype) << ")\n" << kKernelPrelude;
  if (kind == LineKernel::SortExchange || kind == LineKernel::SearchSorted)
    s << after_function(CudaCBuilder::compute_type(dtype));
  s << "KILN_KERNEL void " << name << "(" << parameters(kind, t, out_t) << ") {\n"
    << "  KILN_FOR_EACH_ELEMENT(e, count) {\n"
    << body(kind, dtype) << "  }\n}\n";
  return s.str();
}

void register_line_kernels() {
  auto set = [](OpDef& op, KernelFn kernel) { op.kernels[static_cast<size_t>(DeviceType::CUDA)] = kernel; };
  set(ops::sort, sort_kernel);
  set(ops::topk, topk_kernel);
  set(ops::cumsum, cumulative_kernel<LineKernel::Cumsum>);
  set(ops::cumprod, cumulative_kernel<LineKernel::Cumprod>);
  set(ops::searchsorted, searchsorted_kernel);
}

}  // namespace kiln::cuda
