// The tracer's control-flow support: recording region bodies, lifting the outer values
// they read into explicit captures, and the region node itself.
#include <algorithm>

#include "kiln/error.h"
#include "traced_value.h"
#include "user_location.h"

namespace kiln::detail {

ir::Type Tracer::type_of(const Tensor& t) {
  if (const TracedValue* info = traced_info(t)) return info->value()->type;
  return ir::Type::of(t);
}

ir::Value* Tracer::visible(ir::Value* v, size_t frame, const OpDef& op) {
  const ir::Graph* owner = owner_[v];
  if (owner == frames_[frame].graph) return v;
  KILN_CHECK(frame > 0, "[trace] ", op.name,
             " uses a tensor made inside a kiln control-flow "
             "body (cond/while_loop/fori_loop/scan) outside that body. Fix: return it from the "
             "body and use the result.");
  Frame& f = frames_[frame];
  auto it = f.lifted.find(v);
  if (it != f.lifted.end()) return it->second;
  ir::Value* outer = visible(v, frame - 1, op);
  ir::Value* inner = f.graph->add_input(ir::InputKind::Input,
                                        "capture" + std::to_string(f.captured.size()), v->type);
  owner_[inner] = f.graph;
  from_input_.resize(static_cast<size_t>(inner->id) + 1, false);
  from_input_[inner->id] =
      static_cast<size_t>(outer->id) < from_input_.size() && from_input_[outer->id];
  f.lifted.emplace(v, inner);
  f.captured.push_back(outer);
  return inner;
}

std::vector<Tensor> Tracer::begin_region(const std::vector<ir::Type>& arg_types) {
  Frame f;
  f.holder = std::make_unique<ir::Node>();
  f.graph = current_graph()->add_region(f.holder.get());
  f.num_args = arg_types.size();
  std::vector<Tensor> args;
  for (size_t i = 0; i < arg_types.size(); ++i) {
    ir::Value* v =
        f.graph->add_input(ir::InputKind::Input, "arg" + std::to_string(i), arg_types[i]);
    owner_[v] = f.graph;
    from_input_.resize(static_cast<size_t>(v->id) + 1, false);
    from_input_[v->id] = true;  // a body's arguments vary from call to call
    args.push_back(make_traced(v));
  }
  frames_.push_back(std::move(f));
  return args;
}

Tracer::Region Tracer::end_region(const std::vector<Tensor>& results) {
  static const OpDef* clone_op = find_op("clone");
  for (const Tensor& t : results) {
    KILN_CHECK(t.defined(),
               "[trace] a control-flow body returned an undefined tensor. Fix: "
               "return defined tensors.");
    current_graph()->add_output(visible(value_of(t, *clone_op), frames_.size() - 1, *clone_op));
  }
  Frame f = std::move(frames_.back());
  frames_.pop_back();
  Region r;
  r.graph = std::move(f.holder->regions.back());
  r.captured = std::move(f.captured);
  r.num_args = f.num_args;
  return r;
}

void Tracer::abandon_region() {
  if (frames_.size() > 1) frames_.pop_back();
}

Tensors Tracer::record_control_flow(const OpDef& op, const Attrs& attrs,
                                    const std::vector<Tensor>& operands,
                                    std::vector<Region> regions,
                                    const std::vector<ir::Type>& output_types) {
  // One capture list for the node: the union of the regions' captures.
  std::vector<ir::Value*> captures;
  for (const Region& r : regions)
    for (ir::Value* v : r.captured)
      if (std::find(captures.begin(), captures.end(), v) == captures.end()) captures.push_back(v);
  for (Region& r : regions) {
    auto& ins = r.graph->mutable_inputs();
    std::vector<ir::GraphInput> ordered(ins.begin(),
                                        ins.begin() + static_cast<std::ptrdiff_t>(r.num_args));
    for (size_t c = 0; c < captures.size(); ++c) {
      auto it = std::find(r.captured.begin(), r.captured.end(), captures[c]);
      if (it != r.captured.end()) {
        ordered.push_back(ins[r.num_args + static_cast<size_t>(it - r.captured.begin())]);
      } else {  // unused by this region: an input all the same, for one signature
        ir::Value* v = r.graph->add_input(ir::InputKind::Input, "", captures[c]->type);
        ordered.push_back(r.graph->inputs().back());
        (void)v;
      }
      ordered.back().name = "capture" + std::to_string(c);
    }
    ins = std::move(ordered);
  }
  auto node = std::make_unique<ir::Node>();
  node->op = &op;
  node->attrs = attrs.clone();
  for (const Tensor& t : operands) {
    ir::Value* v = value_of(t, op);
    node->inputs.push_back(v ? visible(v, frames_.size() - 1, op) : nullptr);
  }
  for (ir::Value* v : captures) node->inputs.push_back(v);
  for (Region& r : regions) node->regions.push_back(std::move(r.graph));
  node->module_path = current_module_path();
  node->loc = user_location();
  ir::Graph* g = current_graph();
  for (const ir::Type& t : output_types) {
    ir::Value* v = g->make_value(t, g->next_value_id());
    owner_[v] = g;
    from_input_.resize(static_cast<size_t>(v->id) + 1, false);
    from_input_[v->id] = true;
    node->outputs.push_back(v);
  }
  ir::Node* added = g->append_node(std::move(node));
  Tensors out;
  for (ir::Value* v : added->outputs) out.push_back(make_traced(v));
  return out;
}

}  // namespace kiln::detail
