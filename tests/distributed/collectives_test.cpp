// Collectives of the Gloo process group, every rank a thread of this process with its own
// group (its own TCP connections) over one shared TcpStore: every op x dtype x size,
// including sizes that do not divide by the group size, async handles, timeouts and the
// errors of a broken group.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "distributed/collective_checks.h"
#include "kiln/distributed.h"
#include "kiln/kiln.h"

namespace kiln::distributed {
namespace {

using namespace std::chrono_literals;
using testing::HasSubstr;
using namespace testing_support;

class CollectivesByWorld : public testing::TestWithParam<int> {};

TEST_P(CollectivesByWorld, AllReduceEveryOpDtypeAndSize) {
  check_all_reduce_every_op_dtype_and_size("gloo", GetParam(), kCPU);
}
TEST_P(CollectivesByWorld, BroadcastFromEveryRoot) { check_broadcast_from_every_root("gloo", GetParam(), kCPU); }
TEST_P(CollectivesByWorld, AllGatherUnevenAndIntoTensor) {
  check_all_gather_uneven_and_into_tensor("gloo", GetParam(), kCPU);
}
TEST_P(CollectivesByWorld, ReduceScatterUnevenAndTensor) {
  check_reduce_scatter_uneven_and_tensor("gloo", GetParam(), kCPU);
}

// The gloo group's own threads, for the tests below.
void run_ranks(int world, const std::function<void(ProcessGroup&)>& fn, Milliseconds timeout = 20s) {
  testing_support::run_ranks("gloo", world, fn, timeout);
}

INSTANTIATE_TEST_SUITE_P(Gloo, CollectivesByWorld, testing::Values(2, 3, 4));

TEST(Collectives, AsyncHandlesCompleteInIssueOrderAndOverlap) {
  run_ranks(2, [&](ProcessGroup& g) {
    std::vector<Tensor> tensors;
    std::vector<Work> works;
    for (int k = 0; k < 4; ++k) {
      tensors.push_back(full({100000}, g.rank() + k, DType::Float32));
      works.push_back(g.all_reduce(tensors.back(), ReduceOp::Sum, {.async_op = true}));
    }
    // Waiting out of order is fine; each result is its own.
    for (int k = 3; k >= 0; --k) {
      works[k].wait();
      EXPECT_TRUE(works[k].is_completed());
      EXPECT_FALSE(works[k].failed());
      EXPECT_EQ(tensors[k].to_vector<float>()[0], 1 + 2 * k);
      EXPECT_THAT(works[k].describe(), HasSubstr("all_reduce"));
    }
    // The communication thread ran them in issue order.
    for (int k = 1; k < 4; ++k) EXPECT_LE(works[k - 1].finished_at(), works[k].started_at());
  });
}

TEST(Collectives, BarrierWaitsForTheSlowestRank) {
  run_ranks(2, [&](ProcessGroup& g) {
    if (g.rank() == 1) std::this_thread::sleep_for(300ms);
    auto start = std::chrono::steady_clock::now();
    g.barrier();
    if (g.rank() == 0) {
      EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
    }
  });
}

TEST(Collectives, BadArgumentsAreErrorsNamingTheFix) {
  run_ranks(2, [&](ProcessGroup& g) {
    Tensor strided = zeros({4, 4}).transpose(0, 1);
    EXPECT_THAT([&] { g.all_reduce(strided); }, testing::ThrowsMessage<Error>(HasSubstr("not contiguous")));
    Tensor flags = zeros({3}, DType::Bool);
    EXPECT_THAT([&] { g.all_reduce(flags, ReduceOp::Avg); }, testing::ThrowsMessage<Error>(HasSubstr("bool")));
    Tensor t = zeros({3});
    EXPECT_THAT([&] { g.broadcast(t, 5); }, testing::ThrowsMessage<Error>(HasSubstr("root 5")));
    std::vector<Tensor> one = {zeros({3})};
    EXPECT_THAT([&] { g.all_gather(one, t); }, testing::ThrowsMessage<Error>(HasSubstr("one output tensor per rank")));
    Tensor small = zeros({5});
    EXPECT_THAT([&] { g.all_gather_into_tensor(small, t); },
                testing::ThrowsMessage<Error>(HasSubstr("must hold 2 inputs")));
    Tensor odd = zeros({5});
    EXPECT_THAT([&] { g.reduce_scatter_tensor(t, odd); }, testing::ThrowsMessage<Error>(HasSubstr("[world_size * n")));
    g.barrier();  // the group still works: argument errors are raised before anything is queued
  });
}

TEST(Collectives, ATimeoutNamesTheOperationAndBreaksTheGroup) {
  run_ranks(2, [&](ProcessGroup& g) {
    Tensor t = ones({10});
    if (g.rank() == 0) {
      auto start = std::chrono::steady_clock::now();
      EXPECT_THAT([&] { g.all_reduce(t, ReduceOp::Sum, {.timeout = 300ms}); },
                  testing::ThrowsMessage<Error>(testing::AllOf(HasSubstr("all_reduce #"), HasSubstr("rank 0 of 2"),
                                                               HasSubstr("within 300 ms"),
                                                               HasSubstr("rank 1 is not inside any collective"))));
      EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
      // Later collectives fail at once with the first error.
      EXPECT_THAT([&] { g.barrier(); }, testing::ThrowsMessage<Error>(HasSubstr("broke earlier")));
    } else {
      std::this_thread::sleep_for(1500ms);  // never calls the all_reduce
    }
  });
}

TEST(Collectives, DifferentCollectivesOnTheRanksAreNamedAtTheTimeout) {
  std::atomic<int> failed{0};
  run_ranks(2, [&](ProcessGroup& g) {
    Tensor t = ones({10});
    std::string message;
    try {
      if (g.rank() == 0) {
        g.all_reduce(t, ReduceOp::Sum, {.timeout = 600ms});
      } else {
        g.barrier({.timeout = 600ms});
      }
    } catch (const Error& e) {
      message = e.what();
    }
    // Keep this rank's connections open until the other rank has timed out too (closing them
    // would fail its collective as a closed connection instead).
    ++failed;
    while (failed < 2) std::this_thread::sleep_for(5ms);
    // The first to time out sees the other waiting; the other may see it fail first (a timeout
    // closes the connections).
    if (g.rank() == 0) {
      EXPECT_THAT(message, testing::AnyOf(HasSubstr("rank 1 waits in barrier #"), HasSubstr("rank 1 failed in barrier #")));
    } else {
      EXPECT_THAT(message, testing::AnyOf(HasSubstr("rank 0 waits in all_reduce #"),
                                          HasSubstr("rank 0 failed in all_reduce #")));
    }
  });
}

TEST(Collectives, APeerThatLeavesIsNamed) {
  run_ranks(2, [&](ProcessGroup& g) {
    if (g.rank() == 1) return;  // its group closes its connections
    std::this_thread::sleep_for(200ms);
    Tensor t = ones({1000});
    EXPECT_THAT([&] { g.all_reduce(t); },
                testing::ThrowsMessage<Error>(testing::AllOf(HasSubstr("all_reduce"), HasSubstr("rank 1 closed"))));
  });
}

TEST(Collectives, ARankThatNeverJoinsIsNamedAtTheDeadline) {
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{.host = "127.0.0.1", .port = 0, .is_server = true});
  auto start = std::chrono::steady_clock::now();
  EXPECT_THAT([&] { new_group("gloo", 0, 3, store, 400ms, "lonely"); },
              testing::ThrowsMessage<Error>(testing::AllOf(HasSubstr("ranks 1, 2 never joined"), HasSubstr("400 ms"),
                                                           HasSubstr("kiln launch"))));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(Collectives, UnknownBackendAndBadRank) {
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{.host = "127.0.0.1", .port = 0, .is_server = true});
  EXPECT_THAT([&] { new_group("mpi", 0, 1, store, 1s); }, testing::ThrowsMessage<Error>(HasSubstr("unknown backend")));
  EXPECT_THAT([&] { new_group("gloo", 2, 2, store, 1s); }, testing::ThrowsMessage<Error>(HasSubstr("KILN_RANK")));
}

// SyncBatchNorm over 2 ranks (threads) on halves of a batch equals BatchNorm2d on the whole
// batch: outputs, input gradients, parameter gradients (summed over ranks) and running stats.
// `offset`: the data's mean; `tolerance`: for the outputs and input gradients.
void check_two_halves_equal_the_whole_batch(float offset, float tolerance) {
  manual_seed(11);
  Tensor x = randn({6, 3, 4, 4}) * 2 + offset;
  Tensor upstream = randn({6, 3, 4, 4});
  nn::BatchNorm2d whole(3);
  Tensor xw = x.clone().set_requires_grad(true);
  Tensor yw = whole(xw);
  (yw * upstream).sum().backward();
  std::vector<Tensor> y(2), dx(2), dweight(2), running_var(2);
  run_ranks(2, [&](ProcessGroup& g) {
    int r = g.rank();
    SyncBatchNorm half(3, {}, &g);
    Tensor xr = x.narrow(0, 3 * r, 3).clone().set_requires_grad(true);
    Tensor yr = half(xr);
    (yr * upstream.narrow(0, 3 * r, 3)).sum().backward();
    y[r] = yr.detach();
    dx[r] = xr.grad();
    dweight[r] = half.weight.grad();
    running_var[r] = half.running_var.clone();
  });
  auto max_diff = [](const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<float>(); };
  EXPECT_LT(max_diff(cat({y[0], y[1]}, 0), yw.detach()), tolerance);
  EXPECT_LT(max_diff(cat({dx[0], dx[1]}, 0), xw.grad()), tolerance);
  EXPECT_LT(max_diff(dweight[0] + dweight[1], whole.weight.grad()), 10 * tolerance);
  EXPECT_LT(max_diff(running_var[0], whole.running_var), tolerance / 10);
  EXPECT_LT(max_diff(running_var[1], whole.running_var), tolerance / 10);
}

TEST(SyncBatchNorm, TwoHalvesEqualTheWholeBatch) { check_two_halves_equal_the_whole_batch(1, 1e-5); }

// float32 resolves 1e4 to about 1e-3: a one-pass E[x²] - E[x]² (x² ~ 1e8) would get the
// variance (4) wrong by several units; the two-pass variance keeps it to float32's resolution.
TEST(SyncBatchNorm, DataWithALargeMeanKeepsItsVariance) { check_two_halves_equal_the_whole_batch(1e4, 2e-3); }


TEST(SyncBatchNorm, AloneOrInEvalItIsBatchNorm) {
  manual_seed(12);
  Tensor x = randn({4, 2, 3});
  nn::BatchNorm1d plain(2);
  SyncBatchNorm sync(2);  // no process group: plain BatchNorm
  Tensor a = plain(x), b = sync(x);
  EXPECT_LT((a - b).abs().max().item<float>(), 1e-6);
  EXPECT_LT((plain.running_mean - sync.running_mean).abs().max().item<float>(), 1e-7);
  sync.eval();
  plain.eval();
  EXPECT_LT((plain(x) - sync(x)).abs().max().item<float>(), 1e-6);
}

struct HoldsItsBatchNorm : nn::Module {
  HoldsItsBatchNorm() { bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(2)); }
  Tensor forward(const Tensor& x) override { return bn(x); }
  nn::ModulePtr<nn::BatchNorm2d> bn;
};

