// Building, checking and explaining guards.
#include "guards.h"

#include <algorithm>
#include <map>
#include <optional>

#include "kiln/attrs.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbols.h"

namespace kiln::detail {

namespace {

const char* yes_no(bool b) {
  return b ? "true" : "false";
}

std::string guard_type(const TensorGuard& g) {
  if (!g.defined) return "undefined";
  return ir::type_str({g.dtype, g.shape, g.device});
}

std::string state_name(const StateGuard& s) {
  if (s.kind == 'm') return s.path.empty() ? "the root module" : s.path;
  return s.path;
}

std::string size_fix(CompileOptions::Dynamic dynamic, const std::string& input, size_t d,
                     int64_t now, bool kept_static) {
  if (now < 2) return " (sizes 0 and 1 are always compiled as static sizes)";
  if (kept_static && dynamic != CompileOptions::Dynamic::Off)
    return " (this dim stays static: a trace with it symbolic failed; the recompile log's "
           "'compiled as static sizes' line says where)";
  switch (dynamic) {
    case CompileOptions::Dynamic::Off:
      return " (dynamic=Off: each size compiles its own graph; CompileOptions::dynamic = Auto "
             "makes a changing dim symbolic)";
    case CompileOptions::Dynamic::Auto:
      return str_cat(" (compiled as a dynamic dim from now on; kiln::mark_dynamic(", input, ", ", d,
                     ") does so from the first call)");
    case CompileOptions::Dynamic::On:
      break;
  }
  return str_cat(" (mark it dynamic: kiln::mark_dynamic(", input, ", ", d, "))");
}

// Checks one input against its guard; symbolic dims bind their symbol in `bound`.
bool tensor_holds(const TensorGuard& g, const TensorGuard& now,
                  std::vector<std::pair<int64_t, int64_t>>& bound) {
  if (g.defined != now.defined || g.dtype != now.dtype || !(g.device == now.device) ||
      g.requires_grad != now.requires_grad || g.shape.size() != now.shape.size() ||
      g.strides != now.strides)
    return false;
  for (size_t d = 0; d < g.shape.size(); ++d) {
    int64_t want = g.shape[d], have = now.shape[d];
    if (want == have) continue;
    if (!ir::is_symbolic_size(want) || have < 2) return false;
    bool seen = false;
    for (const auto& [sym, size] : bound) {
      if (sym != want) continue;
      if (size != have) return false;
      seen = true;
    }
    if (!seen) bound.emplace_back(want, have);
  }
  return true;
}

// The size a symbol took first, and where.
struct SymbolBinding {
  int64_t symbol = 0;
  int64_t size = 0;
  std::string where;
};

// The value of a bounded symbolic size under this call's binding of sentinels to sizes
// (nullopt if a symbol it uses is unbound, which a graph's own bounds never do).
template <class Lookup>
std::optional<int64_t> bound_value(const ir::SizeBound& b, Lookup size_of) {
  std::optional<ir::SymbolicSize> s = ir::decode_size(b.size);
  if (!s) return std::nullopt;
  int64_t v = s->coeff;
  for (int k = 0; k < ir::kMaxSymbols; ++k) {
    for (int e = 0; e < s->exponents[k]; ++e) {
      std::optional<int64_t> size = size_of(ir::symbol_value(k));
      if (!size) return std::nullopt;
      v *= *size;
    }
  }
  return v;
}

// The differences between two guards of one tensor.
void tensor_failures(const std::string& what, const TensorGuard& a, const TensorGuard& b,
                     const std::string* input, CompileOptions::Dynamic dynamic,
                     uint64_t kept_static, std::vector<SymbolBinding>& bound,
                     std::vector<std::string>& out) {
  if (a.defined != b.defined) {
    out.push_back(what + ": " + guard_type(a) + " -> " + guard_type(b));
    return;
  }
  if (!a.defined) return;
  if (a.dtype != b.dtype) out.push_back(str_cat(what, " dtype: ", a.dtype, " -> ", b.dtype));
  if (!(a.device == b.device))
    out.push_back(str_cat(what, " device: ", a.device, " -> ", b.device));
  if (a.shape.size() != b.shape.size()) {
    out.push_back(str_cat(what, " rank: ", a.shape.size(), " -> ", b.shape.size(), " (shape ",
                          ir::type_str({a.dtype, a.shape, a.device}), " -> ", shape_str(b.shape),
                          ")"));
  } else {
    for (size_t d = 0; d < a.shape.size(); ++d) {
      int64_t want = a.shape[d], have = b.shape[d];
      if (want == have) continue;
      std::string dim = str_cat(what, " dim ", d);
      if (!ir::is_symbolic_size(want)) {
        out.push_back(str_cat(dim, ": ", want, " -> ", have,
                              input ? size_fix(dynamic, *input, d, have,
                                               d < 64 && ((kept_static >> d) & 1))
                                    : ""));
        continue;
      }
      if (have < 2) {
        out.push_back(str_cat(dim, " (", ir::format_size(want), "): ", have,
                              " (a dynamic dim covers sizes >= 2; 0 and 1 are compiled as "
                              "static sizes)"));
        continue;
      }
      bool seen = false;
      for (const SymbolBinding& b : bound) {
        if (b.symbol != want) continue;
        seen = true;
        if (b.size != have) {
          out.push_back(str_cat(dim, ": ", have, " but ", b.where, ": ", b.size, " (both are ",
                                ir::format_size(want), ": they were equal when traced)"));
        }
      }
      if (!seen) bound.push_back({want, have, dim});
    }
  }
  if (a.requires_grad != b.requires_grad)
    out.push_back(str_cat(what, " requires_grad: ", yes_no(a.requires_grad), " -> ",
                          yes_no(b.requires_grad)));
  if (a.strides != b.strides) {
    auto layout = [](const Shape& s) {
      return s.empty() ? std::string("contiguous") : "strides " + shape_str(s);
    };
    out.push_back(str_cat(what, " layout: ", layout(a.strides), " -> ", layout(b.strides),
                          " (call .contiguous() on inputs to share one graph)"));
  }
}

void module_failures(const ModuleSignature& a, const ModuleSignature& b,
                     std::vector<std::string>& out) {
  if (a.hash == b.hash) return;
  std::map<std::pair<std::string, char>, const StateGuard*> old_entries;
  for (const StateGuard& s : a.entries) old_entries[{s.path, s.kind}] = &s;
  // eval()/train() on the root flips every module: say it once.
  size_t modules = 0, flipped = 0;
  for (const StateGuard& s : b.entries) {
    if (s.kind != 'm') continue;
    ++modules;
    auto it = old_entries.find({s.path, s.kind});
    flipped += it != old_entries.end() && it->second->flag != s.flag;
  }
  bool all_flipped = modules > 1 && flipped == modules;
  if (all_flipped) {
    bool now = b.entries.front().flag;
    out.push_back(str_cat("training (every module): ", yes_no(!now), " -> ", yes_no(now)));
  }
  std::map<std::pair<std::string, char>, bool> seen;
  for (const StateGuard& s : b.entries) {
    seen[{s.path, s.kind}] = true;
    auto it = old_entries.find({s.path, s.kind});
    const char* noun = s.kind == 'm' ? "module " : s.kind == 'p' ? "parameter " : "buffer ";
    if (it == old_entries.end()) {
      out.push_back(str_cat(noun, state_name(s), ": added"));
      continue;
    }
    const StateGuard& o = *it->second;
    if (s.kind == 'm') {
      if (o.identity != s.identity)
        out.push_back(str_cat(state_name(s), ": replaced by another module"));
      if (o.flag != s.flag && !all_flipped)
        out.push_back(
            str_cat(state_name(s), " training: ", yes_no(o.flag), " -> ", yes_no(s.flag)));
      continue;
    }
    if (o.identity != s.identity)
      out.push_back(str_cat(noun, s.path,
                            ": replaced by another tensor (assign with copy_ or "
                            "load_state_dict to keep the graph)"));
    std::vector<SymbolBinding> no_symbols;  // requires_grad is part of the tensor guard
    tensor_failures(s.path, o.tensor, s.tensor, nullptr, CompileOptions::Dynamic::Off, 0,
                    no_symbols, out);
  }
  for (const StateGuard& s : a.entries) {
    if (seen.count({s.path, s.kind})) continue;
    const char* noun = s.kind == 'm' ? "module " : s.kind == 'p' ? "parameter " : "buffer ";
    out.push_back(str_cat(noun, state_name(s), ": removed"));
  }
}

}  // namespace

TensorGuard tensor_guard(const Tensor& t) {
  if (!t.defined()) return {};
  return {true,       t.dtype(),         Shape(t.impl()->sizes),
          t.device(), t.requires_grad(), t.is_contiguous() ? Shape() : Shape(t.strides())};
}

ModuleSignature module_signature(nn::Module& root) {
  ModuleSignature sig;
  size_t h = 0;
  auto add = [&](StateGuard s) {
    kiln::detail::hash_combine(h, std::hash<std::string>()(s.path));
    kiln::detail::hash_combine(h, static_cast<size_t>(s.kind));
    kiln::detail::hash_combine(h, std::hash<const void*>()(s.identity));
    kiln::detail::hash_combine(h, s.flag);
    kiln::detail::hash_combine(h, static_cast<size_t>(s.tensor.dtype) * 7 + s.tensor.defined);
    for (int64_t d : s.tensor.shape) kiln::detail::hash_combine(h, static_cast<size_t>(d));
    sig.entries.push_back(std::move(s));
  };
  for (auto& [path, m] : root.named_modules("", false)) {
    add({path, 'm', m, m->is_training(), {}});
    std::string prefix = path.empty() ? "" : path + ".";
    for (const auto& [name, t] : m->named_parameters("", false, false))
      add({prefix + name, 'p', t.impl(), t.defined() && t.requires_grad(), tensor_guard(t)});
    for (const auto& [name, t] : m->named_buffers("", false, false))
      add({prefix + name, 'b', t.impl(), false, tensor_guard(t)});
  }
  sig.hash = h;
  return sig;
}

bool same_module_state(const GuardSet& entry, const GuardSet& now) {
  if (entry.module == now.module) return true;
  return entry.module->hash == now.module->hash && entry.module->entries == now.module->entries;
}

bool call_guards_hold(const GuardSet& entry, const GuardSet& now) {
  if (entry.grad_mode != now.grad_mode || entry.static_args != now.static_args) return false;
  if (!entry.symbolic) return entry.inputs == now.inputs;
  if (entry.inputs.size() != now.inputs.size()) return false;
  std::vector<std::pair<int64_t, int64_t>> bound;
  for (size_t i = 0; i < entry.inputs.size(); ++i)
    if (!tensor_holds(entry.inputs[i], now.inputs[i], bound)) return false;
  for (const ir::SizeBound& b : entry.size_bounds) {
    std::optional<int64_t> v = bound_value(b, [&](int64_t symbol) -> std::optional<int64_t> {
      for (const auto& [sym, size] : bound)
        if (sym == symbol) return size;
      return std::nullopt;
    });
    if (v && *v > b.max) return false;
  }
  return true;
}

std::vector<std::string> guard_failures(const GuardSet& entry, const GuardSet& now,
                                        CompileOptions::Dynamic dynamic,
                                        const std::vector<std::string>& input_names,
                                        const std::vector<uint64_t>& kept_static) {
  std::vector<std::string> out;
  size_t n = std::min(entry.inputs.size(), now.inputs.size());
  std::vector<SymbolBinding> bound;
  for (size_t i = 0; i < n; ++i) {
    tensor_failures("input " + input_names[i], entry.inputs[i], now.inputs[i], &input_names[i],
                    dynamic, i < kept_static.size() ? kept_static[i] : 0, bound, out);
  }
  for (const ir::SizeBound& b : entry.size_bounds) {
    const SymbolBinding* first = nullptr;
    std::optional<int64_t> v = bound_value(b, [&](int64_t symbol) -> std::optional<int64_t> {
      for (const SymbolBinding& s : bound) {
        if (s.symbol != symbol) continue;
        if (!first) first = &s;
        return s.size;
      }
      return std::nullopt;
    });
    if (!v || *v <= b.max) continue;
    out.push_back(str_cat(first ? first->where : std::string("a dynamic dim"), " (",
                          ir::format_size(b.size), "): ", *v, " > ", b.max, " (the graph's ",
                          b.where(), " slices a dim of ", b.max,
                          " by this size; a larger one gets a graph of its own)"));
  }
  if (entry.inputs.size() != now.inputs.size())
    out.push_back(
        str_cat("tensor argument count: ", entry.inputs.size(), " -> ", now.inputs.size()));
  for (size_t i = 0; i < std::min(entry.static_args.size(), now.static_args.size()); ++i) {
    if (entry.static_args[i] != now.static_args[i])
      out.push_back(str_cat(
          "argument ", now.static_args[i].position, " (not a tensor): ", entry.static_args[i].value,
          " -> ", now.static_args[i].value, " (non-tensor arguments are baked into the graph)"));
  }
  if (entry.grad_mode != now.grad_mode)
    out.push_back(str_cat("grad mode: ", yes_no(entry.grad_mode), " -> ", yes_no(now.grad_mode)));
  module_failures(*entry.module, *now.module, out);
  return out;
}

std::vector<std::string> input_names(const CompileOptions& options, size_t count) {
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    if (i < options.input_names.size())
      names.push_back(options.input_names[i]);
    else
      names.push_back(count == 1 ? "x" : "input" + std::to_string(i));
  }
  return names;
}

