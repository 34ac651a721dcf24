// CUDA graphs (kiln/cuda/graph_capture.h): eager kernels, copies and cuBLASLt calls captured
// once and replayed on new data; work that waits on the host refused with the reason, the
// stream usable after; the graph's memory kept while it lives and returned after. On the fake
// driver (which records a capturing stream's work, tests/cuda/fake_driver) and on a GPU.
#include "kiln/cuda/graph_capture.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/exec/graph_replay.h"
#include "kiln/ir/graph.h"
#include "kiln/kiln.h"
#include "requirements.h"
#include "test_util.h"

namespace kiln::cuda {
namespace {

const Device kGpu = kCUDA;

std::vector<float> host_values(const Tensor& t) { return t.to(kCPU).to_vector<float>(); }

TEST(CudaGraphCapture, EagerKernelsAndAMatmulReplayOnNewInputs) {
  REQUIRE_KERNELS();
  NoGradGuard no_grad;
  Tensor x = zeros({3, 4}).to(kGpu);
  Tensor w = Tensor::from_vector<float>({1, 0, 2, -1, 0.5f, 1, 0, 0, 3, 1, 1, 1}, {4, 3}).to(kGpu);
  x.copy_(zeros({3, 4}));  // loads the copy kernel before the capture
  Tensor y = relu(matmul(x, w) * 2.0 + 1.0);  // warm-up: every kernel loaded
  Tensor out;
  CapturedGraph graph = CapturedGraph::capture(0, [&] { out = relu(matmul(x, w) * 2.0 + 1.0); });
  for (int call = 0; call < 3; ++call) {
    Tensor fresh = randn({3, 4});
    x.copy_(fresh.to(kGpu));
    graph.replay(current_stream(0));
    Tensor want = relu(matmul(fresh, w.to(kCPU)) * 2.0 + 1.0);
    std::vector<float> got = host_values(out), expected = want.to_vector<float>();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-4) << "call " << call;
  }
}

TEST(CudaGraphCapture, HostWorkRunsAtEveryReplayInStreamOrder) {
  REQUIRE_GPU();
  std::atomic<int> runs{0};
  CapturedGraph graph = CapturedGraph::capture(0, [&] {
    EXPECT_TRUE(is_capturing(0));
    EXPECT_FALSE(is_capturing(1));
    launch_host_func(current_stream(0), [&runs] { ++runs; });
  });
  EXPECT_FALSE(is_capturing(0));
  EXPECT_EQ(runs.load(), 0);  // recorded, not run
  graph.replay(current_stream(0));
  graph.replay(current_stream(0));
  current_stream(0).synchronize();
  EXPECT_EQ(runs.load(), 2);
  launch_host_func(current_stream(0), [&runs] { runs += 10; });  // uncaptured: runs once
  current_stream(0).synchronize();
  EXPECT_EQ(runs.load(), 12);
}

TEST(CudaGraphCapture, WorkThatWaitsOnTheHostIsRefusedAndTheStreamStaysUsable) {
  REQUIRE_KERNELS();
  Tensor x = ones({4}).to(kGpu);
  Tensor warm = x + 1.0;
  expect_error([&] { CapturedGraph::capture(0, [&] { (void)(x + 1.0).to(kCPU); }); },
               {"[cuda] could not capture the work as a CUDA graph",
                "waiting on the host for a stream", "cannot be part of a CUDA graph"});
  expect_error([&] { CapturedGraph::capture(0, [] { synchronize(0); }); },
               {"synchronize() cannot be part of a CUDA graph"});
  expect_error(
      [&] {
        CapturedGraph::capture(0, [] { CapturedGraph::capture(0, [] {}); });
      },
      {"one CUDA graph capture at a time"});
  EXPECT_FALSE(is_capturing(0));
  // Nothing of the failed captures lingers: eager work runs on the default stream as before.
  EXPECT_EQ(host_values(x * 3.0), std::vector<float>(4, 3.0f));
}

TEST(CudaGraphCapture, IndexChecksRunAfterEachReplayWithTheOpsMessage) {
  REQUIRE_KERNELS();
  NoGradGuard no_grad;
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {4}).to(kGpu);
  Tensor index = Tensor::from_vector<int64_t>({3, 0}, {2}).to(kGpu);
  Tensor warm = index_select(x, 0, index);
  Tensor out;
  CapturedGraph graph = CapturedGraph::capture(0, [&] { out = index_select(x, 0, index) * 2.0; });
  EXPECT_EQ(graph.deferred_checks(), 1u);  // the range check's flag, read after each replay
  graph.replay(current_stream(0));
  graph.check_after_replay();
  EXPECT_EQ(host_values(out), (std::vector<float>{8, 2}));
  index.copy_(Tensor::from_vector<int64_t>({1, 7}, {2}).to(kGpu));
  graph.replay(current_stream(0));
  expect_error([&] { graph.check_after_replay(); },
               {"[index_select] index 7 is out of range for dim 0 of size 4"});
  index.copy_(Tensor::from_vector<int64_t>({2, 2}, {2}).to(kGpu));
  graph.replay(current_stream(0));
  graph.check_after_replay();  // the flag is reset by every replay
  EXPECT_EQ(host_values(out), (std::vector<float>{6, 6}));
  expect_error([] { defer_until_replayed([] {}); }, {"expected a CUDA graph capture on this thread"});
}

