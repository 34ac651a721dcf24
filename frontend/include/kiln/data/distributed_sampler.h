// DistributedSampler: each rank of a data-parallel job visits its own shard of the data,
// disjoint from the others, in an order every rank agrees on.
//
//   kiln::data::DistributedSampler sampler({.num_replicas = world, .rank = rank, .seed = 0});
//   kiln::data::DataLoader loader(x, y, {.batch_size = 64, .shuffle = false, .sampler = &sampler});
//
// Every epoch, all ranks draw the same permutation of [0, N) from (seed, epoch), and rank r
// takes positions r, r + R, r + 2R, ... of it. With drop_last = false the permutation is
// padded (by repeating its start) to a multiple of R, so every rank has ceil(N / R) samples;
// with drop_last = true the tail is dropped and each rank has floor(N / R). Equal lengths on
// every rank keep the ranks in step: one with more batches would wait forever in a
// collective. Unlike PyTorch, the epoch advances by itself each time the loader starts an
// epoch; set_epoch() pins it (e.g. when resuming).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/data/loader.h"

namespace kiln::data {

struct DistributedSamplerOptions {
  int num_replicas = -1;  // -1: the default process group's size (1 without one)
  int rank = -1;          // -1: the default process group's rank (0 without one)
  bool shuffle = true;
  uint64_t seed = 0;      // the same on every rank
  bool drop_last = false;
};

class DistributedSampler final : public Sampler {
 public:
  explicit DistributedSampler(DistributedSamplerOptions options = {});
  std::vector<int64_t> epoch_indices(int64_t num_samples) override;
  int64_t length(int64_t num_samples) const override;
  // The epoch the next epoch_indices() uses.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // This rank's indices for `epoch`, without advancing.
  std::vector<int64_t> indices_for(int64_t epoch, int64_t num_samples) const;
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }

 private:
  DistributedSamplerOptions options_;
  int num_replicas_;
  int rank_;
  int64_t epoch_ = 0;
};

}  // namespace kiln::data
