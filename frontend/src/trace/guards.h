// Guards: what a compiled graph assumed when it was traced. A cached graph is reused only
// while every guard still holds; on a miss, guard_failures() says which ones failed, old ->
// new, with the fix, for the one-line recompile log.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/compile.h"
#include "kiln/ir/graph.h"
#include "kiln/nn/module.h"

namespace kiln::detail {

struct TensorGuard {
  bool defined = false;
  DType dtype = DType::Float32;
  Shape shape;
  Device device;
  bool requires_grad = false;
  Shape strides;  // empty when contiguous (the trace's view-or-copy decisions depend on it)
  bool operator==(const TensorGuard&) const = default;
};
TensorGuard tensor_guard(const Tensor& t);

// One module, parameter or buffer of the tree, as the graph saw it.
struct StateGuard {
  std::string path;                // dotted path; "" for the root module
  char kind = 'm';                 // 'm' module, 'p' parameter, 'b' buffer
  const void* identity = nullptr;  // the module or the TensorImpl
  bool flag = false;               // training (modules), requires_grad (tensors)
  TensorGuard tensor;              // parameters and buffers
  bool operator==(const StateGuard&) const = default;
};

struct ModuleSignature {
  std::vector<StateGuard> entries;
  uint64_t hash = 0;
};
// Walks the tree (every path, shared entries included).
ModuleSignature module_signature(nn::Module& root);

struct GuardSet {
  // Symbolic dims hold sentinels (kiln/ir/symbols.h): any size >= 2 passes, equal symbols
  // must see equal sizes.
  std::vector<TensorGuard> inputs;
  bool symbolic = false;
  // The graph's bounds on its symbols (a slice of a static dim by a symbolic size).
  std::vector<ir::SizeBound> size_bounds;
  std::vector<StaticArg> static_args;  // non-tensor arguments
  bool grad_mode = true;
  // Shared: calls between two state changes hold the same object, so comparing an entry's
  // signature with the current one is a pointer comparison on the common path.
  std::shared_ptr<const ModuleSignature> module;
};
// True when both signatures describe the same module state (a pointer comparison when they
// are the same object).
bool same_module_state(const GuardSet& entry, const GuardSet& now);

// True when the per-call guards (inputs, static arguments, grad mode) hold.
bool call_guards_hold(const GuardSet& entry, const GuardSet& now);
// Every failing guard, one phrase each: "input x dim 0: 2 -> 4 (...)",
// "blocks.1 training: true -> false". `dynamic` is CompileOptions::dynamic (the fix for a
// changed size depends on it); `kept_static` has, by input, the dims a symbolic trace could
// not keep (no promise to make them dynamic).
std::vector<std::string> guard_failures(const GuardSet& entry, const GuardSet& now,
                                        CompileOptions::Dynamic dynamic,
                                        const std::vector<std::string>& input_names,
                                        const std::vector<uint64_t>& kept_static = {});
// The guards as lines, for explain and KILN_LOG=guards.
std::vector<std::string> describe_guards(const GuardSet& guards,
                                         const std::vector<std::string>& input_names);
// The names of a call's tensor arguments in logs: CompileOptions::input_names, else "x" for
// a single one and input0, input1, ... otherwise.
std::vector<std::string> input_names(const CompileOptions& options, size_t count);

}  // namespace kiln::detail
