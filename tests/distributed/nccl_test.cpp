// The nccl process group: the collective checks gloo passes (collective_checks.h) on CUDA
// tensors, stream order, timeouts that abort the communicator, argument errors, and DDP of a
// model on the GPU. The Cuda* suites run on the fake driver with the fake NCCL (ctest's
// cuda_on_fake_driver: every rank a thread, the fake moving bytes through shared memory) and
// on a GPU machine (tests/gpu/device_check.sh), where NCCL allows one rank per GPU: there the
// groups of more ranks than GPUs skip. Multi-process jobs on nccl are in ddp_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda/requirements.h"
#include "distributed/collective_checks.h"
#include "kiln/cuda/nccl.h"
#include "kiln/cuda/stream.h"
#include "kiln/distributed.h"
#include "kiln/kiln.h"
#include "kiln/models.h"

namespace kiln::distributed {
namespace {

using namespace std::chrono_literals;
using namespace testing_support;
using testing::HasSubstr;
namespace F = kiln::nn::functional;

// Skips unless a GPU and NCCL are here and the GPUs can hold `world` ranks (the fake driver
// holds any number: it checks nothing of NCCL's one-rank-per-GPU rule).
#define REQUIRE_NCCL_RANKS(world)                                                                     \
  do {                                                                                                \
    REQUIRE_GPU();                                                                                    \
    if (!cuda::nccl::available()) GTEST_SKIP() << "no NCCL: " << cuda::nccl::unavailable_reason();    \
    if (!cuda::on_fake_driver() && (world) > cuda::device_count())                                    \
      GTEST_SKIP() << "NCCL needs one GPU per rank: " << (world) << " ranks, " << cuda::device_count() \
                   << " GPU(s) here";                                                                 \
  } while (0)

class CudaNcclByWorld : public testing::TestWithParam<int> {};

TEST_P(CudaNcclByWorld, AllReduceEveryOpDtypeAndSize) {
  REQUIRE_NCCL_RANKS(GetParam());
  check_all_reduce_every_op_dtype_and_size("nccl", GetParam(), kCUDA);
}
TEST_P(CudaNcclByWorld, BroadcastFromEveryRoot) {
  REQUIRE_NCCL_RANKS(GetParam());
  check_broadcast_from_every_root("nccl", GetParam(), kCUDA);
}
TEST_P(CudaNcclByWorld, AllGatherUnevenAndIntoTensor) {
  REQUIRE_NCCL_RANKS(GetParam());
  check_all_gather_uneven_and_into_tensor("nccl", GetParam(), kCUDA);
}
TEST_P(CudaNcclByWorld, ReduceScatterUnevenAndTensor) {
  REQUIRE_NCCL_RANKS(GetParam());
  check_reduce_scatter_uneven_and_tensor("nccl", GetParam(), kCUDA);
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaNcclByWorld, testing::Values(1, 2, 3));

// A collective follows the work queued before it on the caller's stream: here the input is
// written by kernels on a side stream made current, and the all-reduce must see their result.
TEST(CudaNccl, ACollectiveRunsAfterTheCallersStreamAndCompletesInOrder) {
  REQUIRE_NCCL_RANKS(1);
  const int world = cuda::on_fake_driver() ? 2 : 1;
  run_ranks("nccl", world, [&](ProcessGroup& g) {
    std::vector<Tensor> tensors;
    std::vector<Work> works;
    {
      cuda::StreamGuard on(cuda::Stream::create());
      Tensor a = full({512, 512}, 0.5f, TensorOptions(DType::Float32).with_device(kCUDA));
      for (int k = 0; k < 3; ++k) {
        // Each element: 512 * 0.5 * 0.5 * (rank + k + 1), written by a GEMM on the side stream.
        tensors.push_back(a.matmul(a) * static_cast<float>(g.rank() + k + 1));
        works.push_back(g.all_reduce(tensors.back(), ReduceOp::Sum, {.async_op = true}));
      }
    }
    for (int k = 2; k >= 0; --k) {
      works[k].wait();
      EXPECT_TRUE(works[k].is_completed());
      EXPECT_FALSE(works[k].failed());
      EXPECT_THAT(works[k].describe(), HasSubstr("all_reduce #"));
      std::vector<float> v = tensors[k].to(kCPU).to_vector<float>();
      float want = 0;
      for (int r = 0; r < world; ++r) want += 128.0f * static_cast<float>(r + k + 1);
      EXPECT_EQ(v.front(), want) << "collective " << k;
      EXPECT_EQ(v.back(), want) << "collective " << k;
    }
    for (int k = 1; k < 3; ++k) EXPECT_LE(works[k - 1].finished_at(), works[k].finished_at());
    g.barrier();
  });
}

TEST(CudaNccl, BadArgumentsAreErrorsNamingTheFix) {
  REQUIRE_NCCL_RANKS(1);
  run_ranks("nccl", 1, [&](ProcessGroup& g) {
    EXPECT_EQ(g.backend(), "nccl");
    Tensor on_cpu = zeros({3});
    EXPECT_THAT([&] { g.all_reduce(on_cpu); },
                testing::ThrowsMessage<Error>(testing::AllOf(HasSubstr("is on cpu"), HasSubstr("cuda:0"),
                                                             HasSubstr(".to(kiln::cuda::device(0))"))));
    Tensor strided = zeros({4, 4}, TensorOptions().with_device(kCUDA)).transpose(0, 1);
    EXPECT_THAT([&] { g.all_reduce(strided); }, testing::ThrowsMessage<Error>(HasSubstr("not contiguous")));
    Tensor flags = zeros({3}, TensorOptions(DType::Bool).with_device(kCUDA));
    EXPECT_THAT([&] { g.all_reduce(flags, ReduceOp::Avg); }, testing::ThrowsMessage<Error>(HasSubstr("bool")));
    Tensor t = zeros({3}, TensorOptions().with_device(kCUDA));
    EXPECT_THAT([&] { g.broadcast(t, 1); }, testing::ThrowsMessage<Error>(HasSubstr("root 1")));
    Tensor small = zeros({5}, TensorOptions().with_device(kCUDA));
    EXPECT_THAT([&] { g.all_gather_into_tensor(small, t); },
                testing::ThrowsMessage<Error>(HasSubstr("must hold 1 inputs")));
    // A model on the CPU cannot be reduced by an nccl group.
    auto model = std::make_shared<nn::Linear>(2, 2);
    EXPECT_THAT([&] { DistributedDataParallel ddp(model, {.group = &g}); },
                testing::ThrowsMessage<Error>(HasSubstr("model->to(kiln::cuda::device(")));
    g.barrier();  // argument errors are raised before anything is queued
  });
}

TEST(CudaNccl, ATimeoutAbortsTheCommunicatorAndNamesTheOperation) {
  REQUIRE_NCCL_RANKS(2);
  run_ranks("nccl", 2, [&](ProcessGroup& g) {
    Tensor t = ones({10}, TensorOptions().with_device(kCUDA));
    if (g.rank() == 0) {
      auto start = std::chrono::steady_clock::now();
      EXPECT_THAT([&] { g.all_reduce(t, ReduceOp::Sum, {.timeout = 300ms}); },
                  testing::ThrowsMessage<Error>(testing::AllOf(
                      HasSubstr("all_reduce #"), HasSubstr("rank 0 of 2 (nccl, cuda:0)"), HasSubstr("within 300 ms"),
                      HasSubstr("rank 1 is not inside any collective"), HasSubstr("aborted"))));
      EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
      EXPECT_THAT([&] { g.barrier(); }, testing::ThrowsMessage<Error>(HasSubstr("broke earlier")));
    } else {
      std::this_thread::sleep_for(1500ms);  // never calls the all_reduce
    }
  });
}

// DDP of a model on the GPU against the same model trained alone: with one rank the average
// is the gradient itself, so the two must agree to the bit; the buckets, the stream order and
// the copies back into .grad all run on the GPU.
TEST(CudaNcclDdp, OneRankOnTheGpuTrainsExactlyAsThePlainModel) {
  REQUIRE_NCCL_RANKS(1);
  REQUIRE_KERNELS();
  run_ranks("nccl", 1, [&](ProcessGroup& g) {
    manual_seed(7);
    auto model = models::build(models::FashionMLPConfig{.d_in = 48, .d_hidden = 32, .d_out = 10, .dropout = 0.0});
    model->to(kCUDA);
    auto reference = nn::clone(model);
    // Small buckets: several all-reduces per backward.
    DistributedDataParallel ddp(model, {.group = &g, .bucket_cap_mb = 0.002, .first_bucket_cap_mb = 0.001});
    EXPECT_GT(ddp.bucket_parameter_names().size(), 1u);
    optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
    optim::SGD ref_opt(reference->parameters(), {.lr = 0.05, .momentum = 0.9});
    manual_seed(8);
    Tensor x = randn({64, 48}).to(kCUDA);
    Tensor y = randint(0, 10, {64}).to(kCUDA);
    for (int step = 0; step < 10; ++step) {
      opt.zero_grad();
      F::cross_entropy(ddp(x), y).backward();
      opt.step();
      ref_opt.zero_grad();
      F::cross_entropy((*reference)(x), y).backward();
      ref_opt.step();
    }
    auto p = model->parameters(), q = reference->parameters();
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_EQ(p[i].device(), kCUDA);
      EXPECT_EQ((p[i] - q[i]).abs().max().item<float>(), 0.0f) << "parameter " << i;
    }
  });
}

// Not a GPU test: loading a missing or wrong library says what was tried and the fix.
TEST(Nccl, LoadFailuresSayWhatWasTriedAndTheFix) {
  cuda::nccl::Loaded missing = cuda::nccl::load("/nonexistent/libnccl.so.2");
  EXPECT_EQ(missing.api, nullptr);
  EXPECT_THAT(missing.unavailable_reason, testing::AllOf(HasSubstr("/nonexistent/libnccl.so.2"),
                                                         HasSubstr("KILN_NCCL"), HasSubstr("Fix:")));
  cuda::nccl::Loaded wrong = cuda::nccl::load("libz.so.1");  // a library, but not NCCL
  EXPECT_EQ(wrong.api, nullptr);
  EXPECT_THAT(wrong.unavailable_reason, testing::AllOf(HasSubstr("has no ncclGetVersion"), HasSubstr("Fix:")));
}

TEST(Nccl, WithoutAGpuTheGroupIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is here";
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{.host = "127.0.0.1", .port = 0, .is_server = true});
  EXPECT_THAT([&] { new_group("nccl", 0, 1, store, 2s); },
              testing::ThrowsMessage<Error>(testing::AllOf(HasSubstr("nccl"), HasSubstr("Fix:"))));
}

}  // namespace
}  // namespace kiln::distributed
