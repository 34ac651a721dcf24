// Module::build: materializes lazy layers from input shapes alone (Keras's build), with one
// shape-only forward (shape_only.h). Single-tensor forwards (operator()) only for now: a
// model whose forward takes several inputs is materialized with a real dry run.
//
// The pass runs the tree in eval mode (flags restored afterwards), so BatchNorm statistics
// stay as they are and Dropout draws nothing: the lazy layers get exactly the values a dry
// run with the same generator state gives when no random op runs before them (any dry run
// in eval mode). Lazy layers that forward does not call stay uninitialized.
#include "kiln/nn/module.h"
#include "shape_only.h"

namespace kiln::nn {

// -1 in the leading dim becomes a batch of 1: the lazy layers' shapes never depend on it,
// and the pass allocates nothing whatever the batch.
Module& Module::build(const std::vector<Shape>& input_shapes, DType dtype) {
  const std::string who = "Module::build";
  std::vector<Shape> shapes = detail::resolve_input_shapes(input_shapes, 1, who);
  detail::run_shape_only(*this, shapes[0], dtype, who);
  return *this;
}

}  // namespace kiln::nn
