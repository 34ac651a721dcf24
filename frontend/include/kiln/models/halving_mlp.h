// HalvingMLP: a small MLP whose forward ends in a loop on a tensor value,
//
//   while (abs(X).sum() > 1) X = X / 2;
//
// the standard example of data-dependent control flow. Eagerly it simply runs; compiled,
// each test of the condition reads a traced value on the host, which is a graph break (a
// GraphBreakError naming that line under fullgraph). HalvingMLPWhile computes exactly the
// same with kiln::while_loop and compiles to one graph. State paths: fc1.weight, fc2.weight
// (and biases), the same in both, so one's state dict loads into the other.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/models/config.h"
#include "kiln/nn/layers/activation.h"
#include "kiln/nn/layers/flatten.h"
#include "kiln/nn/layers/linear.h"
#include "kiln/nn/module.h"

namespace kiln::models {

struct HalvingMLPConfig {
  int64_t d_in = 784;
  int64_t d_hidden = 64;
  int64_t d_out = 10;
  template <class V>
  void fields(V& v) {
    v("d_in", d_in);
    v("d_hidden", d_hidden);
    v("d_out", d_out);
  }
};

// The same fields; a type of its own so that build() (and the catalog) make the
// while_loop variant from it.
struct HalvingMLPWhileConfig : HalvingMLPConfig {};

class HalvingMLP : public nn::Module {
 public:
  explicit HalvingMLP(const HalvingMLPConfig& config);
  // [N, d_in] (or anything that flattens to it) -> [N, d_out], halved until the sum of
  // absolute values is at most 1. The loop is a plain C++ while on a tensor.
  Tensor forward(const Tensor& x) override;

  HalvingMLPConfig config;
  nn::ModulePtr<nn::Flatten> flatten;
  nn::ModulePtr<nn::Linear> fc1;
  nn::ModulePtr<nn::ReLU> act;
  nn::ModulePtr<nn::Linear> fc2;

 protected:
  // Everything before the loop: flatten, fc1, ReLU, fc2.
  Tensor layers(const Tensor& x);
};

class HalvingMLPWhile : public HalvingMLP {
 public:
  explicit HalvingMLPWhile(const HalvingMLPConfig& config) : HalvingMLP(config) {}
  // HalvingMLP's forward with the loop written as kiln::while_loop.
  Tensor forward(const Tensor& x) override;
};

std::shared_ptr<HalvingMLP> build(const HalvingMLPConfig& config);
std::shared_ptr<HalvingMLPWhile> build(const HalvingMLPWhileConfig& config);

}  // namespace kiln::models
