// Autograd graph nodes. A node is created for each differentiable op call that touches a
// tensor requiring grad; its edges point at the nodes that produced the op's inputs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/op.h"

namespace kiln::autograd {

class Node;

// Where a gradient goes: input slot `input_nr` of `node` (the producer's output index).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node() = default;
  // grads[i] is the gradient of forward output i (undefined if none arrived); returns
  // one gradient per next edge.
  virtual Tensors apply(Tensors&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors (after a backward without retain_graph).
  virtual void release() {}

  std::vector<Edge> next_edges;
  TensorTypes output_types;  // the forward outputs this node receives gradients for
  uint64_t sequence_nr = 0;  // creation order: later nodes run first
  // Non-leaf tensors that asked for .grad (retain_grad()), by output slot.
  std::vector<std::weak_ptr<TensorImpl>> retained;
};

// A tensor an op's vjp needs later, with the version it had when saved.
class SavedTensor {
 public:
  SavedTensor() = default;
  // `is_output`: the tensor is an output of `owner`; it is stored without its grad_fn to
  // avoid a reference cycle, and reattached when unpacked.
  SavedTensor(const Tensor& t, bool is_output);
  Tensor unpack(const std::shared_ptr<Node>& owner, const char* op, size_t index, bool is_input) const;
  bool defined() const { return data_.defined(); }
  void reset() { data_ = Tensor(); }

 private:
  Tensor data_;
  uint64_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool requires_grad_ = false;
};

// The node of an op in the table: runs the op's vjp.
class OpNode final : public Node {
 public:
  OpNode(const OpDef& op, std::unique_ptr<Attrs> attrs) : op_(op), attrs_(std::move(attrs)) {}
  Tensors apply(Tensors&& grads) override;
  std::string name() const override;
  void release() override;

  const OpDef& op() const { return op_; }
  std::vector<SavedTensor> saved_inputs, saved_outputs;
  TensorTypes input_types;
  uint64_t needs_input_grad = 0;

 private:
  const OpDef& op_;
  std::unique_ptr<Attrs> attrs_;
  bool released_ = false;
};

// Accumulates incoming gradients into a leaf's .grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  Tensors apply(Tensors&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

  // Run after each accumulation into the leaf's .grad (register_post_accumulate_grad_hook).
  struct PostHook {
    uint64_t id;
    std::function<void(const Tensor& leaf)> fn;
  };
  std::vector<PostHook> post_hooks;

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// The edge a gradient for `t` flows into (its grad_fn, or the accumulator of a leaf).
Edge gradient_edge(const Tensor& t);

}  // namespace kiln::autograd
