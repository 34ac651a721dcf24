// The backward engine. Algorithm: count, for every node reachable from the roots, how
// many edges lead into it; then run nodes in a max-heap on sequence number (a node made
// later runs earlier), each only once all its gradients have arrived, summing gradients
// that reach the same slot. grad() runs only the nodes on paths to its inputs and
// captures the gradients flowing into their edges instead of accumulating .grad.
#include <algorithm>
#include <atomic>
#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd.h"
#include "kiln/dispatch.h"
#include "kiln/tensor_ops/elementwise.h"
#include "kiln/tensor_ops/factory.h"

namespace kiln {

NoGradGuard::NoGradGuard() : previous_(grad_mode_enabled()) { set_grad_mode(false); }
NoGradGuard::~NoGradGuard() { set_grad_mode(previous_); }
EnableGradGuard::EnableGradGuard() : previous_(grad_mode_enabled()) { set_grad_mode(true); }
EnableGradGuard::~EnableGradGuard() { set_grad_mode(previous_); }
bool is_grad_enabled() { return grad_mode_enabled(); }

namespace autograd {
namespace {

struct Capture {
  Node* node;
  uint32_t slot;
  size_t index;  // position in grad()'s inputs
};

struct CompareSeq {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

Tensor accumulate(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a + b;
}

// Runs the graph from `roots` (with `root_grads`). With captures, only nodes leading to a
// captured edge run and the captured gradients are returned.
std::vector<Tensor> run_backward(const std::vector<Edge>& roots, const Tensors& root_grads,
                                 const std::vector<Capture>& captures, bool keep_graph,
                                 bool create_graph, size_t num_captures) {
  // 1. Dependencies (edges into each node) over the reachable graph.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const Edge& e : roots) {
    if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  std::vector<Node*> order;  // every reachable node
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      ++deps[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  // 2. With captures, a node is needed if it is captured or leads to a needed node.
  std::unordered_set<Node*> needed;
  std::unordered_map<Node*, std::vector<const Capture*>> captures_at;
  for (const Capture& c : captures) captures_at[c.node].push_back(&c);
  if (!captures.empty()) {
    // Reverse topological order: sort by sequence number ascending (producers first)...
    // sequence numbers increase along forward edges, so scanning in ascending order sees
    // every node after the nodes it points to.
    std::vector<Node*> by_seq = order;
    std::sort(by_seq.begin(), by_seq.end(), [](Node* a, Node* b) { return a->sequence_nr < b->sequence_nr; });
    for (Node* n : by_seq) {
      bool need = captures_at.count(n) > 0;
      for (const Edge& e : n->next_edges)
        if (e.valid() && needed.count(e.node.get())) need = true;
      if (need) needed.insert(n);
    }
  }

  // 3. Run.
  std::unordered_map<Node*, Tensors> buffers;
  auto buffer_of = [&](Node* n) -> Tensors& {
    auto it = buffers.find(n);
    if (it == buffers.end()) it = buffers.emplace(n, Tensors(n->output_types.size())).first;
    return it->second;
  };
  std::priority_queue<Node*, std::vector<Node*>, CompareSeq> ready;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep_alive;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].valid()) continue;
    Tensors& buf = buffer_of(roots[i].node.get());
    buf[roots[i].input_nr] = accumulate(buf[roots[i].input_nr], root_grads[i]);
    keep_alive[roots[i].node.get()] = roots[i].node;
  }
  for (const Edge& e : roots)
    if (e.valid() && deps[e.node.get()] == 0 && !buffers[e.node.get()].empty()) {
      deps[e.node.get()] = -1;  // queued
      ready.push(e.node.get());
    }

  std::vector<Tensor> captured(num_captures);
  bool previous_mode = grad_mode_enabled();
  set_grad_mode(create_graph);
  try {
    while (!ready.empty()) {
      Node* n = ready.top();
      ready.pop();
      Tensors grads = std::move(buffer_of(n));
      buffers.erase(n);
      for (size_t slot = 0; slot < n->retained.size() && captures.empty(); ++slot) {
        auto impl = n->retained[slot].lock();
        if (!impl || !grads[slot].defined()) continue;
        Tensor holder(impl);
        Tensor g = create_graph ? grads[slot] : grads[slot].detach();
        holder.set_grad(holder.grad().defined() ? holder.grad() + g : g);
      }
      auto cap = captures_at.find(n);
      if (cap != captures_at.end())
        for (const Capture* c : cap->second) captured[c->index] = accumulate(captured[c->index], grads[c->slot]);
      bool run = captures.empty() ? true : (needed.count(n) > 0 && !dynamic_cast<AccumulateGrad*>(n));
      bool any_grad = std::any_of(grads.begin(), grads.end(), [](const Tensor& t) { return t.defined(); });
      Tensors out;
      if (run && any_grad) {
        out = n->apply(std::move(grads));
        if (!keep_graph) n->release();
      }
      for (size_t i = 0; i < n->next_edges.size(); ++i) {
        const Edge& e = n->next_edges[i];
        if (!e.valid()) continue;
        Node* next = e.node.get();
        keep_alive[next] = e.node;
        if (i < out.size() && out[i].defined()) {
          Tensors& buf = buffer_of(next);
          buf[e.input_nr] = accumulate(buf[e.input_nr], out[i]);
        }
        if (--deps[next] == 0) {
          if (!captures.empty() && !needed.count(next)) continue;
          ready.push(next);
        }
      }
    }
  } catch (...) {
    set_grad_mode(previous_mode);
    throw;
  }
  set_grad_mode(previous_mode);
  return captured;
}

Tensors root_gradients(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                       const char* fn) {
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "kiln::", fn, ": got ",
             outputs.size(), " tensors but ", grad_outputs.size(), " gradients; pass one per tensor.");
  Tensors grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    KILN_CHECK(t.defined(), "kiln::", fn, ": tensor ", i, " is undefined.");
    KILN_CHECK(t.requires_grad(), "kiln::", fn, ": tensor ", i, " (", t.type_str(), ") does not require grad "
               "and has no grad_fn, so there is nothing to differentiate. Fix: make sure some input has "
               "requires_grad_(true) and that it was not computed under NoGradGuard or from detach().");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      KILN_CHECK(t.numel() == 1, "kiln::", fn, ": tensor ", i, " has shape ", shape_str(t.sizes()),
                 "; a gradient can be implied only for a tensor with one element. Fix: pass a gradient of "
                 "the same shape (e.g. kiln::ones_like(t)) or reduce it first (t.sum()).");
      g = ones_like(t);
    } else {
      KILN_CHECK(Shape(g.sizes()) == Shape(t.sizes()), "kiln::", fn, ": the gradient for tensor ", i, " has shape ",
                 shape_str(g.sizes()), " but the tensor has shape ", shape_str(t.sizes()), ".");
    }
    grads.push_back(g);
  }
  return grads;
}

