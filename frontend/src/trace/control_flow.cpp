// kiln::cond, while_loop, fori_loop and scan: run eagerly, or record one region node each
// when a trace is active. Both paths check that bodies keep their types, naming the output
// index, both types and the module.
#include "kiln/control_flow.h"

#include <algorithm>

#include "kiln/nn/module.h"
#include "kiln/ops/control_flow.h"
#include "kiln/tensor_ops/layout.h"
#include "kiln/tensor_ops/view.h"
#include "tracer.h"

namespace kiln {

namespace {

using detail::Tracer;

Tracer* active_tracer() {
  return dynamic_cast<Tracer*>(current_interceptor());
}

std::vector<ir::Type> types_of(const TensorList& ts, const char* fn, const char* what) {
  std::vector<ir::Type> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    KILN_CHECK(ts[i].defined(), "[kiln::", fn, "] ", what, " ", i,
               " is an undefined tensor. Fix: pass defined tensors.");
    out.push_back(Tracer::type_of(ts[i]));
  }
  return out;
}

// Two bodies (or a body and its carry) must agree output by output.
void check_same_types(const std::vector<ir::Type>& want, const std::vector<ir::Type>& got,
                      const char* fn, const char* want_name, const char* got_name) {
  KILN_CHECK(want.size() == got.size(), "[kiln::", fn, "] ", got_name, " returned ", got.size(),
             " tensors but ", want_name, " has ", want.size(), ". Fix: return one tensor per ",
             want_name, " entry.");
  for (size_t i = 0; i < want.size(); ++i) {
    KILN_CHECK(want[i] == got[i], "[kiln::", fn, "] output ", i, " is ", ir::type_str(got[i]),
               " in ", got_name, " but ", ir::type_str(want[i]), " in ", want_name,
               ". Fix: make every branch and iteration produce the same "
               "dtype and shape (cast or reshape inside the body).");
  }
}

void check_predicate(const ir::Type& t, const char* fn, const char* what) {
  KILN_CHECK(numel(t.shape) == 1, "[kiln::", fn, "] the ", what, " must have one element, got ",
             ir::type_str(t), ". Fix: reduce it (e.g. (x > 0).any()).");
}

// Records regions, dropping the innermost one if a body throws.
template <class Body>
Tracer::Region trace_region(Tracer& tracer, const std::vector<ir::Type>& args, Body&& body) {
  std::vector<Tensor> traced_args = tracer.begin_region(args);
  try {
    return tracer.end_region(body(traced_args));
  } catch (...) {
    tracer.abandon_region();
    throw;
  }
}

std::vector<ir::Type> region_output_types(const Tracer::Region& r) {
  std::vector<ir::Type> out;
  for (const ir::GraphOutput& o : r.graph->outputs()) out.push_back(o.value->type);
  return out;
}

Tensor scalar_index(int64_t i) {
  return Tensor::scalar(i, kInt64);
}

}  // namespace

TensorList cond(const Tensor& pred, const BranchFn& true_fn, const BranchFn& false_fn,
                const TensorList& operands) {
  KILN_CHECK(pred.defined(), "[kiln::cond] the predicate is undefined.");
  std::vector<ir::Type> arg_types = types_of(operands, "cond", "operand");
  check_predicate(Tracer::type_of(pred), "cond", "predicate");
  Tracer* tracer = active_tracer();
  if (!tracer) return static_cast<bool>(pred) ? true_fn(operands) : false_fn(operands);
  Tracer::Region t = trace_region(*tracer, arg_types, true_fn);
  Tracer::Region f = trace_region(*tracer, arg_types, false_fn);
  std::vector<ir::Type> out = region_output_types(t);
  check_same_types(out, region_output_types(f), "cond", "true_fn", "false_fn");
  TensorList node_operands{pred};
  node_operands.insert(node_operands.end(), operands.begin(), operands.end());
  std::vector<Tracer::Region> regions;
  regions.push_back(std::move(t));
  regions.push_back(std::move(f));
  Tensors r =
      tracer->record_control_flow(ops::cond, no_attrs(), node_operands, std::move(regions), out);
  return TensorList(r.begin(), r.end());
}

TensorList while_loop(const LoopCondFn& cond_fn, const BranchFn& body_fn, TensorList carry) {
  std::vector<ir::Type> carry_types = types_of(carry, "while_loop", "carry entry");
  Tracer* tracer = active_tracer();
  if (!tracer) {
    while (true) {
      Tensor c = cond_fn(carry);
      KILN_CHECK(c.defined(), "[kiln::while_loop] cond_fn returned an undefined tensor.");
      check_predicate(ir::Type::of(c), "while_loop", "value cond_fn returns");
      if (!static_cast<bool>(c)) return carry;
      TensorList next = body_fn(carry);
      check_same_types(carry_types, types_of(next, "while_loop", "body result"), "while_loop",
                       "the carry", "body_fn");
      carry = std::move(next);
    }
  }
  Tracer::Region c = trace_region(
      *tracer, carry_types, [&](const TensorList& args) { return TensorList{cond_fn(args)}; });
  std::vector<ir::Type> c_out = region_output_types(c);
  check_predicate(c_out.at(0), "while_loop", "value cond_fn returns");
  Tracer::Region body = trace_region(*tracer, carry_types, body_fn);
  check_same_types(carry_types, region_output_types(body), "while_loop", "the carry", "body_fn");
  ops::WhileLoopAttrs a;
  a.num_carry = static_cast<int64_t>(carry.size());
  std::vector<Tracer::Region> regions;
  regions.push_back(std::move(c));
  regions.push_back(std::move(body));
  Tensors r =
      tracer->record_control_flow(ops::while_loop, a, carry, std::move(regions), carry_types);
  return TensorList(r.begin(), r.end());
}

