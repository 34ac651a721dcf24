// Tracing a compiled module's forward for a cache entry: with the symbolic sizes the dynamic
// plan asks for where the graph holds for every size (two traces that must agree), else with
// the leading dims alone, else with static sizes; and the one-off trace behind kiln::trace.
#include <map>

#include "compile_cache.h"
#include "kiln/ir/symbol_binding.h"
#include "kiln/ir/symbols.h"

namespace kiln::detail {

// Far above any model's graph, far below the placeholder sizes' step counts.
constexpr size_t kSymbolicTraceMaxNodes = 50000;

std::unique_ptr<ir::Graph> trace_with(nn::Module& model, const std::vector<Tensor>& inputs,
                                      ForwardRef forward,
                                      std::vector<CapturedConstant>* captured,
                                      const std::vector<Shape>& shapes,
                                      std::vector<bool>* defined_outputs,
                                      const std::vector<std::string>& names,
                                      std::map<std::string, double>* module_ms) {
  Tracer tracer(model, model.type_name());
  // A symbolic trace of a host loop over a dynamic size would run the loop for the
  // placeholder size (above 100000 steps): stop it early and fall back to static sizes.
  if (!shapes.empty()) tracer.limit_nodes(kSymbolicTraceMaxNodes);
  std::vector<Tensor> symbolic;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      symbolic.emplace_back();
      continue;
    }
    Shape shape = i < shapes.size() ? shapes[i] : Shape(inputs[i].sizes());
    symbolic.push_back(tracer.add_input(inputs[i], names.at(i), shape));
  }
  std::vector<Tensor> outputs = forward(symbolic);
  if (defined_outputs) defined_outputs->clear();
  for (const Tensor& t : outputs) {
    if (defined_outputs) defined_outputs->push_back(t.defined());
    if (t.defined()) tracer.add_output(t);
  }
  std::unique_ptr<ir::Graph> graph = tracer.finish();
  ir::verify(*graph);
  for (const CapturedConstant& c : tracer.captured()) {
    if (!c.requires_grad) continue;
    log_warning(
        str_cat("[compile] ", model.type_name(), ": ", c.op, " in ",
                c.module_path.empty() ? "the root module" : "module '" + c.module_path + "'",
                c.loc.known() ? " at " + ir::location_str(c.loc) : "", " reads a ", c.type,
                " tensor that requires grad but is not a registered parameter: "
                "the graph holds it as a constant, so it will never be trained. Fix: "
                "register it with register_parameter."));
  }
  if (captured) *captured = tracer.captured();
  if (module_ms) *module_ms = tracer.module_ms();
  return graph;
}

