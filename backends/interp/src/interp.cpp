// The reference executor: an environment of tensors indexed by value id, filled in node
// order by eager dispatch; control-flow nodes run their regions recursively.
#include "kiln/interp/interp.h"

#include "kiln/dispatch.h"
#include "kiln/error.h"
#include "kiln/ir/symbol_binding.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/fused.h"
#include "kiln/ops/layout.h"
#include "kiln/ops/view.h"

namespace kiln::interp {

struct Executable::RunState {
  std::vector<int64_t> symbols;  // runtime value of each symbol
  bool reseed = false;
};

namespace {

void max_value_id(const ir::Graph& g, int& top) {
  for (const ir::GraphInput& in : g.inputs()) top = std::max(top, in.value->id);
  for (const auto& node : g.nodes()) {
    for (const ir::Value* v : node->outputs) top = std::max(top, v->id);
    for (const auto& region : node->regions) max_value_id(*region, top);
  }
}

std::string node_where(const ir::Node& node) {
  std::string where = node.module_path.empty() ? "" : " in module '" + node.module_path + "'";
  if (node.loc.known()) where += " (" + ir::location_str(node.loc) + ")";
  return where;
}

void find_symbolic_attrs(const ir::Graph& g, std::unordered_set<const ir::Node*>& out) {
  for (const auto& node : g.nodes()) {
    if (ir::attrs_hold_symbols(*node->attrs)) out.insert(node.get());
    for (const auto& region : node->regions) find_symbolic_attrs(*region, out);
  }
}

// For `g` and each of its regions: by node, the values to let go of after it runs (see
// Executable::released_after_). Regions are closed (they read only their own inputs), so a
// node's reads are its operands.
void find_releases(const ir::Graph& g,
                   std::unordered_map<const ir::Graph*, std::vector<std::vector<int>>>& out) {
  std::unordered_map<int, size_t> last_reader;  // value id -> node index
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const ir::Value* v : nodes[i]->inputs)
      if (v) last_reader[v->id] = i;
    for (const ir::Value* v : nodes[i]->outputs) last_reader.emplace(v->id, i);  // never read
    for (const auto& region : nodes[i]->regions) find_releases(*region, out);
  }
  for (const ir::GraphOutput& o : g.outputs()) last_reader.erase(o.value->id);
  std::vector<std::vector<int>>& released = out[&g];
  released.resize(nodes.size());
  for (const auto& [id, node] : last_reader) released[node].push_back(id);
}

bool truth(const Tensor& t, const ir::Node& node) {
  KILN_CHECK(t.numel() == 1, "[interp] ", node.op->name, node_where(node),
             ": the loop condition has ", t.numel(), " elements; expected one.");
  return t.item<bool>();
}

}  // namespace

Executable::Executable(std::shared_ptr<const ir::Graph> graph) : graph_(std::move(graph)) {
  KILN_CHECK(graph_ != nullptr, "[interp] expected a graph, got null.");
  int top = -1;
  max_value_id(*graph_, top);
  value_count_ = top + 1;
  symbol_sources_ = ir::symbol_sources(*graph_, "[interp]");
  find_symbolic_attrs(*graph_, symbolic_attrs_);
  find_releases(*graph_, released_after_);
}

std::vector<Tensor> Executable::run(std::span<const Tensor> inputs) {
  const auto& graph_inputs = graph_->inputs();
  KILN_CHECK(inputs.size() == graph_inputs.size(), "[interp] graph ", graph_->name(), " expected ",
             graph_inputs.size(), " inputs, got ", inputs.size(), ".");
  RunState state;
  ir::SymbolValues values = ir::bind_symbols(symbol_sources_, inputs);
  ir::check_input_types(*graph_, inputs, values, "[interp]");
  state.symbols.assign(values.begin(), values.end());
  state.reseed = !replay_recorded_random_;
  return run_graph(*graph_, inputs, state);
}

std::vector<Tensor> Executable::run_graph(const ir::Graph& g, std::span<const Tensor> inputs,
                                          RunState& state) {
  std::vector<Tensor> env(static_cast<size_t>(value_count_));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::GraphInput& in = g.inputs()[i];
    bool own_constant = in.kind == ir::InputKind::Constant && !inputs[i].defined();
    env[in.value->id] = own_constant ? in.constant : inputs[i];
  }
  std::vector<Tensor> args;
  const std::vector<std::vector<int>>& released_after = released_after_.at(&g);
  for (size_t index = 0; index < g.nodes().size(); ++index) {
    const auto& node = g.nodes()[index];
    // At the end of this iteration, however it ends: the values no later node reads.
    struct Release {
      std::vector<Tensor>& env;
      const std::vector<int>& ids;
      ~Release() {
        for (int id : ids) env[id] = Tensor();
      }
    } release{env, released_after[index]};
    args.clear();
    for (const ir::Value* v : node->inputs) args.push_back(v ? env[v->id] : Tensor());
    if (!node->regions.empty()) {
      std::vector<Tensor> out(node->outputs.size());
      run_control_flow(*node, args, out, state);
      for (size_t k = 0; k < out.size(); ++k) env[node->outputs[k]->id] = std::move(out[k]);
      continue;
    }
    const Attrs* attrs = node->attrs.get();
    std::unique_ptr<Attrs> fresh;
    bool symbolic = symbolic_attrs_.count(node.get()) > 0;
    bool reseed = state.reseed && node->op->reseed;
    if (symbolic || reseed) {
      fresh = attrs->clone();
      if (symbolic)
        fresh->map_ints([&](int64_t v) { return ir::substitute_size(v, state.symbols); });
      if (reseed) node->op->reseed(*fresh, TensorSpan(args.data(), args.size()));
      attrs = fresh.get();
    }
    Tensors out = dispatch(*node->op, TensorSpan(args.data(), args.size()), *attrs);
    KILN_CHECK(out.size() == node->outputs.size(), "[interp] ", node->op->name, node_where(*node),
               " returned ", out.size(), " outputs; the graph has ", node->outputs.size(), ".");
    for (size_t k = 0; k < out.size(); ++k) env[node->outputs[k]->id] = std::move(out[k]);
  }
  std::vector<Tensor> results;
  results.reserve(g.outputs().size());
  for (const ir::GraphOutput& o : g.outputs()) results.push_back(env[o.value->id]);
  return results;
}

