// kiln::trace and kiln::compile: record a module's forward as an IR graph, and run a module
// through cached graphs guarded by what the trace assumed.
//
//   auto model = std::make_shared<Mlp>();
//   auto compiled = kiln::compile(model);            // callable like the model
//   Tensor y = compiled(x);                          // traces on the first call
//   kiln::explain(compiled).print(std::cout);        // graphs, guards, breaks, recompiles
//
// The rules of compiled forwards (docs/compile.md): the C++ body of forward runs when it is
// traced, not on every call; branches and loops on tensor values are graph breaks (the
// forward then runs as segments cut at each host read, re-executing its C++ body on every
// call) or, with fullgraph, a GraphBreakError naming the line; sizes, dtypes, devices, non-tensor
// arguments, grad mode and the module's state (structure, training flags, parameter
// identities) are guards, and a call that breaks one compiles a new graph, logged under
// KILN_LOG=recompiles with the reason.
#pragma once

#include <array>
#include <functional>
#include <iostream>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/log.h"
#include "kiln/nn/module.h"

namespace kiln {

struct CompileOptions {
  // A graph break (a host read of a traced value) throws GraphBreakError instead of
  // running that forward eagerly.
  bool fullgraph = false;
  // The registered backend (kiln/backends/backend.h) that compiles the graphs; an unknown
  // name is an error listing the registered ones. "cpu": the pass pipeline, then native
  // kernels for fusion groups (MLIR -> LLVM) and the eager kernels (GEMM library) for the
  // rest. "interp": the reference executor (each node through the eager op table). Empty:
  // "cpu" when kiln was built with its code generator, else "interp". Calls that need
  // gradients run on "interp" whichever backend is named (generated kernels have no
  // backward yet); explain says so.
  std::string backend{};
  // Graphs cached per compiled module; past it, calls that miss run eagerly (one warning),
  // or throw under fullgraph.
  int cache_limit = 8;
  // Symbolic sizes. Off: every size is static (a new size compiles a new graph). Auto: a
  // dim whose size changed between calls becomes symbolic from the next graph on, as do
  // dims marked with mark_dynamic. On: every input dim is symbolic from the first call.
  // Sizes 0 and 1 always stay static (broadcasting and squeeze treat them specially).
  enum class Dynamic { Off, Auto, On };
  Dynamic dynamic = Dynamic::Auto;
  // Names of the tensor arguments in logs and explain ("x" for one, input0.. otherwise).
  std::vector<std::string> input_names{};
  // Fold the parameters' current values into the compiled graph (the cpu backend, calls that
  // need no gradient): the passes evaluate what depends only on parameters once (a weight's
  // transpose, a scaled weight) instead of on every call. Each graph guards the version of
  // every parameter it froze, so a change in place (an optimizer step, load_state_dict)
  // recompiles and KILN_LOG=recompiles names the parameter. Writes through a raw data
  // pointer bump no version and are not seen. Buffers and graph-breaking forwards' segments
  // read their state live as without freeze.
  bool freeze = false;
};

// Compiles dim `dim` of graphs taking this tensor with a symbolic size (unless
// CompileOptions::dynamic is Off), so other sizes reuse the graph. Returns the tensor.
const Tensor& mark_dynamic(const Tensor& t, int64_t dim);

struct ExplainReport;

namespace detail {

#ifdef KILN_WITH_COMPILER
// Registers the backends of kiln's code generator ("cpu"). Programs linked with kiln::kiln
// are compiled with KILN_WITH_COMPILER: this reference pulls the registration out of the
// kiln_compiler library, so compile() finds "cpu" from the first call on. (kiln::eager
// alone has the reference executor, "interp".)
bool register_compiler_backends();
inline const bool compiler_backends_registered = register_compiler_backends();
#endif

// A non-tensor forward argument: its position in the call and its printed value.
struct StaticArg {
  size_t position = 0;
  std::string value;
  bool operator==(const StaticArg&) const = default;
};

// Runs the module's forward on these tensor arguments and flattens what it returns.
using ForwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
// The same as a reference to the caller's callable, not a copy: a compiled call builds one on
// every call, and unlike a std::function it never allocates. Valid while that callable lives.
class ForwardRef {
 public:
  template <class F>
    requires(!std::is_same_v<std::decay_t<F>, ForwardRef> &&
             std::is_invocable_r_v<std::vector<Tensor>, const F&, const std::vector<Tensor>&>)
  ForwardRef(const F& forward)  // NOLINT: converts from any callable, as std::function does
      : callable_(&forward), call_([](const void* f, const std::vector<Tensor>& tensors) {
          return (*static_cast<const F*>(f))(tensors);
        }) {}
  std::vector<Tensor> operator()(const std::vector<Tensor>& tensors) const {
    return call_(callable_, tensors);
  }

