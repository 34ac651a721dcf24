// CUDA graphs (graph_capture.h): stream capture into the graph's own stream and memory pool.
#include "kiln/cuda/graph_capture.h"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "device_context.h"
#include "kiln/cuda/caching_allocator.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/driver.h"
#include "kiln/cuda/fused_kernels.h"
#include "kiln/error.h"

namespace kiln::cuda {
namespace {

using HostWork = std::shared_ptr<std::function<void()>>;

// This thread's capture in progress, if any.
struct ActiveCapture {
  int device;
  std::vector<HostWork>* host_work;  // what the graph keeps alive for its host nodes
  std::vector<std::function<void()>>* checks;  // what runs after each replay
};
thread_local ActiveCapture* active_capture = nullptr;

driver::CUstream native(const Stream& s) { return static_cast<driver::CUstream>(s.handle()); }

// cuLaunchHostFunc's callbacks: host work runs where no exception can go.
void run_host_work(std::function<void()>& work) {
  try {
    work();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: host work queued on a CUDA stream failed: %s\n", e.what());
    std::abort();
  }
}
void run_kept(void* data) { run_host_work(*static_cast<std::function<void()>*>(data)); }
void run_once(void* data) {
  auto* work = static_cast<std::function<void()>*>(data);
  run_host_work(*work);
  delete work;
}

}  // namespace

struct CapturedGraph::State {
  int device = 0;
  Stream stream = Stream::default_stream();
  driver::CUgraph graph = nullptr;
  driver::CUgraphExec exec = nullptr;
  std::vector<HostWork> host_work;
  std::vector<std::function<void()>> checks;

  ~State() {
    const driver::Api& api = use_device(device);
    // Replays may still be queued: let them finish before the memory they use goes back.
    api.cuCtxSynchronize();
    if (exec) api.cuGraphExecDestroy(exec);
    if (graph) api.cuGraphDestroy(graph);
    // The checks hold tensors of the pool (failure flags, indices): theirs go back with it.
    checks.clear();
    host_work.clear();
    device_allocator(device).release_pool(stream.id());
  }
};

CapturedGraph::CapturedGraph(std::unique_ptr<State> state) : state_(std::move(state)) {}
CapturedGraph::CapturedGraph(CapturedGraph&&) noexcept = default;
CapturedGraph& CapturedGraph::operator=(CapturedGraph&&) noexcept = default;
CapturedGraph::~CapturedGraph() = default;

int CapturedGraph::device() const { return state_->device; }

CapturedGraph CapturedGraph::capture(int device, const std::function<void()>& work) {
  KILN_CHECK(!active_capture, "[cuda] expected one CUDA graph capture at a time on a thread, "
             "found a capture started inside another. Fix: capture the outer work only.");
  const driver::Api& api = use_device(device);
  auto state = std::make_unique<State>();
  state->device = device;
  state->stream = Stream::create(device);
  device_allocator(device).keep_pool(state->stream.id());

  StreamGuard on_capture_stream(state->stream);
  driver::check(api,
                api.cuStreamBeginCapture_v2(native(state->stream), driver::kStreamCaptureModeRelaxed),
                "cuStreamBeginCapture", "check nvidia-smi; CUDA graphs need CUDA 11.4 or newer.");
  ActiveCapture capture{device, &state->host_work, &state->checks};
  active_capture = &capture;
  std::string failure;
  try {
    work();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  active_capture = nullptr;
  driver::CUgraph graph = nullptr;
  const driver::CUresult ended = api.cuStreamEndCapture(native(state->stream), &graph);
  state->graph = graph;  // destroyed with the state, also when the capture failed
  KILN_CHECK(failure.empty(), "[cuda] could not capture the work as a CUDA graph: ", failure);
  KILN_CHECK(ended == driver::kSuccess && graph, "[cuda] could not capture the work as a CUDA "
             "graph: cuStreamEndCapture failed with ", driver::error_name(api, ended),
             " (the work waited on the host or used another stream while it was captured). "
             "Fix: run the work without a CUDA graph.");
  driver::check(api, api.cuGraphInstantiateWithFlags(&state->exec, graph, 0),
                "cuGraphInstantiate", "check nvidia-smi; run the work without a CUDA graph.");
  return CapturedGraph(std::move(state));
}

void CapturedGraph::replay(const Stream& stream) const {
  KILN_CHECK(stream.device() == state_->device, "[cuda] expected a CUDA graph to replay on the "
             "GPU it was captured on (cuda:", state_->device, "), got a stream of cuda:",
             stream.device(), ". Fix: capture it again on that GPU.");
  const driver::Api& api = use_device(stream.device());
  detail::count_graph_launch();
  driver::check(api, api.cuGraphLaunch(state_->exec, native(stream)), "cuGraphLaunch",
                "an earlier kernel may have failed (rerun with CUDA_LAUNCH_BLOCKING=1 to find "
                "it).");
}

void CapturedGraph::check_after_replay() const {
  for (const std::function<void()>& check : state_->checks) check();
}

size_t CapturedGraph::deferred_checks() const { return state_->checks.size(); }

void defer_until_replayed(std::function<void()> check) {
  KILN_CHECK(active_capture, "[cuda] defer_until_replayed: expected a CUDA graph capture on "
             "this thread, found none. Fix: run the check at once outside a capture.");
  active_capture->checks->push_back(std::move(check));
}

bool is_capturing(int device) {
  return active_capture && active_capture->device == device;
}

void fail_if_capturing(int device, const char* what) {
  KILN_CHECK(!is_capturing(device), "[cuda] ", what, " cannot be part of a CUDA graph: the host "
             "would wait for GPU work that only runs when the graph is replayed. Fix: run this "
             "work without a CUDA graph.");
}

void launch_host_func(const Stream& stream, std::function<void()> work) {
  const driver::Api& api = use_device(stream.device());
  if (is_capturing(stream.device())) {
    // A host node of the graph: it runs at every replay, so the graph keeps the work.
    HostWork kept = std::make_shared<std::function<void()>>(std::move(work));
    active_capture->host_work->push_back(kept);
    driver::check(api, api.cuLaunchHostFunc(native(stream), run_kept, kept.get()),
                  "cuLaunchHostFunc", "check nvidia-smi.");
    return;
  }
  auto* once = new std::function<void()>(std::move(work));
  const driver::CUresult r = api.cuLaunchHostFunc(native(stream), run_once, once);
  if (r != driver::kSuccess) delete once;
  driver::check(api, r, "cuLaunchHostFunc", "check nvidia-smi.");
}

}  // namespace kiln::cuda
