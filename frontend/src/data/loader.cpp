// Seeded permutations, row gathering and the minimal DataLoader.
#include "kiln/data/loader.h"

#include <cstring>
#include <numeric>

namespace kiln::data {

std::vector<int64_t> random_permutation(int64_t n, Generator& gen) {
  KILN_CHECK(n >= 0, "[random_permutation] expected n >= 0, got ", n, ".");
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (n < 2) return order;
  // One 64-bit draw per swap, two draws per Philox block. The bound is applied by a
  // 128-bit multiply-shift; its bias (< n / 2^64) is far below anything measurable.
  const uint64_t draws = static_cast<uint64_t>(n - 1);
  const uint64_t first = gen.reserve((draws + 1) / 2);
  std::array<uint32_t, 4> block{};
  for (uint64_t d = 0; d < draws; ++d) {
    if (d % 2 == 0) block = Generator::philox(gen.seed(), first + d / 2);
    const size_t w = (d % 2) * 2;
    const uint64_t r = (uint64_t{block[w]} << 32) | block[w + 1];
    const uint64_t i = static_cast<uint64_t>(n - 1) - d;  // swap i with j in [0, i]
    const uint64_t j = static_cast<uint64_t>((static_cast<unsigned __int128>(r) * (i + 1)) >> 64);
    std::swap(order[i], order[j]);
  }
  return order;
}

Tensor take_rows(const Tensor& t, std::span<const int64_t> indices) {
  KILN_CHECK(t.defined() && t.dim() >= 1,
             "[take_rows] expected a tensor with at least one dim, got ",
             t.defined() ? t.type_str() : std::string("an undefined tensor"), ".");
  Tensor src = t.is_contiguous() ? t : t.contiguous();
  Shape sizes(t.sizes());
  const int64_t rows = sizes[0];
  sizes[0] = static_cast<int64_t>(indices.size());
  Tensor out = Tensor::empty(sizes, t.dtype(), t.device());
  const size_t row_bytes = src.nbytes() / static_cast<size_t>(std::max<int64_t>(rows, 1));
  const char* from = static_cast<const char*>(src.raw_data());
  char* to = static_cast<char*>(out.raw_data());
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    KILN_CHECK(i >= 0 && i < rows, "[take_rows] index ", i, " (position ", k,
               ") is out of range for a tensor of ", rows, " rows ", t.type_str(),
               ". Fix: indices must lie in [0, ", rows, ").");
    std::memcpy(to + k * row_bytes, from + static_cast<size_t>(i) * row_bytes, row_bytes);
  }
  return out;
}

DataLoader::DataLoader(Tensor data, Tensor targets, DataLoaderOptions options)
    : data_(std::move(data)), targets_(std::move(targets)), options_(options) {
  KILN_CHECK(data_.defined() && data_.dim() >= 1,
             "[DataLoader] expected data with a sample dim, got ",
             data_.defined() ? data_.type_str() : std::string("an undefined tensor"),
             ". Fix: pass a tensor of shape [N, ...].");
  KILN_CHECK(options_.batch_size >= 1, "[DataLoader] expected batch_size >= 1, got ",
             options_.batch_size, ".");
  const int64_t n = data_.size(0);
  if (targets_.defined()) {
    KILN_CHECK(targets_.dim() >= 1 && targets_.size(0) == n, "[DataLoader] data has ", n,
               " samples (", data_.type_str(), ") but targets are ", targets_.type_str(),
               "; expected one target per sample. Fix: pass targets of shape [", n, ", ...].");
  }
  // Gathering copies rows, so make each source dense once here instead of per batch.
  if (!data_.is_contiguous()) data_ = data_.contiguous();
  if (targets_.defined() && !targets_.is_contiguous()) targets_ = targets_.contiguous();
  KILN_CHECK(!(options_.sampler && options_.shuffle), "[DataLoader] got a sampler and shuffle = true; the "
             "sampler decides the order. Fix: set shuffle = false (DistributedSampler shuffles itself).");
  // With a sampler, the order is a placeholder of the epoch's length until begin().
  order_.resize(static_cast<size_t>(options_.sampler ? options_.sampler->length(n) : n));
  std::iota(order_.begin(), order_.end(), int64_t{0});
}

DataLoader::Iterator DataLoader::begin() {
  if (options_.sampler) {
    const int64_t n = data_.size(0);
    order_ = options_.sampler->epoch_indices(n);
    for (int64_t index : order_)
      KILN_CHECK(index >= 0 && index < n, "[DataLoader] the sampler gave sample index ", index, " but the data has ",
                 n, " samples. Fix: the sampler must draw indices in [0, ", n, ").");
  } else if (options_.shuffle) {
    Generator& gen = options_.generator ? *options_.generator : default_generator();
    order_ = random_permutation(num_samples(), gen);
  }
  return Iterator(this, 0);
}

int64_t DataLoader::size() const {
  const int64_t n = num_samples(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

Batch DataLoader::batch(int64_t i) const {
  KILN_CHECK(i >= 0 && i < size(), "[DataLoader] batch ", i, " is out of range: this epoch has ",
             size(), " batches.");
  const int64_t start = i * options_.batch_size;
  const int64_t count = std::min(options_.batch_size, num_samples() - start);
  std::span<const int64_t> rows(order_.data() + start, static_cast<size_t>(count));
  Batch out;
  out.data = take_rows(data_, rows);
  if (targets_.defined()) out.target = take_rows(targets_, rows);
  return out;
}

Batch DataLoader::Iterator::operator*() const {
  return loader_->batch(batch_);
}

}  // namespace kiln::data