namespace {

// The plan with only each input's leading dim (the batch) left symbolic.
SymbolPlan leading_dims_only(SymbolPlan plan) {
  bool changed = false;
  for (auto& dims : plan.symbols) {
    for (size_t d = 1; d < dims.size(); ++d) {
      changed |= dims[d] >= 0;
      dims[d] = -1;
    }
  }
  bool any = false;
  for (const auto& dims : plan.symbols) any |= !dims.empty() && dims[0] >= 0;
  if (!changed || !any) return SymbolPlan();
  return plan;
}

// Why this call's sizes break a size bound of `graph` (traced with `plan`), if they do.
std::optional<std::string> broken_bound(const ir::Graph& graph, const std::vector<Tensor>& tensors,
                                        const SymbolPlan& plan) {
  ir::SymbolValues values{};
  for (size_t i = 0; i < tensors.size(); ++i)
    for (size_t d = 0; d < plan.symbols[i].size(); ++d)
      if (plan.symbols[i][d] >= 0)
        values[static_cast<size_t>(plan.symbols[i][d])] = tensors[i].size(static_cast<int64_t>(d));
  for (const ir::SizeBound& b : graph.size_bounds()) {
    int64_t v = ir::substitute_size(b.size, values);
    if (v > b.max)
      return str_cat(b.where(), " holds for ", ir::format_size(b.size), " <= ", b.max,
                     " and this call has ", v);
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<ir::Graph> CompileCache::trace_entry(Entry& entry,
                                                     const std::vector<Tensor>& tensors,
                                                     ForwardRef forward, SymbolPlan& plan) {
  std::vector<std::string> names = input_names(options_, tensors.size());
  // Try the requested symbolic dims, then the leading dims alone, then static sizes.
  while (plan.any()) {
    // Trace with each sentinel set; the graph holds for every size only if both agree.
    std::vector<Shape> main, alternate;
    for (size_t i = 0; i < tensors.size(); ++i) {
      bool defined = tensors[i].defined();
      main.push_back(defined ? traced_shape(tensors[i], plan.symbols[i], false) : Shape());
      alternate.push_back(defined ? traced_shape(tensors[i], plan.symbols[i], true) : Shape());
    }
    std::string why;
    try {
      auto graph = trace_with(*model_, tensors, forward, &entry.captured, main,
                              &entry.defined_outputs, names, &entry.module_ms);
      auto twin = trace_with(*model_, tensors, forward, nullptr, alternate, nullptr, names);
      translate_alternate(*twin);
      std::optional<std::string> diff = first_difference(*graph, *twin);
      if (!diff) {
        std::optional<std::string> broken = broken_bound(*graph, tensors, plan);
        if (!broken) return graph;
        // Only this call is too large for the symbolic graph: trace it with its own sizes and
        // keep the dims dynamic for the calls the graph covers.
        log_line(LogChannel::Recompiles,
                 str_cat(model_->type_name(), ": this call compiled with static sizes: ", *broken));
        plan = SymbolPlan();
        break;
      }
      why = *diff +
            " uses a dynamic size in a way a symbolic size cannot express (a sum, a "
            "quotient or a host comparison of sizes)";
    } catch (const GraphBreakError&) {
      throw;
    } catch (const Error& e) {
      // The message quotes sentinel numbers: name only the op that refused them.
      std::string msg = e.what();
      if (msg.rfind(Tracer::kTooManyNodes, 0) == 0) {
        why = str_cat("tracing with symbolic sizes recorded more than ", kSymbolicTraceMaxNodes,
                      " ops: a host loop over a dynamic size (for t < x.size(d)) unrolls once "
                      "per step; kiln::scan or kiln::fori_loop keep such a loop in one graph");
      } else {
        size_t close = msg.find(']');
        std::string op = msg.rfind('[', 0) == 0 && close != std::string::npos
                             ? " in " + msg.substr(0, close + 1)
                             : "";
        why = "tracing with symbolic sizes failed" + op +
              " (a size check there needs the size's value: a layer's feature dim, or host "
              "arithmetic on x.size(d))";
      }
    }
    SymbolPlan next = leading_dims_only(plan);
    // Remember: later sizes do not retry the dims that just failed.
    forced_static_.resize(tensors.size(), 0);
    for (size_t i = 0; i < plan.symbols.size(); ++i)
      for (size_t d = 0; d < plan.symbols[i].size() && d < 64; ++d)
        if (plan.symbols[i][d] >= 0 && (next.symbols.empty() || next.symbols[i][d] < 0))
          forced_static_[i] |= 1ull << d;
    log_line(LogChannel::Recompiles,
             str_cat(model_->type_name(),
                     next.any() ? ": dims after the leading one compiled as static sizes: "
                                : ": dynamic dims compiled as static sizes: ",
                     why));
    plan = std::move(next);
  }
  return trace_with(*model_, tensors, forward, &entry.captured, {}, &entry.defined_outputs, names,
                    &entry.module_ms);
}

std::unique_ptr<ir::Graph> trace_module(nn::Module& model, const std::vector<Tensor>& inputs,
                                        ForwardRef forward) {
  return trace_with(model, inputs, forward, nullptr, {}, nullptr,
                    input_names(CompileOptions{}, inputs.size()));
}

}  // namespace kiln::detail
