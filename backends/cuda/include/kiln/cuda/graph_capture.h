// CUDA graphs: the work one call queues, recorded once and replayed with one launch. A small
// model's call is dozens of kernel launches of a few microseconds each; replayed as a graph
// it is one launch, and the host is free at once.
//
//   kiln::cuda::CapturedGraph graph = kiln::cuda::CapturedGraph::capture(0, [&] {
//     out = run_model(static_input);  // queued, not run: every launch is recorded
//   });
//   graph.replay(kiln::cuda::current_stream(0));  // runs it: `out` now holds the result
//
// A graph bakes in every address its kernels touch, so the memory the work allocates must
// stay put between replays: the work runs on a stream of the graph's own, and the caching
// allocator keeps that stream's pool (its blocks, freed or not) for the graph until the
// graph is destroyed (CachingAllocator::keep_pool). Work that waits on the host (a
// synchronize, a copy back to the host) cannot be captured: the capture stops with
// kiln::Error naming the reason, and the stream is usable again. Checks that read a kernel's
// result back (the index checks' failure flags) wait until after each replay instead
// (defer_until_replayed).
#pragma once

#include <functional>
#include <memory>

#include "kiln/cuda/stream.h"

namespace kiln::cuda {

class CapturedGraph {
 public:
  // Runs `work` with a new stream of GPU `device` as this thread's current stream, recording
  // what it queues instead of running it, and instantiates the result. Throws kiln::Error when
  // the work cannot be captured (the first error the work raised, or the driver's), after
  // ending the capture and releasing what the work allocated.
  static CapturedGraph capture(int device, const std::function<void()>& work);

  CapturedGraph(CapturedGraph&&) noexcept;
  CapturedGraph& operator=(CapturedGraph&&) noexcept;
  // Waits for the graph's replays to finish, then returns its memory to the device.
  ~CapturedGraph();

  // Queues one run of the recorded work on `stream` (of the graph's GPU).
  void replay(const Stream& stream) const;
  // Runs the checks the work deferred (defer_until_replayed), in order, once the latest
  // replay has run: they wait for it, and throw the kernels' errors. Nothing when none.
  void check_after_replay() const;
  size_t deferred_checks() const;
  int device() const;

 private:
  struct State;
  explicit CapturedGraph(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// True while this thread is capturing work for a CUDA graph on GPU `device`. What cannot be
// captured (a host read of GPU data) checks it to fail with a clear reason.
bool is_capturing(int device = 0);

// Throws kiln::Error when this thread is capturing on GPU `device`: `what` ("reading a
// failure flag back") cannot be part of a CUDA graph.
void fail_if_capturing(int device, const char* what);

// While this thread captures: keeps `check` with the graph, which runs it after each replay
// (a failure flag's read). Throws kiln::Error when no capture is running.
void defer_until_replayed(std::function<void()> check);

// Runs `work` on the host in `stream`'s order (cuLaunchHostFunc): once the work queued on it
// before has run, and before what is queued after. Captured, it becomes part of the graph and
// runs at every replay (the graph keeps `work`). Test doubles of GPU kernels use it: the
// emulated generated kernels on the fake driver.
void launch_host_func(const Stream& stream, std::function<void()> work);

}  // namespace kiln::cuda
