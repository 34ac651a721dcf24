// Post-accumulate-grad hooks and end-of-backward callbacks: the two points of a running
// backward that DistributedDataParallel builds on.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

TEST(PostAccumulateGradHook, RunsOnceAfterTheGradientIsFinal) {
  Tensor w = ones({3}).set_requires_grad(true);
  std::vector<std::vector<float>> seen;
  GradHookHandle handle = register_post_accumulate_grad_hook(w, [&](const Tensor& leaf) {
    EXPECT_TRUE(leaf.is_same(w));
    seen.push_back(leaf.grad().to_vector<float>());
  });
  // w is used twice: the engine sums both paths before accumulating, so one call.
  ((w * 2).sum() + (w * 3).sum()).backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<float>{5, 5, 5}));
  // A second backward accumulates into .grad; the hook sees the sum.
  (w * 1).sum().backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<float>{6, 6, 6}));
  handle.remove();
  handle.remove();  // idempotent
  (w * 1).sum().backward();
  EXPECT_EQ(seen.size(), 2u);
}

TEST(PostAccumulateGradHook, LivesAsLongAsItsHandle) {
  Tensor w = ones({2}).set_requires_grad(true);
  int calls = 0;
  {
    GradHookHandle handle = register_post_accumulate_grad_hook(w, [&](const Tensor&) { ++calls; });
    w.sum().backward();
    GradHookHandle moved = std::move(handle);
    w.sum().backward();
  }
  w.sum().backward();
  EXPECT_EQ(calls, 2);
}

TEST(PostAccumulateGradHook, RefusesTensorsThatAreNotTrainableLeaves) {
  Tensor plain = ones({2});
  expect_error([&] { auto h = register_post_accumulate_grad_hook(plain, [](const Tensor&) {}); },
               {"does not require grad", "parameter"});
  Tensor w = ones({2}).set_requires_grad(true);
  Tensor y = w * 2;
  expect_error([&] { auto h = register_post_accumulate_grad_hook(y, [](const Tensor&) {}); }, {"not a leaf"});
}

TEST(BackwardCallback, RunsWhenTheGraphIsDoneAndCanFailTheBackward) {
  Tensor a = ones({2}).set_requires_grad(true), b = ones({2}).set_requires_grad(true);
  std::vector<std::string> order;
  GradHookHandle ha = register_post_accumulate_grad_hook(a, [&](const Tensor&) {
    order.push_back("a");
    EXPECT_TRUE(in_backward());
    queue_backward_callback([&] {
      order.push_back("end");
      queue_backward_callback([&] { order.push_back("queued by a callback"); });
    });
  });
  GradHookHandle hb = register_post_accumulate_grad_hook(b, [&](const Tensor&) { order.push_back("b"); });
  (a * b).sum().backward();
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[2], "end");
  EXPECT_EQ(order[3], "queued by a callback");
  EXPECT_FALSE(in_backward());
  // grad() runs callbacks too (its leaves accumulate nothing, so hooks do not run).
  Tensor c = ones({2}).set_requires_grad(true);
  GradHookHandle hc = register_post_accumulate_grad_hook(
      c, [&](const Tensor&) { queue_backward_callback([] { throw Error("callback failed"); }); });
  expect_error([&] { (c * 2).sum().backward(); }, {"callback failed"});
  EXPECT_FALSE(in_backward()) << "a failed callback leaves the backward state clean";
  expect_error([] { queue_backward_callback([] {}); }, {"no backward is running"});
}

}  // namespace
}  // namespace kiln