TEST(SyncBatchNorm, ConvertReplacesEveryBatchNormAndKeepsItsState) {
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 4), std::make_shared<nn::BatchNorm1d>(4));
  {
    NoGradGuard no_grad;
    seq->named_buffers()[0].second.fill_(0.5);  // running_mean
  }
  seq->eval();
  convert_sync_batchnorm(seq);
  auto* sync = dynamic_cast<SyncBatchNorm*>(seq->children()[1].get());
  ASSERT_NE(sync, nullptr);
  EXPECT_FALSE(sync->is_training());
  EXPECT_EQ(sync->running_mean.to_vector<float>(), std::vector<float>(4, 0.5f));
  EXPECT_EQ(seq->state_dict().size(), 7u) << "the same state names as BatchNorm";
  auto bare = convert_sync_batchnorm(std::make_shared<nn::BatchNorm2d>(3));
  EXPECT_NE(dynamic_cast<SyncBatchNorm*>(bare.get()), nullptr);
  // A member still holding the old layer is not called silently: it is unregistered now.
  auto holder = std::make_shared<HoldsItsBatchNorm>();
  convert_sync_batchnorm(holder);
  std::string message;
  try {
    (*holder)(ones({2, 2, 2, 2}));
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("register"), std::string::npos) << message;
}

