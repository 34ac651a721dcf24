// masked_select and nonzero on CUDA tensors (kiln/cuda/selection_kernels.h).
#include "kiln/cuda/selection_kernels.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "kernel_cache.h"
#include "kernel_source.h"
#include "kiln/cuda/elementwise_kernels.h"
#include "kiln/error.h"
#include "kiln/ops/selection.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

namespace {

constexpr long long kChunk = 1024;

constexpr const char* kSelectStructs = R"(#ifndef KILN_SELECT_STRUCTS
#define KILN_SELECT_STRUCTS
struct KilnSelectDims {
  long long rank;
  long long sizes[8];
};
#endif
)";

// The loop over chunk c's elements, with `body` run for each selected element e (k its place).
std::string for_each_selected(const std::string& flag, const std::string& body) {
  return "    long long k = offsets[c];\n"
         "    const long long end = (c + 1) * chunk < n ? (c + 1) * chunk : n;\n"
         "    for (long long e = c * chunk; e < end && k < size; ++e) {\n"
         "      if (!(" + flag + " != 0)) continue;\n" + body +
         "      ++k;\n"
         "    }\n";
}

std::string parameters(SelectionKernel kind, const std::string& t) {
  switch (kind) {
    case SelectionKernel::Count:
      return "const " + t + "* __restrict__ flags, long long n, long long chunk, long long count, long long* counts";
    case SelectionKernel::Scan:
      return "long long* counts, long long chunks, long long* total";
    case SelectionKernel::MaskedWrite:
      return "const unsigned char* __restrict__ mask, const " + t + "* __restrict__ x, " + t +
             "* __restrict__ out, long long n, long long chunk, long long count, const long long* offsets, "
             "long long size";
    case SelectionKernel::NonzeroWrite:
      return "const " + t + "* __restrict__ x, long long* __restrict__ out, long long n, long long chunk, "
             "long long count, const long long* offsets, long long size, KilnSelectDims dims";
    case SelectionKernel::Pad:
      return t + "* __restrict__ out, long long count, long long width, const long long* total, " + t + " fill";
  }
  return "";
}

std::string body(SelectionKernel kind) {
  switch (kind) {
    case SelectionKernel::Count:
      return "    long long k = 0;\n"
             "    const long long end = (c + 1) * chunk < n ? (c + 1) * chunk : n;\n"
             "    for (long long e = c * chunk; e < end; ++e) k += flags[e] != 0;\n"
             "    counts[c] = k;\n";
    case SelectionKernel::Scan:
      return "    long long sum = 0;\n"
             "    for (long long i = 0; i < chunks; ++i) {\n"
             "      const long long k = counts[i];\n"
             "      counts[i] = sum;\n"
             "      sum += k;\n"
             "    }\n"
             "    *total = sum;\n";
    case SelectionKernel::MaskedWrite:
      return for_each_selected("mask[e]", "      out[k] = x[e];\n");
    case SelectionKernel::NonzeroWrite:
      return for_each_selected("x[e]",
                               "      long long rest = e;\n"
                               "      for (long long d = dims.rank - 1; d >= 0; --d) {\n"
                               "        out[k * dims.rank + d] = rest % dims.sizes[d];\n"
                               "        rest /= dims.sizes[d];\n"
                               "      }\n");
    case SelectionKernel::Pad:
      return "    if (e / width >= *total) out[e] = fill;\n";
  }
  return "";
}

const GeneratedKernel& kernel_for(SelectionKernel kind, const char* what, DType dtype, int device) {
  return kernel_of_kind(device, what, kind, dtype, selection_kernel_source);
}

Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : contiguous_on_gpu(t); }

// Offsets of every chunk of `flags` (its selected elements counted), and the total on the GPU.
struct Offsets {
  Tensor offsets, total;
  long long chunks = 0;
};
Offsets count_selected(const Tensor& flags) {
  Offsets o;
  long long n = flags.numel(), chunk = kChunk;
  o.chunks = (n + kChunk - 1) / kChunk;
  o.offsets = Tensor::empty({std::max(o.chunks, 1LL)}, kInt64, flags.device());
  o.total = Tensor::empty({1}, kInt64, flags.device());
  const int device = flags.device().index;
  const void* flags_pointer = flags.raw_data();
  void* offsets_pointer = o.offsets.raw_data();
  void* total_pointer = o.total.raw_data();
  void* count[] = {&flags_pointer, &n, &chunk, &o.chunks, &offsets_pointer};
  if (o.chunks > 0) launch_over_elements(kernel_for(SelectionKernel::Count, "select_count", flags.dtype(), device),
                                         o.chunks, count);
  void* scan[] = {&offsets_pointer, &o.chunks, &total_pointer};
  launch_over_elements(kernel_for(SelectionKernel::Scan, "select_scan", kInt64, device), 1, scan);
  return o;
}

