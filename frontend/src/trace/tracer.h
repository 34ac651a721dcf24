// The tracer: a dispatch interceptor that records every op a forward runs into an IR graph.
// Inputs become symbolic tensors; the module's parameters and buffers become named graph
// inputs the first time an op reads them; any other concrete tensor an op reads becomes a
// captured constant (listed, since it will not follow to() or be saved). In-place writes
// into registered buffers are recorded as new values and returned as extra graph outputs,
// which the caller writes back after each compiled call.
//
// In segmented mode (a forward with a graph break, compiled without fullgraph) the tracer
// records lazily instead: ops on concrete tensors are collected into a pending segment, and
// a host read of a pending value runs the segment (through a cache keyed by structural
// hash) and turns its live results into concrete tensors, so the C++ forward continues
// with real values.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/backends/backend.h"
#include "kiln/dispatch.h"
#include "kiln/ir/graph.h"
#include "kiln/nn/module.h"

namespace kiln::detail {

class Tracer;

// A concrete tensor a trace read that is not part of the module's state.
struct CapturedConstant {
  std::string name;         // the graph input's label ("const0")
  std::string module_path;  // where forward read it
  std::string op;           // the op that read it
  ir::Location loc;
  std::string type;  // "float32[3]"
  bool requires_grad = false;
};

// The prefix of graph outputs that carry a buffer's new value ("buffer:bn.running_mean").
inline constexpr std::string_view kBufferOutputPrefix = "buffer:";

// Segments compiled so far, by structural hash (shared by the calls of one cache entry).
struct SegmentCache {
  // The backend segments are compiled for (null: each segment's default); backends::
  // choose_backend picks the reference executor for a segment whose run needs gradients.
  const backends::Backend* backend = nullptr;
  // By structural hash and whether the requested backend runs it.
  std::unordered_map<uint64_t, std::unique_ptr<backends::Executable>> executables;
  uint64_t hits = 0, misses = 0;
  uint64_t native_misses = 0;  // of the misses, compiled by a backend other than interp
};

// One host read that ended a segment.
struct GraphBreak {
  std::string what;  // "item()"
  ir::Location loc;
  std::string module_path;
};

class Tracer final : public DispatchInterceptor {
 public:
  enum class Mode { Trace, Segmented };
  // Starts recording ops of this thread (the tracer is installed until finish() or
  // destruction). Trace: a host read of a traced value throws GraphBreakError. Segmented:
  // it runs the pending segment through `segments`.
  Tracer(nn::Module& root, std::string graph_name, Mode mode = Mode::Trace,
         SegmentCache* segments = nullptr);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // A symbolic stand-in for `example` as graph input `name`, with `shape` (the example's,
  // or one holding symbolic sizes).
  Tensor add_input(const Tensor& example, const std::string& name, const Shape& shape);
  // Marks a forward result as a graph output (a concrete result becomes a constant).
  void add_output(const Tensor& result);
  // Uninstalls the tracer, appends the buffer write-back outputs and returns the graph.
  std::unique_ptr<ir::Graph> finish();

  const std::vector<CapturedConstant>& captured() const { return captured_; }
  // Milliseconds spent per module path while recording (from one recorded op to the next,
  // charged to the module of the later one: its C++ code and the tracer's own work).
  const std::map<std::string, double>& module_ms() const { return module_ms_; }

  // ---- DispatchInterceptor ----
  Tensors intercept(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                    TensorTypes&& output_types) override;
  bool intercept_into(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                      const Tensor& self) override;

  // ---- control flow (kiln::cond, while_loop, fori_loop, scan) ----
  // Starts recording a region body; returns its arguments as traced tensors. Ops recorded
  // until end_region go into the region; outer values it reads become captures.
  std::vector<Tensor> begin_region(const std::vector<ir::Type>& arg_types);
  struct Region {
    std::unique_ptr<ir::Graph> graph;
    std::vector<ir::Value*> captured;  // outer values, one per capture input (after the args)
    size_t num_args = 0;
  };
  // Ends the innermost region with these results (the region's outputs).
  Region end_region(const std::vector<Tensor>& results);
  // Drops the innermost region (an exception left the body).
  void abandon_region();
  // Records a control-flow node: `operands`, then the captures of all regions (each region
  // takes every capture, in one order), with one output per entry of `output_types`.
  Tensors record_control_flow(const OpDef& op, const Attrs& attrs,
                              const std::vector<Tensor>& operands, std::vector<Region> regions,
                              const std::vector<ir::Type>& output_types);
  // `result` came from slicing a static dim of `max` by the symbolic end `size`
  // (`pos[:, :x.size(1)]`): the graph holds while size <= max (ir::SizeBound, which names
  // the op that made `result`).
  void bound_size(const Tensor& result, int64_t size, int64_t max);
  // The type a traced or concrete tensor has in the graph being recorded.
  static ir::Type type_of(const Tensor& t);

