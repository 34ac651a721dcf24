// Replaying calls as CUDA graphs (graph_replay.h): warm up, capture, then copy in, replay,
// copy out.
#include "kiln/cuda/exec/graph_replay.h"

#include <utility>

#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/ops/view.h"

namespace kiln::cuda::exec {

namespace {

// The first line of an error message: the part explain has room for.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The first node of `graph` or its regions that draws random numbers, or null.
const ir::Node* first_random_node(const ir::Graph& graph) {
  for (const auto& node : graph.nodes()) {
    if (node->op->random) return node.get();
    for (const auto& region : node->regions)
      if (const ir::Node* inner = first_random_node(*region)) return inner;
  }
  return nullptr;
}

// `dst` (dense, the same shape and dtype) gets `src`'s elements, queued on `stream`: one
// memcpy when `src` is dense too, else the eager strided copy (clone's kernel).
void copy_into(Tensor& dst, const Tensor& src, const Stream& stream) {
  if (src.is_contiguous())
    copy_on_device_async(dst.raw_data(), src.raw_data(), src.nbytes(), stream);
  else
    dispatch_into(ops::clone, TensorSpan(&src, 1), no_attrs(), dst);
}

}  // namespace

GraphReplay::Captured::~Captured() {
  static_outputs.clear();  // back to the graph's pool, which the graph releases
  graph.reset();
}

GraphReplay::GraphReplay(const ir::Graph& graph, bool fresh_random) : graph_name_(graph.name()) {
  for (const ir::GraphInput& in : graph.inputs()) {
    activation_.push_back(in.kind == ir::InputKind::Input);
    if (in.value->type.device.is_cpu() && in.kind != ir::InputKind::Constant)
      turn_off(detail::str_cat("input \"", in.name, "\" is on the cpu"));
  }
  if (!fresh_random) return;
  if (const ir::Node* random = first_random_node(graph))
    turn_off(detail::str_cat(random->op->name, " draws new random numbers each call, which a "
                             "replay would repeat"));
}

bool GraphReplay::turn_off(const std::string& reason) {
  if (off_reason_.empty()) off_reason_ = first_line(reason);
  captured_.clear();
  return false;
}

bool GraphReplay::enabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return off_reason_.empty();
}

uint64_t GraphReplay::replays() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return replays_;
}

GraphReplay::Signature GraphReplay::signature_of(std::span<const Tensor> inputs) const {
  Signature s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) {
      s.key.push_back(-1);
      continue;
    }
    s.key.push_back(static_cast<int64_t>(t.dtype()));
    s.key.push_back(t.device().index);
    s.key.push_back(t.dim());
    for (int64_t size : t.sizes()) s.key.push_back(size);
    if (i < activation_.size() && activation_[i]) continue;
    // Read in place: the graph has its address and layout baked in.
    s.key.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.raw_data())));
    for (int64_t stride : t.strides()) s.key.push_back(stride);
  }
  return s;
}

std::vector<Tensor> GraphReplay::run(std::span<const Tensor> inputs, const RunCall& run_call) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!off_reason_.empty()) {
    lock.unlock();
    return run_call(inputs);
  }
  int device = -1;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (!t.device().is_cuda()) {
      turn_off(detail::str_cat("an input is on the ", t.device().str()));
      lock.unlock();
      return run_call(inputs);
    }
    device = t.device().index;
  }
  if (device < 0) {
    turn_off("no input is on a GPU");
    lock.unlock();
    return run_call(inputs);
  }
  const Signature signature = signature_of(inputs);
  if (auto it = captured_.find(signature); it != captured_.end()) return replay(*it->second, inputs);
  // The first call of a signature runs as usual: it loads the kernels and places the
  // constants, neither of which a capture may do.
  if (captured_.size() >= kMaxGraphs || warmed_up_.emplace(signature, true).second) {
    lock.unlock();
    return run_call(inputs);
  }
  auto captured = std::make_unique<Captured>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const bool copied = t.defined() && i < activation_.size() && activation_[i];
    captured->static_inputs.push_back(copied ? Tensor::empty(t.sizes(), t.dtype(), t.device()) : t);
  }
  try {
    captured->graph = std::make_unique<CapturedGraph>(CapturedGraph::capture(
        device, [&] { captured->static_outputs = run_call(captured->static_inputs); }));
  } catch (const Error& e) {
    turn_off(e.what());
    lock.unlock();
    return run_call(inputs);
  }
  for (const Tensor& out : captured->static_outputs)
    if (out.defined() && !out.device().is_cuda()) {
      // Computed on the host while capturing: a replay would not recompute it.
      turn_off(detail::str_cat("an output is on the ", out.device().str()));
      lock.unlock();
      return run_call(inputs);
    }
  Captured& entry = *captured;
  captured_.emplace(signature, std::move(captured));
  return replay(entry, inputs);
}

std::vector<Tensor> GraphReplay::replay(Captured& c, std::span<const Tensor> inputs) {
  const Stream stream = current_stream(c.graph->device());
  // The buffers are shared by every replay: one queued on another stream must be done first.
  if (!(stream == c.last_stream)) c.done.block(stream);
  size_t copies_in = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || i >= activation_.size() || !activation_[i]) continue;
    copy_into(c.static_inputs[i], inputs[i], stream);
    ++copies_in;
  }
  c.graph->replay(stream);
  std::vector<Tensor> out;
  for (const Tensor& o : c.static_outputs) {
    if (!o.defined()) {
      out.emplace_back();
      continue;
    }
    Tensor fresh = Tensor::empty(o.sizes(), o.dtype(), o.device());
    copy_into(fresh, o, stream);
    out.push_back(std::move(fresh));
  }
  c.done.record(stream);
  c.last_stream = stream;
  ++replays_;  // under the caller's lock
  copies_in_ = copies_in;
  copies_out_ = out.size();
  // The kernels' checks (index ranges, targets), read back once the replay has run: a wait,
  // as an uncaptured call has; a bad index throws its op's error here.
  c.graph->check_after_replay();
  return out;
}

std::string GraphReplay::summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!off_reason_.empty()) return "graph replay off: " + off_reason_;
  if (captured_.empty()) return "";
  auto copies = [](size_t n, const char* what) {
    return detail::str_cat(n, " ", what, n == 1 ? " copy" : " copies");
  };
  return detail::str_cat("replayed as a CUDA graph (", captured_.size(), " captured, ",
                         replays_, replays_ == 1 ? " replay; " : " replays; ",
                         copies_in_ + 1 + copies_out_, " launches per replay: ",
                         copies(copies_in_, "input"), ", the graph, ",
                         copies(copies_out_, "output"), ")");
}

}  // namespace kiln::cuda::exec
