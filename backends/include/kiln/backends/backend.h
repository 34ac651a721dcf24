// The one interface every compiled backend implements, and the registry compile() finds
// them in by name ("interp", "cpu"; next "cuda").
//
//   const backends::Backend& cpu = backends::backend("cpu");  // unknown: lists the known
//   std::unique_ptr<backends::Executable> exe = cpu.compile(graph, {});
//   std::vector<Tensor> out = exe->run(inputs);
//
// A backend says why it refuses a graph, answers what the fuse pass may group for it
// (passes::FusionRules), and compiles a graph into an Executable. Which backend runs a call
// that needs gradients is decided once, by choose_backend below: the layers above never
// spell the rule out themselves.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/passes/fusion_rules.h"

namespace kiln::backends {

// What compile() asks of a backend besides the graph. Backends without passes ignore the
// pipeline fields.
struct CompileRequest {
  std::string pipeline{};      // the pass pipeline; empty: passes::default_pipeline()
  bool verify_passes = false;  // ir::verify after every pass (tests; KILN_VERIFY_PASSES=1)
  std::string print_after{};   // see passes::PipelineOptions
  std::function<void(std::string_view pass, const std::string& ir_text)> print_sink{};
  // By graph input: the data of a Parameter input to fold as a constant (CompileOptions::
  // freeze), or undefined. The caller guards that the data does not change.
  std::vector<Tensor> frozen_state{};
  // The graph is a segment of a graph-breaking forward, recorded again on every call: its
  // random ops replay the stream positions that call's forward drew.
  bool replay_recorded_random = false;
};

// A compiled graph, ready to run.
class Executable {
 public:
  virtual ~Executable() = default;
  // One tensor per graph input, in order (constants may be passed undefined); one per
  // output. Safe to call from several threads.
  virtual std::vector<Tensor> run(std::span<const Tensor> inputs) = 0;
  // Whether calls from several threads run at the same time (false: run serializes them),
  // so a caller need not hold its own lock around run.
  virtual bool runs_concurrently() const = 0;
  // The graph as the backend runs it: after its passes, fusion groups as `fused` nodes.
  virtual const ir::Graph& optimized_graph() const = 0;
  // One line on what compiling did, for explain ("passes 0.4 ms, codegen 62 ms, ...");
  // empty when there is nothing to say.
  virtual std::string summary() const = 0;
  // The pass timings ("canonicalize 0.1 ms, ..."); empty when no pass ran.
  virtual std::string pass_timings() const = 0;
  // Whether the passes folded data of CompileRequest::frozen_state: the caller must then
  // guard that it does not change.
  virtual bool folded_frozen_state() const { return false; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // One line for listings and errors: "native code through MLIR and LLVM".
  virtual std::string_view summary() const = 0;
  // Whether the executables' runs record autograd, so that backward works through them.
  virtual bool records_gradients() const = 0;
  // Why this backend cannot run `graph` (a device it does not drive, ...), or nothing.
  virtual std::optional<std::string> refusal(const ir::Graph& graph) const = 0;
  // What the fuse pass may group for this backend; null: it runs no generated kernels.
  virtual const passes::FusionRules* fusion_rules() const = 0;
  virtual std::unique_ptr<Executable> compile(std::shared_ptr<const ir::Graph> graph,
                                              const CompileRequest& request) const = 0;
};

// Adds a backend under its name. Throws kiln::Error when the name is taken.
void register_backend(std::unique_ptr<Backend> backend);
// The backend of that name, or null.
const Backend* find_backend(std::string_view name);
// The backend of that name. Throws kiln::Error naming the registered ones (and the closest
// spelling) when there is none.
const Backend& backend(std::string_view name);
// The registered backends' names, in the order they were registered.
std::vector<std::string> backend_names();

// The backend compile() uses for CPU tensors when CompileOptions::backend is empty: "cpu" when
// this build has it (kiln built with its code generator), else the reference executor.
const Backend& default_backend();

// The reference executor ("interp"): runs every graph, records gradients. Registered by
// kiln_interp; throws when it is not.
const Backend& reference_backend();

// Which backend runs a graph, and why when it is not the one asked for.
struct Choice {
  const Backend* backend = nullptr;
  std::string note;  // empty when it is the requested backend
};
// The rule, written once: the requested backend runs the graph unless it refuses it, or the
// call needs gradients (`grad_source` says why: "parameter fc.weight requires grad") and its
// executables record none; the reference backend runs it then, and the note says why and
// how to get the requested one back. `requested` null (CompileOptions::backend empty): "cpu"
// or "cuda", whichever is registered and accepts the graph (CPU tensors, GPU tensors), else
// default_backend().
Choice choose_backend(const Backend* requested, const ir::Graph& graph,
                      std::string_view grad_source);

}  // namespace kiln::backends