  // A traced value was read on the host (item(), bool, data_ptr, printing).
  void on_concretize(const ir::Value* value, const char* what, SourceLoc loc);

  // Refuses to record more than `max_nodes` ops (regions included): a trace with symbolic
  // sizes sees a placeholder size above 100000, so a host loop over x.size(d) would record
  // that many steps before the twin trace could tell the sizes apart.
  void limit_nodes(size_t max_nodes) { max_nodes_ = max_nodes; }
  static constexpr const char* kTooManyNodes = "[trace] more ops than a symbolic trace allows";

  // ---- segmented mode ----
  // Runs what is pending (the forward's results are alive, so they become concrete) and
  // uninstalls the tracer.
  void finish_segments();
  const std::vector<GraphBreak>& breaks() const { return breaks_; }
  size_t segments_run() const { return segments_run_; }

  struct State;  // shared with the traced tensors, which outlive the tracer

 private:
  struct StateSlot {
    std::string path;
    ir::InputKind kind;
  };

  struct Frame {
    ir::Graph* graph = nullptr;
    std::unique_ptr<ir::Node> holder;  // owns the region until the node exists
    std::unordered_map<const ir::Value*, ir::Value*> lifted;  // outer value -> capture input
    std::vector<ir::Value*> captured;
    size_t num_args = 0;
  };

  ir::Graph* current_graph() const { return frames_.back().graph; }
  // v as seen from frame `frame`: itself, or a capture input lifted through each region.
  ir::Value* visible(ir::Value* v, size_t frame, const OpDef& op);
  ir::Value* value_of(const Tensor& t, const OpDef& op);
  ir::Value* capture(const Tensor& t, const OpDef& op);
  // `strides` empty: contiguous. Views keep the strides eager would give them, so the
  // frontend makes the same view-or-copy decisions (reshape, contiguous) as eagerly.
  Tensor make_traced(ir::Value* value, const Shape& strides = {}, bool is_view = false);
  // The strides each output of view op `op` would have (its kernel only computes metadata).
  std::vector<Shape> view_strides(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                                  const TensorTypes& types);
  ir::Node* record(const OpDef& op, const Attrs& attrs, TensorSpan inputs,
                   const std::vector<ir::Type>& types);
  void uninstall();
  void flush();          // segmented mode: runs the pending segment
  void reset_segment();  // a fresh pending graph
  void bind(const std::shared_ptr<TensorImpl>& impl, ir::Value* value);

  nn::Module& root_;
  std::shared_ptr<State> state_;
  std::unique_ptr<ir::Graph> graph_;
  DispatchInterceptor* previous_ = nullptr;
  bool installed_ = false;
  bool traced_grad_mode_ = true;  // grad mode when the trace began
  std::unordered_map<const TensorImpl*, StateSlot> state_slots_;
  std::unordered_map<std::string, Tensor> buffers_by_path_;
  // Concrete tensors already in the graph (parameters, buffers, constants).
  std::unordered_map<const TensorImpl*, ir::Value*> concrete_values_;
  std::vector<std::pair<std::string, ir::Value*>> buffer_writes_;  // path -> latest value
  std::vector<Tensor> keep_alive_;  // captured tensors stay valid while the graph lives
  std::vector<std::shared_ptr<TensorImpl>> shadowed_buffers_;  // written: traced until the end
  std::vector<CapturedConstant> captured_;
  std::map<std::string, double> module_ms_;
  std::chrono::steady_clock::time_point last_record_ = std::chrono::steady_clock::now();
  std::vector<bool> from_input_;  // by value id: depends on a user input
  std::vector<Frame> frames_;     // the root graph, then the regions being recorded
  std::unordered_map<const ir::Value*, const ir::Graph*> owner_;  // where each value lives
  int constants_ = 0;
  Mode mode_;
  SegmentCache* segments_;
  std::vector<Tensor> feeds_;  // segmented mode: the tensor behind each graph input
  std::vector<std::pair<ir::Value*, std::weak_ptr<TensorImpl>>> pending_;  // lazy results
  std::vector<std::shared_ptr<SymbolicInfo>> retired_;  // kept alive past a flush
  std::vector<GraphBreak> breaks_;
  size_t segments_run_ = 0;
  size_t max_nodes_ = 0;  // 0: no limit
  size_t recorded_ = 0;
};

}  // namespace kiln::detail