 private:
  const void* callable_;
  std::vector<Tensor> (*call_)(const void*, const std::vector<Tensor>&);
};

// The whole-forward graphs a core traced (not the segments of graph-breaking forwards), with
// the module state feeding them: by graph input, the live parameter or buffer (undefined for
// the other inputs). Export reads them.
struct TracedGraph {
  std::shared_ptr<const ir::Graph> graph;
  std::vector<Tensor> state;
};

// The compiled-module cache behind a CompiledModule (frontend/src/trace/compiled.cpp).
class CompiledCore {
 public:
  virtual ~CompiledCore() = default;
  // Runs the cached graph whose guards these arguments pass, tracing and compiling one on a
  // miss; `forward` runs the module's forward (traced, segmented or eagerly).
  virtual std::vector<Tensor> call(const std::vector<Tensor>& tensors,
                                   std::vector<StaticArg> static_args, ForwardRef forward) = 0;
  virtual ExplainReport explain() const = 0;
  virtual std::vector<TracedGraph> traced_graphs() const = 0;
};

std::shared_ptr<CompiledCore> make_compiled_core(std::shared_ptr<nn::Module> model,
                                                 CompileOptions options);
inline std::vector<Tensor> run_compiled(CompiledCore& core, const std::vector<Tensor>& tensors,
                                        std::vector<StaticArg> static_args, ForwardRef forward) {
  return core.call(tensors, std::move(static_args), forward);
}
ExplainReport explain_core(const CompiledCore& core);
inline std::vector<TracedGraph> traced_graphs(const CompiledCore& core) {
  return core.traced_graphs();
}
std::unique_ptr<ir::Graph> trace_module(nn::Module& model, const std::vector<Tensor>& inputs,
                                        ForwardRef forward);

template <class T>
inline constexpr bool is_tensor_arg_v = std::is_same_v<std::decay_t<T>, Tensor>;

// The value of a non-tensor argument, as guarded and printed ("true", "0.5", "\"mean\"").
template <class T>
std::string static_arg_str(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return "\"" + std::string(std::string_view(v)) + "\"";
  } else {
    static_assert(
        requires(std::ostream & os) { os << v; },
        "kiln::compile: a non-tensor forward argument must be printable (it is a "
        "guard: its value is baked into the graph)");
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
  }
}

template <class... Args>
void split_args(std::vector<Tensor>& tensors, std::vector<StaticArg>& statics,
                const Args&... args) {
  size_t position = 0;
  auto one = [&](const auto& a) {
    if constexpr (is_tensor_arg_v<decltype(a)>) {
      tensors.push_back(a);
    } else {
      statics.push_back({position, static_arg_str(a)});
    }
    ++position;
  };
  (one(args), ...);
}

// Argument K of a call with the tensors replaced from `ts` (in order of appearance).
template <size_t K, class... Args>
constexpr size_t tensors_before() {
  constexpr bool is_tensor[] = {is_tensor_arg_v<Args>..., false};
  size_t n = 0;
  for (size_t i = 0; i < K; ++i) n += is_tensor[i];
  return n;
}
template <size_t K, class... Args, class A>
decltype(auto) pick_arg(A&& a, const std::vector<Tensor>& ts) {
  if constexpr (is_tensor_arg_v<A>) {
    return static_cast<const Tensor&>(ts[tensors_before<K, Args...>()]);
  } else {
    return std::forward<A>(a);
  }
}

template <class Out>
Out rebuild_output(const std::vector<Tensor>& flat, size_t& i) {
  if constexpr (std::is_same_v<Out, Tensor>) {
    return flat.at(i++);
  } else if constexpr (std::is_same_v<Out, std::vector<Tensor>>) {
    Out out(flat.begin() + static_cast<std::ptrdiff_t>(i), flat.end());
    i = flat.size();
    return out;
  } else {
    return std::apply(
        [&](auto... proto) { return Out{rebuild_output<decltype(proto)>(flat, i)...}; }, Out{});
  }
}

}  // namespace detail

// A module run through cached graphs. Calls take the forward's arguments: tensors are
// graph inputs; other arguments are guards (their values are baked into the graph).
template <class M>
class CompiledModule {
 public:
  CompiledModule(std::shared_ptr<M> model, CompileOptions options)
      : model_(std::move(model)), core_(detail::make_compiled_core(model_, std::move(options))) {}

