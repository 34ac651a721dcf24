// OpDef: the single definition of an operation. The runtime declares each op's identity,
// schema, attribute type, shape/dtype inference and lowering class; backends fill the
// kernel slots and the frontend fills the vjp slot when they register. Eager execution,
// autograd, tracing and lowering all read the same entry.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/attrs.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/scalar_body.h"
#include "kiln/shape.h"
#include "kiln/small_vector.h"
#include "kiln/tensor.h"

namespace kiln {

using Tensors = SmallVector<Tensor, 2>;
using TensorSpan = std::span<const Tensor>;

// What an op produces, before any memory exists.
struct TensorType {
  DType dtype = DType::Float32;
  Shape shape;
  Device device;
};
using TensorTypes = SmallVector<TensorType, 2>;

// How the compiler lowers an op.
enum class LoweringClass : uint8_t {
  Elementwise,  // a scalar body applied per element (with broadcasting)
  Reduction,    // reduces dims of one input
  Contraction,  // matmul/conv: a library call with a fusable epilogue
  View,         // metadata only: aliases its input
  Layout,       // moves data (cat, gather, pad, ...)
  Random,       // draws from a generator; never CSE'd or folded
  Composite,    // several of the above in one kernel (softmax, layer_norm, conv2d)
  ControlFlow,  // has regions
  Fused,        // a fusion group made by the compiler: one region run as one kernel
  Opaque,       // runs through the eager kernel
};
const char* lowering_class_name(LoweringClass c);

struct OpDef;

struct InferCall {
  const OpDef& op;
  TensorSpan inputs;
  const Attrs& attrs;
  TensorTypes& outputs;  // infer appends one entry per output
};

struct KernelCall {
  const OpDef& op;
  TensorSpan inputs;
  const Attrs& attrs;
  std::span<Tensor> outputs;  // preallocated contiguous, unless op.kernel_makes_outputs
  const TensorTypes& output_types;
};

struct VjpCall {
  const OpDef& op;
  TensorSpan inputs;           // saved inputs (undefined where the op does not save them)
  std::span<const TensorType> input_types;  // always present: every input's type
  TensorSpan outputs;          // saved outputs (likewise)
  const Attrs& attrs;
  TensorSpan grad_outputs;     // undefined where an output received no gradient
  uint64_t needs_input_grad;   // bit i: input i needs a gradient
  bool needs(size_t i) const { return (needs_input_grad >> i) & 1; }
};

using InferFn = void (*)(InferCall&);
using KernelFn = void (*)(KernelCall&);
using VjpFn = Tensors (*)(const VjpCall&);  // one entry per input (undefined = none)
// Draws a fresh position in the op's random stream into its attributes, as the eager call
// would (dropout's seed/offset). A compiled graph calls it before every run.
using ReseedFn = void (*)(Attrs& attrs, TensorSpan inputs);
// Gives back the stream positions `attrs` reserved, when they are still the generator's
// latest: a trace records the op without running it, so its draw must not count.
using ReturnDrawFn = void (*)(const Attrs& attrs, TensorSpan inputs);

// How closely an elementwise op's scalar body (the fused kernel) matches its eager CPU kernel.
enum class Numerics : uint8_t {
  Exact,        // bit for bit
  Approximate,  // the eager kernel uses other math (Eigen's vectorized exp, tanh, sqrt, ...):
                // equal within a few ulp, not bit for bit
};

// What sets an op apart from the defaults, given where the op is defined. Designated
// initializers name only what differs: {.scalar_body = bodies::exp, .numerics = Approximate}.
struct OpTraits {
  // Elementwise ops: what the op computes per element, for fused kernels (scalar_body.h);
  // fusion skips ops without one.
  ScalarBodyFn scalar_body = nullptr;
  Numerics numerics = Numerics::Exact;
  bool differentiable = true;  // false: integer/boolean results, no gradient flows
  bool random = false;         // reads the generator
  bool side_effects = false;   // does more than compute (prints): never removed or merged
  // Inputs through which no gradient ever flows (indices, masks, conditions).
  uint64_t nondiff_inputs = 0;
  // Bit i: the CPU kernel accepts an undefined output i and then does not compute it; the
  // planned executor passes one when nothing reads that value (max_pool2d's indices in
  // inference).
  uint64_t optional_outputs = 0;
  // Views and other ops that only touch metadata (or copy through other ops): one kernel for
  // every device, set by the runtime instead of each backend.
  KernelFn every_device_kernel = nullptr;
  bool kernel_makes_outputs = false;  // views: the kernel makes outputs that alias inputs
};

struct OpDef {
  OpDef(std::string name, std::vector<std::string> inputs, InferFn infer, LoweringClass lowering,
        const Attrs& attrs_prototype = no_attrs(), const OpTraits& traits = {});
  // An op without attributes whose traits differ from the defaults.
  OpDef(std::string name, std::vector<std::string> inputs, InferFn infer, LoweringClass lowering,
        const OpTraits& traits)
      : OpDef(std::move(name), std::move(inputs), infer, lowering, no_attrs(), traits) {}

  // ---- set where the op is defined, and fixed from then on ----
  const std::string name;
  const std::vector<std::string> input_names;  // a trailing "..." means variadic
  const InferFn infer;
  const LoweringClass lowering;
  // A default-constructed instance of the op's attribute struct: the IR parser clones it
  // and fills the fields it reads, and the tracer checks calls pass this type.
  const Attrs* const attrs_prototype;
  const ScalarBodyFn scalar_body;
  const Numerics numerics;
  const bool differentiable;
  const bool random;
  const bool side_effects;
  const uint64_t nondiff_inputs;
  const uint64_t optional_outputs;
  const bool kernel_makes_outputs;

  // ---- filled by backends and the frontend at registration ----
  std::array<KernelFn, kNumDeviceTypes> kernels{};
  // The vjp and what it reads, set together by the frontend (frontend/src/call.h, set_vjp).
  VjpFn vjp = nullptr;
  uint64_t saves_inputs = ~0ull;  // bit i: the vjp reads input i
  uint64_t saves_outputs = 0;     // bit i: the vjp reads output i
  ReseedFn reseed = nullptr;  // ops whose attributes hold a random-stream position
  ReturnDrawFn return_draw = nullptr;

  bool variadic() const { return !input_names.empty() && input_names.back() == "..."; }
};

// The prototype to pass to OpDef for attribute struct A.
template <class A>
const Attrs& attrs_of() {
  static const A prototype{};
  return prototype;
}

// Every op defined in the runtime, in definition order (for table-driven tests).
std::span<OpDef* const> all_ops();
OpDef* find_op(std::string_view name);

}  // namespace kiln
