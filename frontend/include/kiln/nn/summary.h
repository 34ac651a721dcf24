// kiln::nn::summary: a Keras-style table of a model (one row per module call: path, type,
// output shape, parameter count) and its totals, computed by one shape-only forward: no
// kernel runs and no activation memory is allocated, whatever the input size. Lazy layers
// are materialized by that pass (as Keras's summary builds the model), drawing what a dry
// run would (see Module::build).
//
//   std::cout << kiln::nn::summary(model, {{-1, 784}});
//
//   Model: "Mlp"
//   ______________________________________________
//    Layer (type)       Output Shape      Param #
//   ==============================================
//    fc1 (Linear)       [-1, 256]         200,960
//    ...
//   Total params: 203,530 (795.04 KB)
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

struct SummaryRow {
  std::string path;  // dotted path in the model ("blocks.0.up"); "" for the root
  std::string type;  // type_name() after the call (a materialized LazyLinear is a "Linear")
  // One shape per tensor output; -1 marks dims that follow a batch given as -1.
  std::vector<Shape> output_shapes;
  int64_t params = 0;     // elements of the module's own parameters (not its children's)
  bool trainable = true;  // every own parameter requires grad
};

struct Summary {
  std::string model_type;
  // Modules in the order their calls began; a module called twice has two rows. The root
  // is left out unless it has no children or owns parameters itself.
  std::vector<SummaryRow> rows;
  // Over the model's parameters, each tensor once (tied or shared parameters count once).
  int64_t total_params = 0;
  int64_t trainable_params = 0;      // requires_grad
  int64_t non_trainable_params = 0;  // frozen
  int64_t param_bytes = 0;
  int64_t trainable_param_bytes = 0;
  int64_t buffer_elements = 0;  // every buffer (running statistics, ...), each tensor once
  int64_t buffer_bytes = 0;
  // Parameters still uninitialized after the pass (lazy layers that forward never called);
  // they are left out of the totals.
  int64_t uninitialized_params = 0;

  std::string to_string() const;
};

std::ostream& operator<<(std::ostream& os, const Summary& summary);

// Runs `model` on inputs of `input_shapes` (one shape: single-tensor forwards only; -1 in
// the leading dim means any batch) without computing anything, and tabulates it. With a -1
// batch the shape-only pass runs twice (batch 1, then 2) to tell the dims that follow the
// batch from fixed ones; lazy layers materialize in the first.
Summary summary(Module& model, const std::vector<Shape>& input_shapes,
                DType dtype = DType::Float32);

}  // namespace kiln::nn