// Callbacks queued by queue_backward_callback, one list per backward running on this
// thread (a hook may start a nested backward).
thread_local std::vector<std::vector<std::function<void()>>> backward_callbacks;

// Runs `body` (one backward) with a fresh callback list, then that list's callbacks.
template <class Body>
auto with_backward_callbacks(Body&& body) {
  backward_callbacks.emplace_back();
  struct Pop {
    ~Pop() { backward_callbacks.pop_back(); }
  } pop;
  auto result = body();
  // A callback may queue another one: run until the list is empty.
  for (size_t i = 0; i < backward_callbacks.back().size(); ++i) {
    std::function<void()> callback = std::move(backward_callbacks.back()[i]);
    callback();
  }
  return result;
}

}  // namespace
}  // namespace autograd

GradHookHandle& GradHookHandle::operator=(GradHookHandle&& other) noexcept {
  if (this != &other) {
    remove();
    node_ = std::move(other.node_);
    id_ = other.id_;
    other.node_.reset();
  }
  return *this;
}

void GradHookHandle::remove() {
  if (!node_) return;
  auto& hooks = node_->post_hooks;
  hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.id == id_; }), hooks.end());
  node_.reset();
}

GradHookHandle register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor&)> hook) {
  KILN_CHECK(leaf.defined() && leaf.requires_grad() && leaf.is_leaf(), "register_post_accumulate_grad_hook: "
             "expected a leaf tensor that requires grad (a parameter), got ",
             leaf.defined() ? leaf.type_str() : std::string("an undefined tensor"),
             leaf.defined() && !leaf.requires_grad() ? " that does not require grad" : "",
             leaf.defined() && leaf.requires_grad() && !leaf.is_leaf() ? " computed by an op (not a leaf)" : "",
             ". Fix: register it on the parameter itself.");
  KILN_CHECK(hook, "register_post_accumulate_grad_hook: the hook is empty.");
  auto node = std::dynamic_pointer_cast<autograd::AccumulateGrad>(autograd::gradient_edge(leaf).node);
  KILN_CHECK(node, "register_post_accumulate_grad_hook: ", leaf.type_str(), " has no gradient accumulator.");
  static std::atomic<uint64_t> next_id{1};
  uint64_t id = next_id++;
  node->post_hooks.push_back({id, std::move(hook)});
  return GradHookHandle(std::move(node), id);
}

void queue_backward_callback(std::function<void()> callback) {
  KILN_CHECK(!autograd::backward_callbacks.empty(), "queue_backward_callback: no backward is running on this "
             "thread. Fix: call it from a gradient hook, while backward() runs.");
  autograd::backward_callbacks.back().push_back(std::move(callback));
}

bool in_backward() { return !autograd::backward_callbacks.empty(); }

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors, BackwardOptions options) {
  Tensors grads = autograd::root_gradients(tensors, grad_tensors, "backward");
  std::vector<autograd::Edge> roots;
  for (const Tensor& t : tensors) roots.push_back(autograd::gradient_edge(t));
  autograd::with_backward_callbacks([&] {
    return autograd::run_backward(roots, grads, {}, options.retain_graph || options.create_graph,
                                  options.create_graph, 0);
  });
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, GradOptions options) {
  Tensors grads = autograd::root_gradients(outputs, grad_outputs, "grad");
  std::vector<autograd::Edge> roots;
  for (const Tensor& t : outputs) roots.push_back(autograd::gradient_edge(t));
  std::vector<autograd::Capture> captures;
  std::vector<autograd::Edge> keep;  // accumulators created here must live through the run
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "kiln::grad: input ", i,
               " does not require grad. Fix: call requires_grad_(true) on it before computing the outputs.");
    autograd::Edge e = autograd::gradient_edge(inputs[i]);
    keep.push_back(e);
    captures.push_back({e.node.get(), e.input_nr, i});
  }
  std::vector<Tensor> result = autograd::with_backward_callbacks([&] {
    return autograd::run_backward(roots, grads, captures, options.retain_graph || options.create_graph,
                                  options.create_graph, inputs.size());
  });
  for (size_t i = 0; i < result.size(); ++i)
    KILN_CHECK(result[i].defined() || options.allow_unused, "kiln::grad: input ", i, " (", inputs[i].type_str(),
               ") was not used to compute the outputs. Fix: pass GradOptions{.allow_unused = true} to get an "
               "undefined gradient for it.");
  return result;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  kiln::backward({*this}, {gradient}, BackwardOptions{retain_graph, create_graph});
}

}  // namespace kiln