void Executable::run_control_flow(const ir::Node& node, std::span<const Tensor> args,
                                  std::span<Tensor> outputs, RunState& state) {
  const OpDef* op = node.op;
  auto run_region = [&](size_t r, const std::vector<Tensor>& in) {
    return run_graph(*node.regions.at(r), in, state);
  };
  auto assign = [&](const std::vector<Tensor>& values) {
    for (size_t k = 0; k < outputs.size(); ++k) outputs[k] = values[k];
  };
  if (op == &ops::fused) {  // a fusion group means what its ops mean, run one by one
    if (fused_runner_)
      fused_runner_(node, args, state.symbols, outputs);
    else
      assign(run_region(0, std::vector<Tensor>(args.begin(), args.end())));
    return;
  }
  if (op == &ops::cond) {
    std::vector<Tensor> operands(args.begin() + 1, args.end());
    assign(run_region(truth(args[0], node) ? 0 : 1, operands));
    return;
  }
  if (op == &ops::while_loop) {
    size_t n = static_cast<const ops::WhileLoopAttrs&>(*node.attrs).num_carry;
    std::vector<Tensor> state_args(args.begin(), args.end());  // carry, then captures
    while (truth(run_region(0, state_args).at(0), node)) {
      std::vector<Tensor> next = run_region(1, state_args);
      std::copy(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(n), state_args.begin());
    }
    assign(state_args);
    return;
  }
  if (op == &ops::fori_loop) {
    const auto& a = static_cast<const ops::ForiLoopAttrs&>(*node.attrs);
    std::vector<Tensor> body_args{Tensor()};
    body_args.insert(body_args.end(), args.begin(), args.end());
    for (int64_t i = a.lower; i < a.upper; ++i) {
      body_args[0] = Tensor::scalar(i, kInt64);
      std::vector<Tensor> next = run_region(0, body_args);
      std::copy(next.begin(), next.begin() + a.num_carry, body_args.begin() + 1);
    }
    assign(std::vector<Tensor>(body_args.begin() + 1, body_args.end()));
    return;
  }
  if (op == &ops::scan) {
    const auto& a = static_cast<const ops::ScanAttrs&>(*node.attrs);
    size_t nc = static_cast<size_t>(a.num_carry), nx = static_cast<size_t>(a.num_xs);
    int64_t length = ir::substitute_size(a.length, state.symbols);
    std::vector<Tensor> body_args(args.begin(), args.end());  // carry, x slices, captures
    std::vector<Tensor> xs(args.begin() + static_cast<std::ptrdiff_t>(nc),
                           args.begin() + static_cast<std::ptrdiff_t>(nc + nx));
    std::vector<std::vector<Tensor>> ys(outputs.size() - nc,
                                        std::vector<Tensor>(static_cast<size_t>(length)));
    // Every step's slice from one unbind per xs entry: autograd then stacks their gradients
    // once, where a select per step would give each step a full-size gradient.
    std::vector<Tensors> steps;
    for (size_t j = 0; j < nx; ++j) steps.push_back(dispatch(ops::unbind, TensorSpan(&xs[j], 1), ops::DimAttrs{}));
    for (int64_t step = 0; step < length; ++step) {
      const int64_t t = a.reverse ? length - 1 - step : step;
      for (size_t j = 0; j < nx; ++j) body_args[nc + j] = steps[j][static_cast<size_t>(t)];
      std::vector<Tensor> next = run_region(0, body_args);
      std::copy(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(nc), body_args.begin());
      for (size_t k = 0; k < ys.size(); ++k) ys[k][static_cast<size_t>(t)] = next[nc + k];
    }
    for (size_t k = 0; k < nc; ++k) outputs[k] = body_args[k];
    // Each ys entry is the stack of its slices, made through the op table so autograd sees it.
    ops::DimAttrs dim0;
    for (size_t k = 0; k < ys.size(); ++k) {
      std::vector<Tensor> rows;
      for (const Tensor& y : ys[k])
        rows.push_back(dispatch1(ops::unsqueeze, TensorSpan(&y, 1), dim0));
      outputs[nc + k] = dispatch1(ops::cat, TensorSpan(rows.data(), rows.size()), dim0);
    }
    return;
  }
  KILN_FAIL("[interp] ", op->name, node_where(node),
            " has regions but is not a control-flow "
            "op the reference executor knows.");
}

}  // namespace kiln::interp