std::vector<std::string> describe_guards(const GuardSet& g,
                                         const std::vector<std::string>& input_names) {
  std::vector<std::string> out;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    out.push_back(str_cat("input ", input_names[i], ": ", guard_type(g.inputs[i]),
                          g.symbolic ? " (symbolic dims: any size >= 2)" : "",
                          g.inputs[i].requires_grad ? " requires_grad" : ""));
  }
  for (const ir::SizeBound& b : g.size_bounds)
    out.push_back(str_cat(ir::format_size(b.size), " <= ", b.max, " (", b.where(), ")"));
  for (size_t i = 0; i < g.static_args.size(); ++i)
    out.push_back(str_cat("argument ", g.static_args[i].position, " == ", g.static_args[i].value));
  out.push_back(str_cat("grad mode == ", yes_no(g.grad_mode)));
  size_t modules = 0, tensors = 0, training = 0;
  for (const StateGuard& s : g.module->entries) {
    if (s.kind == 'm') {
      ++modules;
      training += s.flag;
    } else {
      ++tensors;
    }
  }
  out.push_back(str_cat("module state: ", modules, " modules (", training, " training), ", tensors,
                        " parameters and buffers with their identity, type and "
                        "requires_grad"));
  return out;
}

}  // namespace kiln::detail
