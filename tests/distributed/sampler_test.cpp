// DistributedSampler: disjoint shards that cover the data, a per-epoch shuffle shared by
// every rank, padding or dropping the remainder, and its use through DataLoader.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "kiln/distributed.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::data {
namespace {

std::vector<std::vector<int64_t>> shards(int world, int64_t n, bool shuffle, bool drop_last, int64_t epoch) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s({.num_replicas = world, .rank = r, .shuffle = shuffle, .seed = 42, .drop_last = drop_last});
    out.push_back(s.indices_for(epoch, n));
  }
  return out;
}

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheDataWhenSizesDivide) {
  for (int world : {1, 2, 3, 4})
    for (bool shuffle : {false, true}) {
      auto parts = shards(world, 12, shuffle, false, 0);
      std::multiset<int64_t> all;
      for (auto& p : parts) {
        EXPECT_EQ(p.size(), 12u / world);
        all.insert(p.begin(), p.end());
      }
      std::multiset<int64_t> want;
      for (int64_t i = 0; i < 12; ++i) want.insert(i);
      EXPECT_EQ(all, want) << world << " ranks, shuffle " << shuffle;
    }
}

TEST(DistributedSampler, PadsByRepeatingOrDropsTheRemainder) {
  // 10 samples over 4 ranks: padded to 12 (3 each, two repeats) or dropped to 8 (2 each).
  auto padded = shards(4, 10, true, false, 0);
  std::multiset<int64_t> all;
  for (auto& p : padded) {
    EXPECT_EQ(p.size(), 3u);
    all.insert(p.begin(), p.end());
  }
  EXPECT_EQ(all.size(), 12u);
  for (int64_t i = 0; i < 10; ++i) EXPECT_GE(all.count(i), 1u) << i;
  auto dropped = shards(4, 10, true, true, 0);
  std::set<int64_t> distinct;
  for (auto& p : dropped) {
    EXPECT_EQ(p.size(), 2u);
    distinct.insert(p.begin(), p.end());
  }
  EXPECT_EQ(distinct.size(), 8u) << "dropping must not repeat a sample";
  // Fewer samples than ranks still gives every rank one.
  for (auto& p : shards(4, 3, false, false, 0)) EXPECT_EQ(p.size(), 1u);
  for (auto& p : shards(4, 3, false, true, 0)) EXPECT_TRUE(p.empty());
}

TEST(DistributedSampler, EachEpochShufflesDifferentlyButTheSameOnEveryRank) {
  auto e0 = shards(2, 100, true, false, 0), e0_again = shards(2, 100, true, false, 0);
  auto e1 = shards(2, 100, true, false, 1);
  EXPECT_EQ(e0, e0_again) << "the order depends on (seed, epoch) alone";
  EXPECT_NE(e0, e1);
  std::vector<int64_t> identity(50);
  for (int64_t i = 0; i < 50; ++i) identity[i] = 2 * i;
  EXPECT_NE(e0[0], identity) << "shuffle = true must shuffle";
  EXPECT_EQ(shards(2, 100, false, false, 3)[0], identity) << "no shuffle: rank r takes r, r + R, ...";
}

TEST(DistributedSampler, DrivesTheDataLoaderAndAdvancesItsEpoch) {
  Tensor x = arange(0, 20).reshape({20, 1});
  DistributedSampler sampler({.num_replicas = 2, .rank = 1, .seed = 7});
  DataLoader loader(x, Tensor(), {.batch_size = 4, .shuffle = false, .sampler = &sampler});
  EXPECT_EQ(loader.num_samples(), 10);
  EXPECT_EQ(loader.size(), 3);
  std::vector<std::vector<int64_t>> epochs;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    for (auto batch : loader)
      for (double v : batch.data.to(kFloat64).to_vector<double>()) seen.push_back(static_cast<int64_t>(v));
    EXPECT_EQ(seen, sampler.indices_for(epoch, 20));
    epochs.push_back(seen);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_EQ(sampler.epoch(), 2);
  sampler.set_epoch(0);  // resuming pins the epoch
  std::vector<int64_t> again;
  for (auto batch : loader)
    for (double v : batch.data.to(kFloat64).to_vector<double>()) again.push_back(static_cast<int64_t>(v));
  EXPECT_EQ(again, epochs[0]);
}

TEST(DistributedSampler, ErrorsNameTheFix) {
  expect_error([] { DistributedSampler({.num_replicas = 2, .rank = 2}); }, {"rank 2", "num_replicas = 2"});
  DistributedSampler sampler({.num_replicas = 2, .rank = 0});
  expect_error([&] { DataLoader(zeros({4, 1}), Tensor(), {.shuffle = true, .sampler = &sampler}); },
               {"shuffle = false"});
  // Without a process group the defaults are one replica, rank 0.
  DistributedSampler alone;
  EXPECT_EQ(alone.num_replicas(), 1);
  EXPECT_EQ(alone.rank(), 0);
}

// A sampler handing out indices outside the data is caught at the epoch's start.
struct BadSampler : Sampler {
  std::vector<int64_t> epoch_indices(int64_t n) override { return {0, n}; }
  int64_t length(int64_t) const override { return 2; }
};

TEST(DistributedSampler, OutOfRangeIndicesFromASamplerAreAnError) {
  BadSampler bad;
  DataLoader loader(zeros({4, 1}), Tensor(), {.shuffle = false, .sampler = &bad});
  expect_error([&] { loader.begin(); }, {"sample index 4", "4 samples"});
}

}  // namespace
}  // namespace kiln::data