TEST(CudaGraphCapture, TheGraphKeepsItsMemoryUntilItIsDestroyed) {
  REQUIRE_KERNELS();
  NoGradGuard no_grad;
  Tensor x = ones({1 << 16}).to(kGpu);
  Tensor index = Tensor::from_vector<int64_t>({0, 3}, {2}).to(kGpu);
  Tensor warm = index_select((x * 2.0).exp(), 0, index);
  empty_cache(0);
  const uint64_t cached_before = memory_stats(0).cached_bytes;
  {
    Tensor out;
    // The index check's flag is held by the graph's deferred check: it goes back with the rest.
    CapturedGraph graph =
        CapturedGraph::capture(0, [&] { out = index_select((x * 2.0).exp(), 0, index); });
    // The intermediate x * 2 was freed during the capture, but the graph writes it at every
    // replay: empty_cache keeps it.
    empty_cache(0);
    EXPECT_GT(memory_stats(0).cached_bytes, cached_before);
    graph.replay(current_stream(0));
    EXPECT_NEAR(host_values(out).at(1), std::exp(2.0f), 1e-4);
    out = Tensor();
  }
  EXPECT_EQ(memory_stats(0).cached_bytes, cached_before);
}

// GraphReplay over eager calls: an activation `x` copied in, a parameter `w` read in place.
struct ReplayedCall {
  ir::Graph graph{"scaled"};
  int calls = 0;  // uncaptured runs (the warm-up, the capture)
  exec::GraphReplay::RunCall run = [this](std::span<const Tensor> in) {
    ++calls;
    return std::vector<Tensor>{relu(in[0] * in[1]) + 1.0};
  };
  ReplayedCall() {
    graph.add_input(ir::InputKind::Input, "x", ir::Type{kFloat32, Shape({3, 4}), kCUDA});
    graph.add_input(ir::InputKind::Parameter, "w", ir::Type{kFloat32, Shape({3, 4}), kCUDA});
  }
};

void expect_result(const Tensor& got, const Tensor& x, const Tensor& w, const std::string& what) {
  std::vector<float> g = host_values(got), want = (relu(x.to(kCPU) * w.to(kCPU)) + 1.0).to_vector<float>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-6) << what << " at " << i;
}

TEST(CudaGraphReplay, WarmsUpCapturesThenReplaysStridedInputsAndMovedParameters) {
  REQUIRE_KERNELS();
  NoGradGuard no_grad;
  ReplayedCall call;
  exec::GraphReplay replay(call.graph, /*fresh_random=*/false);
  Tensor w = randn({3, 4}).to(kCUDA);
  std::vector<Tensor> kept;
  for (int i = 0; i < 4; ++i) {
    Tensor x = randn({3, 4}).to(kCUDA);
    std::vector<Tensor> in{x, w};
    kept.push_back(replay.run(in, call.run)[0]);
    expect_result(kept.back(), x, w, "call " + std::to_string(i));
  }
  EXPECT_EQ(call.calls, 2);  // the warm-up and the capture; then replays
  EXPECT_EQ(replay.replays(), 3u);
  // A transposed activation: copied into the graph's dense buffer by the strided copy.
  Tensor wide = randn({4, 3}).to(kCUDA);
  std::vector<Tensor> strided{wide.transpose(0, 1), w};
  expect_result(replay.run(strided, call.run)[0], wide.transpose(0, 1), w, "transposed x");
  EXPECT_EQ(replay.replays(), 4u);
  // The parameter updated in place: seen; replaced by another tensor: captured again.
  w.copy_(full({3, 4}, 2.0).to(kCUDA));
  Tensor x = randn({3, 4}).to(kCUDA);
  std::vector<Tensor> in{x, w};
  expect_result(replay.run(in, call.run)[0], x, w, "w updated in place");
  Tensor other = randn({3, 4}).to(kCUDA);
  std::vector<Tensor> moved{x, other};
  expect_result(replay.run(moved, call.run)[0], x, other, "w moved: a warm-up");
  expect_result(replay.run(moved, call.run)[0], x, other, "w moved: a capture");
  EXPECT_EQ(call.calls, 4);
  EXPECT_EQ(replay.summary(),
            "replayed as a CUDA graph (2 captured, 6 replays; 3 launches per replay: 1 input copy, "
            "the graph, 1 output copy)");
}

TEST(CudaGraphReplay, IsOffForRandomOpsAndCpuInputsAndForWorkThatCannotBeCaptured) {
  REQUIRE_KERNELS();
  ir::Graph cpu_input("host");
  cpu_input.add_input(ir::InputKind::Input, "x", ir::Type{kFloat32, Shape({2}), kCPU});
  exec::GraphReplay on_host(cpu_input, false);
  EXPECT_FALSE(on_host.enabled());
  EXPECT_EQ(on_host.summary(), "graph replay off: input \"x\" is on the cpu");

  ReplayedCall call;
  exec::GraphReplay replay(call.graph, false);
  exec::GraphReplay::RunCall reads_back = [&](std::span<const Tensor> in) {
    ++call.calls;
    return std::vector<Tensor>{in[0] * in[0].sum().item<float>()};
  };
  Tensor x = ones({3, 4}).to(kCUDA), w = ones({3, 4}).to(kCUDA);
  std::vector<Tensor> in{x, w};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(host_values(replay.run(in, reads_back)[0])[0], 12.0f);
  EXPECT_EQ(call.calls, 4);  // the failed capture ran nothing; every call ran uncaptured
  EXPECT_FALSE(replay.enabled());
  EXPECT_EQ(replay.summary().rfind("graph replay off: [cuda] could not capture the work as a CUDA "
                                   "graph: [cuda] waiting on the host for a stream",
                                   0),
            0u)
      << replay.summary();
}

}  // namespace
}  // namespace kiln::cuda
