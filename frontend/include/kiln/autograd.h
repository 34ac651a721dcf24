// Reverse-mode autodiff: grad mode guards, backward() and grad().
#pragma once

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

}  // namespace kiln
