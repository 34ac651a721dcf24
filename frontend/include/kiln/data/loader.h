// Mini-batches over in-memory tensors: seeded shuffles and a minimal DataLoader.
//
//   auto train = kiln::data::load_fashion_mnist(kiln::data::Split::Train);
//   kiln::data::DataLoader loader(train.images, train.labels, {.batch_size = 128});
//   for (auto [x, y] : loader) { ... }  // a fresh shuffle every epoch (every begin())
#pragma once

#include <cstdint>
#include <iterator>
#include <span>
#include <vector>

#include "kiln/generator.h"
#include "kiln/tensor.h"

namespace kiln::data {

// A uniformly random permutation of [0, n) (Fisher-Yates on Philox numbers drawn from
// `gen`), so a given seed gives the same order on every machine.
std::vector<int64_t> random_permutation(int64_t n, Generator& gen = default_generator());

// Rows `indices` of `t` (along dim 0) copied into a new contiguous tensor of shape
// [indices.size(), t.sizes()[1:]...]. A host-side copy for data loading: no autograd.
Tensor take_rows(const Tensor& t, std::span<const int64_t> indices);

// Chooses the samples an epoch visits and their order (kiln/data/distributed_sampler.h: this
// rank's shard of a data-parallel job).
class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices the next epoch visits, in order (each in [0, num_samples)). DataLoader calls
  // it once per epoch, from begin().
  virtual std::vector<int64_t> epoch_indices(int64_t num_samples) = 0;
  // How many indices each epoch has (for len(loader) before the first epoch).
  virtual int64_t length(int64_t num_samples) const = 0;
};

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;          // drop the final batch when it is smaller than batch_size
  Generator* generator = nullptr;  // default_generator() when null
  // When set, the sampler picks each epoch's samples and order (then shuffle must be false:
  // the sampler shuffles). Not owned; it must outlive the loader.
  Sampler* sampler = nullptr;
};

struct Batch {
  Tensor data;
  Tensor target;  // undefined when the loader has no targets
};

class DataLoader {
 public:
  // `data` and `targets` share their first dim (the sample index); targets may be undefined.
  DataLoader(Tensor data, Tensor targets, DataLoaderOptions options = {});

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Batch;
    Iterator() = default;
    Batch operator*() const;
    Iterator& operator++() {
      ++batch_;
      return *this;
    }
    void operator++(int) { ++batch_; }
    bool operator==(const Iterator& other) const { return batch_ == other.batch_; }

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, int64_t batch) : loader_(loader), batch_(batch) {}
    const DataLoader* loader_ = nullptr;
    int64_t batch_ = 0;
  };

  // Starts an epoch: draws a new order when shuffling. Iterators of an earlier epoch
  // then see the new order.
  Iterator begin();
  Iterator end() const { return Iterator(this, size()); }

  int64_t size() const;  // batches per epoch
  int64_t num_samples() const { return static_cast<int64_t>(order_.size()); }
  const DataLoaderOptions& options() const { return options_; }
  // The batch `i` of the current epoch.
  Batch batch(int64_t i) const;

 private:
  Tensor data_;
  Tensor targets_;
  DataLoaderOptions options_;
  std::vector<int64_t> order_;
};

}  // namespace kiln::data
