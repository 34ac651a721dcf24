// CPU kernels for embedding (row gather), embedding_backward (row scatter-add) and one_hot.
// The scatter splits the embedding dim across threads, so no two threads add into the
// same element and the sums keep one order for every thread count.
#include "kiln/ops/embedding.h"

#include <cstring>

#include "kernels.h"
#include "kiln/ops/one_hot.h"
#include "nn_common.h"

namespace kiln::cpu::kernels {

namespace {

const char* kEmbeddingFix =
    "indices must lie in [0, num_embeddings); grow the table or fix the data.";

void embedding_kernel(KernelCall& c) {
  const Tensor& weight = c.inputs[0];
  const int64_t rows = weight.size(0), dim = weight.size(1);
  std::vector<int64_t> idx = nn::read_indices(c.inputs[1]);
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= rows) [[unlikely]]
      KILN_FAIL("[embedding] index ", idx[i], " (element ", i, " of indices ",
                c.inputs[1].type_str(), ") is out of range for an embedding table of ", rows,
                " rows (weight ", weight.type_str(), "). Fix: ", kEmbeddingFix);
  }
  visit_compute_dtype(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    const T* w = static_cast<const T*>(weight.raw_data());
    const int64_t rs = weight.stride(0), cs = weight.stride(1);
    T* out = nn::mdata<T>(c.outputs[0]);
    const int64_t n = static_cast<int64_t>(idx.size());
    parallel_for(0, n, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(dim, 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t i = lo; i < hi; ++i) {
                     const T* src = w + idx[i] * rs;
                     T* dst = out + i * dim;
                     if (cs == 1) {
                       std::memcpy(dst, src, static_cast<size_t>(dim) * sizeof(T));
                     } else {
                       for (int64_t j = 0; j < dim; ++j) dst[j] = src[j * cs];
                     }
                   }
                 });
  });
}

void embedding_backward_kernel(KernelCall& c) {
  const auto& a = static_cast<const ops::EmbeddingBackwardAttrs&>(c.attrs);
  const Tensor grad = nn::dense(c.inputs[0]);
  const Tensor& out = c.outputs[0];
  const int64_t dim = out.size(1);
  std::vector<int64_t> idx = nn::read_indices(c.inputs[1]);
  nn::check_indices(idx, a.num_weights, "embedding_backward", "indices", kEmbeddingFix);
  visit_floating_dtype(grad.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = nn::cdata<T>(grad);
    T* o = nn::mdata<T>(out);
    std::memset(o, 0, out.nbytes());
    const int64_t n = static_cast<int64_t>(idx.size());
    const int64_t skip = a.padding_idx.value_or(-1);
    parallel_for(0, dim, std::max<int64_t>(16, kParallelGrain / std::max<int64_t>(n, 1)),
                 [&](int64_t j0, int64_t j1) {
                   for (int64_t i = 0; i < n; ++i) {
                     if (idx[i] == skip) continue;
                     T* dst = o + idx[i] * dim;
                     const T* src = g + i * dim;
                     for (int64_t j = j0; j < j1; ++j) dst[j] += src[j];
                   }
                 });
  });
}

void one_hot_kernel(KernelCall& c) {
  const int64_t classes = static_cast<const ops::OneHotAttrs&>(c.attrs).num_classes;
  std::vector<int64_t> idx = nn::read_indices(c.inputs[0]);
  nn::check_indices(
      idx, classes, "one_hot", "indices",
      "class values must be in [0, num_classes); pass a larger num_classes (or -1 to infer it).");
  int64_t* o = nn::mdata<int64_t>(c.outputs[0]);
  std::memset(o, 0, c.outputs[0].nbytes());
  for (size_t i = 0; i < idx.size(); ++i) o[static_cast<int64_t>(i) * classes + idx[i]] = 1;
}

}  // namespace

void register_embedding_kernels() {
  constexpr size_t cpu = static_cast<size_t>(DeviceType::CPU);
  ops::embedding.kernels[cpu] = embedding_kernel;
  ops::embedding_backward.kernels[cpu] = embedding_backward_kernel;
  ops::one_hot.kernels[cpu] = one_hot_kernel;
}

}  // namespace kiln::cpu::kernels