// Runs on the fake CUDA driver (ctest's cuda_on_fake_driver) and on a GPU machine.
TEST(CudaGloo, CudaTensorsAndModelsAreRefusedNamingTheFix) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{.host = "127.0.0.1", .port = 0, .is_server = true});
  auto group = new_group("gloo", 0, 1, store, 5s);
  Tensor t = ones({4}).to(kCUDA);
  EXPECT_THAT([&] { group->all_reduce(t); },
              testing::ThrowsMessage<Error>(testing::AllOf(HasSubstr("cuda:0"), HasSubstr(".to(kiln::kCPU)"))));
  auto model = std::make_shared<nn::Linear>(2, 2);
  model->to(kCUDA);
  EXPECT_THAT([&] { DistributedDataParallel ddp(model, {.group = group.get()}); },
              testing::ThrowsMessage<Error>(HasSubstr("keep the model on the CPU")));
}

TEST(Collectives, DefaultGroupAccessorsWithoutInit) {
  EXPECT_FALSE(is_initialized());
  EXPECT_EQ(rank(), 0);
  EXPECT_EQ(world_size(), 1);
  EXPECT_THAT([] { default_group(); }, testing::ThrowsMessage<Error>(HasSubstr("init()")));
}

}  // namespace
}  // namespace kiln::distributed