// Positions past the selected ones: out (size rows of `width`) gets `fill` from row total on.
void pad(const Tensor& out, long long width, const Tensor& total, double fill) {
  long long count = out.numel();
  if (count == 0) return;
  uint64_t bits = 0;
  const Tensor fill_value = Tensor::scalar(fill, out.dtype());
  std::memcpy(&bits, fill_value.raw_data(), out.element_size());
  void* out_pointer = out.raw_data();
  const void* total_pointer = total.raw_data();
  void* params[] = {&out_pointer, &count, &width, &total_pointer, &bits};
  launch_over_elements(kernel_for(SelectionKernel::Pad, "select_pad", out.dtype(), out.device().index), count, params);
}

void masked_select_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::SelectionAttrs&>(c.attrs);
  const Tensor x = dense(c.inputs[0]), mask = dense(c.inputs[1]);
  const Tensor& out = c.outputs[0];
  if (a.size == 0) return;
  const Offsets o = count_selected(mask);
  long long n = x.numel(), chunk = kChunk, size = a.size;
  const void* mask_pointer = mask.raw_data();
  const void* x_pointer = x.raw_data();
  void* out_pointer = out.raw_data();
  const void* offsets_pointer = o.offsets.raw_data();
  long long chunks = o.chunks;
  void* params[] = {&mask_pointer, &x_pointer, &out_pointer, &n, &chunk, &chunks, &offsets_pointer, &size};
  if (chunks > 0)
    launch_over_elements(kernel_for(SelectionKernel::MaskedWrite, "masked_select", x.dtype(), x.device().index), chunks,
                         params);
  pad(out, 1, o.total, a.fill);
}

void nonzero_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::SelectionAttrs&>(c.attrs);
  const Tensor x = dense(c.inputs[0]);
  const Tensor& out = c.outputs[0];
  if (a.size == 0) return;
  KILN_CHECK(x.dim() <= 8, "[nonzero] the CUDA kernel takes tensors of up to 8 dims, got ", x.dim(), ".");
  const Offsets o = count_selected(x);
  struct {
    long long rank;
    long long sizes[8];
  } dims{x.dim(), {}};
  for (int64_t d = 0; d < x.dim(); ++d) dims.sizes[d] = x.size(d);
  long long n = x.numel(), chunk = kChunk, size = a.size, chunks = o.chunks;
  const void* x_pointer = x.raw_data();
  void* out_pointer = out.raw_data();
  const void* offsets_pointer = o.offsets.raw_data();
  void* params[] = {&x_pointer, &out_pointer, &n, &chunk, &chunks, &offsets_pointer, &size, &dims};
  if (chunks > 0 && x.dim() > 0)
    launch_over_elements(kernel_for(SelectionKernel::NonzeroWrite, "nonzero", x.dtype(), x.device().index), chunks,
                         params);
  if (x.dim() > 0) pad(out, x.dim(), o.total, a.fill);
}

}  // namespace

std::string selection_kernel_source(SelectionKernel kind, DType dtype, const std::string& name) {
  KILN_CHECK(is_compute_type(dtype), "[cuda] selection kernels take bool, int32, int64, float32 and float64, got ",
             dtype, ".");
  const std::string t = storage_type(dtype);
  const char* index = kind == SelectionKernel::Pad ? "e" : "c";
  std::ostringstream s;
  s << "// kiln eager kernel: " << name << "(" << dtype_name(dtype) << ")\n"
    << kKernelPrelude << kSelectStructs << "KILN_KERNEL void " << name << "(" << parameters(kind, t) << ") {\n"
    << "  KILN_FOR_EACH_ELEMENT(" << index << ", " << (kind == SelectionKernel::Scan ? "1" : "count") << ") {\n"
    << body(kind) << "  }\n}\n";
  return s.str();
}

void register_selection_kernels() {
  ops::masked_select.kernels[static_cast<size_t>(DeviceType::CUDA)] = masked_select_kernel;
  ops::nonzero.kernels[static_cast<size_t>(DeviceType::CUDA)] = nonzero_kernel;
}

}  // namespace kiln::cuda
