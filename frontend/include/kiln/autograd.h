// Reverse-mode autodiff: grad mode guards, backward() and grad().
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kiln/autograd/node.h"
#include "kiln/tensor.h"

namespace kiln {

// Disables gradient recording on this thread for its scope (inference, optimizer steps).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Enables gradient recording for its scope (inside a NoGradGuard).
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

bool is_grad_enabled();

struct BackwardOptions {
  bool retain_graph = false;  // keep saved tensors for another backward
  bool create_graph = false;  // record the backward ops (higher-order gradients)
};

// Accumulates d(sum_i <tensors[i], grad_tensors[i]>)/d(leaf) into every leaf's .grad.
// A grad_tensors entry may be undefined for a one-element tensor (it means 1).
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              BackwardOptions options = {});

struct GradOptions {
  bool retain_graph = false;
  bool create_graph = false;
  bool allow_unused = false;  // an input the outputs do not depend on gets an undefined grad
};

// Returns d(sum_i <outputs[i], grad_outputs[i]>)/d(inputs[j]) without touching any .grad.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, GradOptions options = {});

// ---- hooks into a running backward ----

// Runs `hook(leaf)` every time a backward has accumulated a gradient into `leaf`'s .grad,
// as PyTorch's Tensor.register_post_accumulate_grad_hook: the moment a parameter's gradient
// is final for this backward (DistributedDataParallel starts its all-reduce there). The hook
// lives as long as the returned handle (or until remove()); the handle keeps the leaf's
// gradient accumulator alive so that every backward reaches the same hooks.
class GradHookHandle {
 public:
  GradHookHandle() = default;
  GradHookHandle(std::shared_ptr<autograd::AccumulateGrad> node, uint64_t id) : node_(std::move(node)), id_(id) {}
  GradHookHandle(GradHookHandle&& other) noexcept { *this = std::move(other); }
  GradHookHandle& operator=(GradHookHandle&& other) noexcept;
  GradHookHandle(const GradHookHandle&) = delete;
  GradHookHandle& operator=(const GradHookHandle&) = delete;
  ~GradHookHandle() { remove(); }
  void remove();  // idempotent

 private:
  std::shared_ptr<autograd::AccumulateGrad> node_;
  uint64_t id_ = 0;
};
[[nodiscard]] GradHookHandle register_post_accumulate_grad_hook(const Tensor& leaf,
                                                                std::function<void(const Tensor& leaf)> hook);

// Runs `callback` once, on this thread, when the backward() (or grad()) that is running now
// finishes its graph, before it returns; an exception it throws leaves that backward.
// Called outside a backward, it is an error.
void queue_backward_callback(std::function<void()> callback);
bool in_backward();  // a backward is running on this thread (e.g. inside a hook)

}  // namespace kiln
