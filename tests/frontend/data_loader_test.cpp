// Tests for kiln::data's seeded permutations, row gathering and DataLoader.
#include <gtest/gtest.h>

#include "test_util.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "kiln/data/loader.h"
#include "kiln/kiln.h"

namespace kiln::data {
namespace {

std::vector<int64_t> iota_vec(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

TEST(RandomPermutation, IsAPermutationAndRepeatsForASeed) {
  Generator g1(123), g2(123), g3(124);
  std::vector<int64_t> a = random_permutation(1000, g1);
  std::vector<int64_t> b = random_permutation(1000, g2);
  std::vector<int64_t> c = random_permutation(1000, g3);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, iota_vec(1000));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota_vec(1000));
  // The generator advances: the next draw is a different order.
  EXPECT_NE(random_permutation(1000, g1), a);
  EXPECT_EQ(random_permutation(0, g1), std::vector<int64_t>{});
  EXPECT_EQ(random_permutation(1, g1), std::vector<int64_t>{0});
}

TEST(RandomPermutation, AllOrdersOfThreeAreAboutEquallyLikely) {
  Generator g(7);
  std::map<std::vector<int64_t>, int> counts;
  for (int i = 0; i < 6000; ++i) ++counts[random_permutation(3, g)];
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [order, n] : counts) {
    EXPECT_GT(n, 850);  // expected 1000 each; +-150 is over 5 standard deviations
    EXPECT_LT(n, 1150);
  }
}

TEST(TakeRows, GathersRowsOfAnyRank) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 2, 2});
  std::vector<int64_t> idx = {2, 0, 2};
  Tensor r = take_rows(t, idx);
  EXPECT_EQ(r.shape(), Shape({3, 2, 2}));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));

  // A non-contiguous source (transposed view).
  Tensor m = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5}, {2, 3}).t();  // [[0,3],[1,4],[2,5]]
  std::vector<int64_t> one = {1};
  EXPECT_EQ(take_rows(m, one).to_vector<int64_t>(), (std::vector<int64_t>{1, 4}));
}

TEST(TakeRows, OutOfRangeIndex) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2}, {3});
  std::vector<int64_t> idx = {0, 3};
  std::string msg = error_of([&] { take_rows(t, idx); });
  EXPECT_NE(msg.find("index 3 (position 1) is out of range for a tensor of 3 rows"),
            std::string::npos)
      << msg;
  Tensor s = Tensor::scalar(1.0);
  msg = error_of([&] { take_rows(s, idx); });
  EXPECT_NE(msg.find("expected a tensor with at least one dim"), std::string::npos) << msg;
}

// data row i holds (10 i, 10 i + 1); target i holds i.
struct Toy {
  Tensor data, targets;
  explicit Toy(int64_t n) {
    std::vector<float> d;
    for (int64_t i = 0; i < n; ++i) {
      d.push_back(static_cast<float>(10 * i));
      d.push_back(static_cast<float>(10 * i + 1));
    }
    data = Tensor::from_vector<float>(d, {n, 2});
    targets = Tensor::from_vector<int64_t>(iota_vec(n), {n});
  }
};

// Visits every batch of one epoch; checks that data and targets stay paired.
std::vector<int64_t> epoch(DataLoader& loader, std::vector<int64_t>* batch_sizes = nullptr) {
  std::vector<int64_t> seen;
  for (auto [x, y] : loader) {
    std::vector<float> xs = x.to_vector<float>();
    std::vector<int64_t> ys = y.to_vector<int64_t>();
    EXPECT_EQ(x.size(0), y.size(0));
    for (size_t k = 0; k < ys.size(); ++k) {
      EXPECT_EQ(xs[2 * k], 10.0f * static_cast<float>(ys[k]));
      EXPECT_EQ(xs[2 * k + 1], 10.0f * static_cast<float>(ys[k]) + 1);
      seen.push_back(ys[k]);
    }
    if (batch_sizes) batch_sizes->push_back(x.size(0));
  }
  return seen;
}

TEST(DataLoader, OrderedBatchesCoverTheDataOnce) {
  Toy toy(10);
  DataLoader loader(toy.data, toy.targets, {.batch_size = 4, .shuffle = false});
  EXPECT_EQ(loader.size(), 3);
  std::vector<int64_t> sizes;
  EXPECT_EQ(epoch(loader, &sizes), iota_vec(10));
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
}

TEST(DataLoader, DropLast) {
  Toy toy(10);
  DataLoader loader(toy.data, toy.targets, {.batch_size = 4, .shuffle = false, .drop_last = true});
  EXPECT_EQ(loader.size(), 2);
  std::vector<int64_t> sizes;
  EXPECT_EQ(epoch(loader, &sizes), iota_vec(8));
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4}));
}

TEST(DataLoader, ShufflesEachEpochReproducibly) {
  Toy toy(50);
  Generator g1(42), g2(42);
  DataLoader a(toy.data, toy.targets, {.batch_size = 8, .generator = &g1});
  DataLoader b(toy.data, toy.targets, {.batch_size = 8, .generator = &g2});
  std::vector<int64_t> a1 = epoch(a), a2 = epoch(a), b1 = epoch(b);
  EXPECT_EQ(a1, b1);                // same seed, same order
  EXPECT_NE(a1, a2);                // a new order every epoch
  EXPECT_NE(a1, iota_vec(50));      // actually shuffled
  std::sort(a1.begin(), a1.end());  // every sample exactly once
  EXPECT_EQ(a1, iota_vec(50));
}

TEST(DataLoader, UsesDefaultGeneratorWhenNoneGiven) {
  Toy toy(20);
  DataLoader loader(toy.data, toy.targets, {.batch_size = 5});
  manual_seed(3);
  std::vector<int64_t> first = epoch(loader);
  manual_seed(3);
  EXPECT_EQ(epoch(loader), first);
}

TEST(DataLoader, WorksWithoutTargetsAndWithNonContiguousData) {
  Tensor data = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}).t();  // 3 samples of 2
  DataLoader loader(data, Tensor(), {.batch_size = 2, .shuffle = false});
  std::vector<Batch> batches(loader.begin(), loader.end());
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].data.to_vector<float>(), (std::vector<float>{0, 3, 1, 4}));
  EXPECT_EQ(batches[1].data.to_vector<float>(), (std::vector<float>{2, 5}));
  EXPECT_FALSE(batches[0].target.defined());
}

TEST(DataLoader, Errors) {
  Toy toy(10);
  Tensor few = Tensor::from_vector<int64_t>({0, 1, 2}, {3});
  std::string msg = error_of([&] { DataLoader(toy.data, few); });
  EXPECT_NE(msg.find("data has 10 samples"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected one target per sample"), std::string::npos) << msg;

  msg = error_of([&] { DataLoader(toy.data, toy.targets, {.batch_size = 0}); });
  EXPECT_NE(msg.find("expected batch_size >= 1, got 0"), std::string::npos) << msg;

  msg = error_of([&] { DataLoader(Tensor::scalar(1.0), Tensor()); });
  EXPECT_NE(msg.find("expected data with a sample dim"), std::string::npos) << msg;

  DataLoader loader(toy.data, toy.targets, {.batch_size = 4});
  msg = error_of([&] { loader.batch(3); });
  EXPECT_NE(msg.find("batch 3 is out of range: this epoch has 3 batches"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace kiln::data