  // One call of the cache (detail::CompiledCore::call): on a hit it runs the cached graph,
  // and `forward` (a reference, built here) is not called.
  template <class... Args>
  auto operator()(Args&&... args) {
    using Out = std::decay_t<decltype(nn::call(*model_, std::forward<Args>(args)...))>;
    std::vector<Tensor> tensors;
    std::vector<detail::StaticArg> statics;
    detail::split_args(tensors, statics, args...);
    auto forward = [&](const std::vector<Tensor>& ts) {
      return [&]<size_t... K>(std::index_sequence<K...>) {
        auto out =
            nn::call(*model_, detail::pick_arg<K, Args...>(std::forward<Args>(args), ts)...);
        std::vector<Tensor> flat;
        nn::detail::collect_tensors(flat, out);
        return flat;
      }(std::index_sequence_for<Args...>{});
    };
    std::vector<Tensor> flat = core_->call(tensors, std::move(statics), forward);
    size_t i = 0;
    return detail::rebuild_output<Out>(flat, i);
  }

  M& module() const { return *model_; }
  detail::CompiledCore& core() const { return *core_; }

 private:
  std::shared_ptr<M> model_;
  std::shared_ptr<detail::CompiledCore> core_;
};

template <class M>
CompiledModule<M> compile(std::shared_ptr<M> model, CompileOptions options = {}) {
  static_assert(std::is_base_of_v<nn::Module, M>, "kiln::compile takes a module");
  return CompiledModule<M>(std::move(model), std::move(options));
}
template <class M>
CompiledModule<M> compile(const nn::ModulePtr<M>& model, CompileOptions options = {}) {
  return compile(std::shared_ptr<M>(model), std::move(options));
}

// The graph of one forward on these example arguments (tensors become graph inputs
// input0.., or x for a single one). Host reads of traced values throw GraphBreakError.
template <class M, class... Args>
std::unique_ptr<ir::Graph> trace(M& model, Args&&... args) {
  std::vector<Tensor> tensors;
  std::vector<detail::StaticArg> statics;
  detail::split_args(tensors, statics, args...);
  auto forward = [&](const std::vector<Tensor>& ts) {
    return [&]<size_t... K>(std::index_sequence<K...>) {
      auto out = nn::call(model, detail::pick_arg<K, Args...>(std::forward<Args>(args), ts)...);
      std::vector<Tensor> flat;
      nn::detail::collect_tensors(flat, out);
      return flat;
    }(std::index_sequence_for<Args...>{});
  };
  return detail::trace_module(model, tensors, forward);
}

// ---- explain ----

struct ExplainEntry {
  std::vector<std::string> guards;
  size_t ops = 0;                    // nodes in the graph (0 for an eager entry)
  std::string graph_text;            // the IR as traced (empty for an eager entry)
  std::string backend;               // which backend runs it and why (with its compile stats)
  std::string passes;                // per-pass timings (compiled backends)
  std::string optimized_graph_text;  // the IR after the passes, fusion groups included
  // One line per fusion group (a generated kernel): its ops and module, "add, relu @fc1".
  std::vector<std::string> fusion_groups;
  std::vector<std::string> captured;  // captured constants, one line each
  std::string graph_break;            // why this entry runs in segments ("" for one graph)
  std::vector<std::string> breaks;    // the host reads that end its segments (latest call)
  size_t segments = 0;                // segments per call (latest call)
  uint64_t segment_hits = 0, segment_misses = 0;  // the segment cache
  uint64_t native_segments = 0;  // segments compiled to native code (the others run on interp)
  double trace_ms = 0;
  // Trace time by module path ("" the root), slowest first.
  std::vector<std::pair<std::string, double>> trace_ms_by_module;
  uint64_t calls = 0;
};

struct ExplainReport {
  std::string model;
  std::string backend;
  std::vector<ExplainEntry> entries;
  std::vector<std::string> recompile_reasons;  // one line per recompile, in order
  uint64_t calls = 0, eager_calls = 0;
  size_t graph_count() const;
  size_t graph_break_count() const;
  void print(std::ostream& os) const;
  std::string str() const;
};

// What compile() did so far with this module. (The report is a value: keep it in a variable
// before iterating its members.)
template <class M>
ExplainReport explain(const CompiledModule<M>& compiled) {
  return detail::explain_core(compiled.core());
}

// Compiles `model` (default options), calls it once on these arguments, prints the report
// to `std::cout` and returns it: graphs and their IR, graph breaks with file:line and
// module path, guards, captured constants, trace times.
template <class M, class... Args>
ExplainReport explain(const std::shared_ptr<M>& model, Args&&... args) {
  CompiledModule<M> compiled = compile(model);
  compiled(std::forward<Args>(args)...);
  ExplainReport report = explain(compiled);
  report.print(std::cout);
  return report;
}

}  // namespace kiln
