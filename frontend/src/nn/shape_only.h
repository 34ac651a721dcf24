// The shape-only pass behind Module::build and nn::summary: a dispatch interceptor that runs
// each op's infer and returns tensors with a shape but no data. No kernel runs and no
// activation memory is allocated, so a {1 << 20, 784} input costs nothing; lazy layers
// still materialize (they suspend the interceptor while they initialize).
//
// While a pass runs on this thread:
// - reading a tensor's data (item(), to_vector(), data_ptr()) throws, naming the reader and
//   its source line: the SymbolicInfo of the pass's tensors refuses it, rather than a
//   concretization hook (that hook is global, and the pass is per thread);
// - in-place ops writing a tensor made in the pass only run their checks; writing a
//   parameter or buffer is refused by dispatch_into (the pass must not change the model);
// - gradient recording is off, and the module tree is in eval mode (each module's flag
//   is restored afterwards): BatchNorm uses and keeps its running statistics, Dropout
//   draws nothing from the generator. The lazy layers therefore draw exactly what a dry
//   run draws when no random op runs before them (e.g. a dry run in eval mode).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/dispatch.h"
#include "kiln/nn/module.h"

namespace kiln::nn::detail {

class ShapeOnlyInfo;

// Installs the pass on this thread for its lifetime (exception safe; nests, restoring the
// previous interceptor, grad mode and training flags). `who` ("Module::build",
// "nn::summary") names the pass in errors.
class ShapeOnlyScope {
 public:
  ShapeOnlyScope(Module& root, std::string who);
  ~ShapeOnlyScope();
  ShapeOnlyScope(const ShapeOnlyScope&) = delete;
  ShapeOnlyScope& operator=(const ShapeOnlyScope&) = delete;

  // A tensor of this pass: a shape, a dtype, no data.
  Tensor make_tensor(IntList shape, DType dtype, Device device = kCPU) const;

 private:
  class Interceptor;
  std::shared_ptr<ShapeOnlyInfo> info_;
  std::unique_ptr<Interceptor> interceptor_;
  DispatchInterceptor* previous_interceptor_;
  bool previous_grad_mode_;
  std::vector<std::pair<Module*, bool>> training_;  // every module's flag, root first
};

// True for a tensor made by a shape-only pass.
bool is_shape_only(const Tensor& t);

// Checks the shapes given to build()/summary() (one shape: single-tensor forwards only;
// -1 allowed in the leading dim alone) and returns them with -1 replaced by `batch`.
std::vector<Shape> resolve_input_shapes(const std::vector<Shape>& shapes, int64_t batch,
                                        const std::string& who);

// Runs model(x) once under a shape-only pass, x of `shape` (already resolved) and `dtype`.
Tensor run_shape_only(Module& model, const Shape& shape, DType dtype, const std::string& who);

}  // namespace kiln::nn::detail
