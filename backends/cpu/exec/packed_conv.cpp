// PackedConv (packed_conv.h): when the direct convolution runs, and when to pack again.
#include "packed_conv.h"

#include <algorithm>

namespace kiln::cpu::exec {

namespace {

bool same_list(IntList a, IntList b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

bool dense_float(const Tensor& t) {
  return t.dtype() == DType::Float32 && t.is_contiguous();
}

}  // namespace

bool PackedConv::applies(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                         const ops::Conv2dAttrs& a) {
  if (!x.defined() || !w.defined() || x.dim() != 4 || w.dim() != 4) return false;
  if (!dense_float(x) || !dense_float(w) || (out.defined() && !dense_float(out))) return false;
  if (bias.defined() && !dense_float(bias)) return false;
  const bool pointwise = w.size(2) == 1 && w.size(3) == 1 && a.stride[0] == 1 && a.stride[1] == 1 &&
                         a.padding[0] == 0 && a.padding[1] == 0;
  return !pointwise && gemm::has_direct_conv();
}

void PackedConv::repack_if_changed(const Tensor& w, const ops::Conv2dAttrs& a) {
  const bool same = source_.defined() && source_.impl()->storage == w.impl()->storage &&
                    source_.storage_offset() == w.storage_offset() &&
                    same_list(source_.sizes(), w.sizes()) &&
                    same_list(source_.strides(), w.strides()) && source_version_ == w.version();
  if (same) return;
  packed_.emplace(w.data_ptr<float>(), w.size(0), a.groups, w.size(1), w.size(2), w.size(3));
  source_ = w;
  source_version_ = w.version();
  ++packs_;
}

void PackedConv::run(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                     const ops::Conv2dAttrs& a, const gemm::ImageEpilogue& epilogue) {
  run(x, w, out, a, gemm::ConvOutput(bias.defined() ? bias.data_ptr<float>() : nullptr), epilogue);
}

void PackedConv::run(const Tensor& x, const Tensor& w, const Tensor& out, const ops::Conv2dAttrs& a,
                     const gemm::ConvOutput& output, const gemm::ImageEpilogue& epilogue) {
  repack_if_changed(w, a);
  const gemm::Conv2dShape shape = gemm::conv2d_shape(x.sizes(), w.sizes(), out.sizes(), a.stride,
                                                     a.padding, a.dilation, a.groups);
  gemm::conv2d(shape, x.data_ptr<float>(), *packed_, output, out.data_ptr<float>(), epilogue);
}

}  // namespace kiln::cpu::exec