TensorList fori_loop(int64_t lower, int64_t upper, const ForiBodyFn& body_fn, TensorList carry) {
  std::vector<ir::Type> carry_types = types_of(carry, "fori_loop", "carry entry");
  Tracer* tracer = active_tracer();
  if (!tracer) {
    for (int64_t i = lower; i < upper; ++i) {
      TensorList next = body_fn(scalar_index(i), carry);
      check_same_types(carry_types, types_of(next, "fori_loop", "body result"), "fori_loop",
                       "the carry", "body_fn");
      carry = std::move(next);
    }
    return carry;
  }
  std::vector<ir::Type> args{ir::Type{kInt64, {}, kCPU}};
  args.insert(args.end(), carry_types.begin(), carry_types.end());
  Tracer::Region body = trace_region(*tracer, args, [&](const TensorList& a) {
    return body_fn(a[0], TensorList(a.begin() + 1, a.end()));
  });
  check_same_types(carry_types, region_output_types(body), "fori_loop", "the carry", "body_fn");
  ops::ForiLoopAttrs a;
  a.lower = lower;
  a.upper = upper;
  a.num_carry = static_cast<int64_t>(carry.size());
  std::vector<Tracer::Region> regions;
  regions.push_back(std::move(body));
  Tensors r =
      tracer->record_control_flow(ops::fori_loop, a, carry, std::move(regions), carry_types);
  return TensorList(r.begin(), r.end());
}

std::pair<TensorList, TensorList> scan(const ScanFn& fn, TensorList init, const TensorList& xs,
                                       ScanOptions options) {
  std::vector<ir::Type> carry_types = types_of(init, "scan", "init entry");
  std::vector<ir::Type> x_types = types_of(xs, "scan", "xs entry");
  KILN_CHECK(!xs.empty(),
             "[kiln::scan] expected at least one tensor in xs to scan over, got "
             "none. Fix: use fori_loop for a loop without inputs.");
  int64_t length = x_types[0].shape.empty() ? 0 : x_types[0].shape[0];
  std::vector<ir::Type> slice_types;
  for (size_t j = 0; j < xs.size(); ++j) {
    KILN_CHECK(!x_types[j].shape.empty() && x_types[j].shape[0] == length, "[kiln::scan] xs ", j,
               " is ", ir::type_str(x_types[j]), " but xs 0 has ", length,
               " steps in dim 0. Fix: give every xs entry the same leading size.");
    ir::Type s = x_types[j];
    s.shape.erase(s.shape.begin());
    slice_types.push_back(s);
  }
  Tracer* tracer = active_tracer();
  if (!tracer) {
    KILN_CHECK(length > 0,
               "[kiln::scan] xs has 0 steps, so the shapes of ys are unknown. Fix: "
               "scan over at least one step.");
    // Every step's slice at once: one unbind per xs entry, whose gradient is one stack (a
    // select per step would give every step a full-size gradient).
    std::vector<std::vector<Tensor>> steps;
    for (const Tensor& full : xs) steps.push_back(unbind(full, 0));
    std::vector<TensorList> ys;
    for (int64_t step = 0; step < length; ++step) {
      const int64_t t = options.reverse ? length - 1 - step : step;
      TensorList x;
      for (const std::vector<Tensor>& slices : steps) x.push_back(slices[static_cast<size_t>(t)]);
      auto [next, y] = fn(init, x);
      check_same_types(carry_types, types_of(next, "scan", "carry result"), "scan", "the carry",
                       "fn");
      if (!ys.empty()) {
        check_same_types(types_of(ys[0], "scan", "y"), types_of(y, "scan", "y"), "scan",
                         "the first step's ys", "a later step's ys");
      }
      init = std::move(next);
      ys.push_back(std::move(y));
    }
    if (options.reverse) std::reverse(ys.begin(), ys.end());
    TensorList stacked;
    for (size_t k = 0; k < ys[0].size(); ++k) {
      std::vector<Tensor> parts;
      for (const TensorList& y : ys) parts.push_back(y[k]);
      stacked.push_back(stack(parts, 0));
    }
    return {init, stacked};
  }
  std::vector<ir::Type> args = carry_types;
  args.insert(args.end(), slice_types.begin(), slice_types.end());
  size_t num_ys = 0;
  Tracer::Region body = trace_region(*tracer, args, [&](const TensorList& a) {
    auto [next, y] = fn(TensorList(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(init.size())),
                        TensorList(a.begin() + static_cast<std::ptrdiff_t>(init.size()), a.end()));
    num_ys = y.size();
    next.insert(next.end(), y.begin(), y.end());
    return next;
  });
  std::vector<ir::Type> outs = region_output_types(body);
  check_same_types(
      carry_types,
      std::vector<ir::Type>(outs.begin(), outs.end() - static_cast<std::ptrdiff_t>(num_ys)), "scan",
      "the carry", "fn");
  for (size_t k = outs.size() - num_ys; k < outs.size(); ++k)
    outs[k].shape.insert(outs[k].shape.begin(), length);
  ops::ScanAttrs a;
  a.num_carry = static_cast<int64_t>(init.size());
  a.num_xs = static_cast<int64_t>(xs.size());
  a.length = length;
  a.reverse = options.reverse;
  TensorList operands = init;
  operands.insert(operands.end(), xs.begin(), xs.end());
  std::vector<Tracer::Region> regions;
  regions.push_back(std::move(body));
  Tensors r = tracer->record_control_flow(ops::scan, a, operands, std::move(regions), outs);
  TensorList carry(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(init.size()));
  TensorList ys(r.begin() + static_cast<std::ptrdiff_t>(init.size()), r.end());
  return {carry, ys};
}

}  // namespace kiln
