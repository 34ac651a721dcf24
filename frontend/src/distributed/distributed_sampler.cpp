// DistributedSampler: one shared permutation per epoch, strided across ranks.
#include "kiln/data/distributed_sampler.h"

#include <numeric>

#include "kiln/distributed/init.h"
#include "kiln/error.h"
#include "kiln/generator.h"

namespace kiln::data {

DistributedSampler::DistributedSampler(DistributedSamplerOptions options)
    : options_(options),
      num_replicas_(options.num_replicas >= 0 ? options.num_replicas : distributed::world_size()),
      rank_(options.rank >= 0 ? options.rank : distributed::rank()) {
  KILN_CHECK(num_replicas_ >= 1 && rank_ >= 0 && rank_ < num_replicas_, "DistributedSampler: rank ", rank_,
             " is not in [0, num_replicas = ", num_replicas_, "). Fix: pass the job's world size and this rank "
             "(or leave both -1 to take them from kiln::distributed::init()).");
}

int64_t DistributedSampler::length(int64_t num_samples) const {
  const int64_t r = num_replicas_;
  return options_.drop_last ? num_samples / r : (num_samples + r - 1) / r;
}

std::vector<int64_t> DistributedSampler::indices_for(int64_t epoch, int64_t num_samples) const {
  KILN_CHECK(num_samples >= 0, "DistributedSampler: num_samples must be >= 0, got ", num_samples, ".");
  std::vector<int64_t> order;
  if (options_.shuffle) {
    // The same stream on every rank: seeded by (seed, epoch) alone.
    Generator gen(options_.seed + static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ull);
    order = random_permutation(num_samples, gen);
  } else {
    order.resize(static_cast<size_t>(num_samples));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const int64_t per_rank = length(num_samples);
  const int64_t total = per_rank * num_replicas_;
  // Pad by repeating the start (possibly several times for tiny data), or drop the tail.
  if (total > num_samples && num_samples > 0) {
    order.reserve(static_cast<size_t>(total));
    for (int64_t i = num_samples; i < total; ++i) order.push_back(order[static_cast<size_t>(i % num_samples)]);
  }
  order.resize(static_cast<size_t>(num_samples > 0 ? total : 0));
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(order[static_cast<size_t>(i)]);
  return mine;
}

std::vector<int64_t> DistributedSampler::epoch_indices(int64_t num_samples) {
  return indices_for(epoch_++, num_samples);
}

}  // namespace kiln::data
