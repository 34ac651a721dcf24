// Replaying a graph runner's calls as CUDA graphs (kiln/cuda/graph_capture.h): the first call
// with a new input signature runs as usual (it loads kernels and places constants), the second
// captures the call into a CUDA graph, and every later one is
//
//   copy each caller input into the graph's input buffer   (one copy per activation)
//   replay the graph                                        (one launch)
//   copy each output into a fresh tensor                    (one copy per output)
//
// so a model of dozens of kernels costs a handful of launches. Results are fresh tensors, as an
// uncaptured call's are: a later call never overwrites what an earlier one returned (where
// torch.compile's "reduce-overhead" hands out the graph's own buffers).
//
// The signature is each input's dtype and shape; parameters and buffers are read in place (an
// optimizer's in-place updates are seen), so theirs also includes their address and strides,
// and a parameter that moved is captured again. Up to kMaxGraphs signatures are captured; the
// rest run uncaptured. The kernels' own checks (an embedding's index range) are read back
// after each replay and throw as uncaptured. A call that cannot be captured (it reads GPU data
// on the host, say) turns replay off for the runner, and summary() says why.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kiln/cuda/graph_capture.h"
#include "kiln/cuda/stream.h"
#include "kiln/ir/graph.h"
#include "kiln/tensor.h"

namespace kiln::cuda::exec {

class GraphReplay {
 public:
  static constexpr size_t kMaxGraphs = 8;

  // Runs one uncaptured call: the inputs as the caller passes them to run().
  using RunCall = std::function<std::vector<Tensor>(std::span<const Tensor>)>;

  // For calls of `graph` (its inputs' kinds tell activations from parameters). Replay starts
  // off when the graph cannot be replayed (random ops that draw fresh numbers per call:
  // `fresh_random`; inputs other than GPU tensors), with the reason in summary().
  GraphReplay(const ir::Graph& graph, bool fresh_random);

  // One call, replayed when it can be (see above), else through `run_call`.
  std::vector<Tensor> run(std::span<const Tensor> inputs, const RunCall& run_call);

  // "replayed as a CUDA graph (1 captured, 5 replays; 3 launches per replay: 1 input copy, the
  // graph, 1 output copy)", "graph replay off: <reason>", or "" before the first capture.
  std::string summary() const;
  // False once replay is off.
  bool enabled() const;
  // How many calls were replays.
  uint64_t replays() const;

 private:
  struct Signature {
    std::vector<int64_t> key;  // dtype, rank, sizes per input; address and strides of params
    bool operator<(const Signature& other) const { return key < other.key; }
  };
  struct Captured {
    std::vector<Tensor> static_inputs;  // activations' buffers; params: the caller's tensors
    std::vector<Tensor> static_outputs;
    std::unique_ptr<CapturedGraph> graph;  // destroyed first: the outputs go back to its pool
    Stream last_stream = Stream::default_stream();
    Event done;  // after the output copies of the latest replay
    ~Captured();
  };

  Signature signature_of(std::span<const Tensor> inputs) const;
  // Turns replay off with `reason` (the first line of it); returns false.
  bool turn_off(const std::string& reason);
  std::vector<Tensor> replay(Captured& c, std::span<const Tensor> inputs);

  std::vector<bool> activation_;  // by input: copied in each call (else read in place)
  std::string graph_name_;
  mutable std::mutex mutex_;
  std::string off_reason_;
  std::map<Signature, bool> warmed_up_;  // signatures that ran once uncaptured
  std::map<Signature, std::unique_ptr<Captured>> captured_;
  uint64_t replays_ = 0;
  size_t copies_in_ = 0, copies_out_ = 0;  // of the latest replay
};

}  // namespace kiln::cuda::exec
