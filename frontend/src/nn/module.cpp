// kiln::nn::Module: registration, tree walks, whole-model state (train/eval, to, zero_grad,
// freezing), hooks and PyTorch-style printing.
#include "kiln/nn/module.h"

#include <cxxabi.h>

#include <atomic>
#include <cstdlib>
#include <sstream>
#include <unordered_set>

#include "kiln/autograd.h"
#include "kiln/nn/state_budget.h"
#include "kiln/nn/uninitialized.h"
#include "kiln/state_epoch.h"
#include "kiln/tensor_ops/elementwise.h"
#include "module_internal.h"

namespace kiln::nn {

namespace detail {

std::atomic<uint64_t>& registration_epoch() {
  static std::atomic<uint64_t> epoch{1};
  return epoch;
}

std::string demangle_type_name(const char* mangled) {
  int status = 0;
  char* raw = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = (status == 0 && raw) ? raw : mangled;
  std::free(raw);
  // Keep the last component outside template arguments: "kiln::nn::Linear" -> "Linear",
  // "(anonymous namespace)::Mlp" -> "Mlp", "ns::Box<ns::T>" -> "Box<ns::T>".
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i + 1 < full.size(); ++i) {
    char c = full[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && c == ':' && full[i + 1] == ':') start = i + 2;
  }
  return full.substr(start);
}

void replace_tensor_data(const Tensor& slot, const Tensor& converted) {
  // Like PyTorch's `param.data = converted`: the TensorImpl stays, its data changes, so the
  // user's member handles and an optimizer's references follow the conversion.
  bump_state_epoch();
  TensorImpl* dst = slot.impl();
  TensorImpl* src = converted.impl();
  dst->storage = src->storage;
  dst->sizes = src->sizes;
  dst->strides = src->strides;
  dst->offset = src->offset;
  dst->dtype = src->dtype;
  dst->device = src->device;
  dst->is_view = false;
}

}  // namespace detail

void HookHandle::remove() {
  auto table = table_.lock();
  if (!table) return;
  std::erase_if(table->pre, [&](const auto& e) { return e.first == id_; });
  std::erase_if(table->post, [&](const auto& e) { return e.first == id_; });
  table_.reset();
}

namespace {

std::string join_path(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

void collect_modules(Module* m, const std::string& prefix, bool dedupe,
                     std::unordered_set<const Module*>& memo,
                     std::vector<std::pair<std::string, Module*>>& out) {
  if (dedupe && !memo.insert(m).second) return;
  out.emplace_back(prefix, m);
  for (const auto& [name, child] : m->named_children())
    collect_modules(child.get(), join_path(prefix, name), dedupe, memo, out);
}

}  // namespace

// Installs the error-context provider once, so every kiln::Error thrown during a forward
// names the module being run.
Module::Module() {
  static const bool installed = [] {
    kiln::detail::set_error_context_provider(&call_context);
    return true;
  }();
  (void)installed;
}

Module::~Module() = default;

Tensor Module::forward(const Tensor&) {
  KILN_FAIL("[Module] ", type_name(), " has no single-tensor forward. Fix: define `kiln::Tensor ",
            "forward(const kiln::Tensor& x) override` in ", type_name(),
            ", or, when its forward takes other arguments, call it with kiln::nn::call(module, "
            "args...).");
}

std::string Module::type_name() const {
  return detail::demangle_type_name(typeid(*this).name());
}

// ---- registration ----

void Module::check_new_name(const std::string& name, const char* what) const {
  KILN_CHECK(!name.empty(), "[Module::register_", what, "] ", type_name(), ": the ", what,
             " name is empty. Fix: pass a non-empty name such as \"weight\" or \"fc1\".");
  KILN_CHECK(name.find('.') == std::string::npos, "[Module::register_", what, "] ", type_name(),
             ": the ", what, " name '", name,
             "' contains '.', which separates path components (blocks.0.weight). Fix: use '_' "
             "instead, or register a child module that holds it.");
  const char* taken = nullptr;
  for (const auto& p : parameters_)
    if (p.first == name) taken = "parameter";
  for (const auto& b : buffers_)
    if (b.name == name) taken = "buffer";
  for (const auto& c : children_)
    if (c.first == name) taken = "child module";
  KILN_CHECK(taken == nullptr, "[Module::register_", what, "] ", type_name(), " already has a ",
             taken ? taken : "", " named '", name,
             "'. Fix: give each parameter, buffer and child of a module a unique name.");
}

namespace {

std::atomic<int64_t>& state_element_limit() {
  static std::atomic<int64_t> limit = [] {
    int64_t n = int64_t{1} << 31;
    if (const char* env = std::getenv("KILN_MAX_STATE_ELEMENTS"); env && *env) {
      char* end = nullptr;
      const long long v = std::strtoll(env, &end, 10);
      KILN_CHECK(end && *end == '\0' && v > 0,
                 "KILN_MAX_STATE_ELEMENTS must be a positive "
                 "integer (elements per parameter or buffer), got '",
                 env, "'.");
      n = v;
    }
    return n;
  }();
  return limit;
}

thread_local StateBudgetScope* t_state_budget = nullptr;

// Refuses a parameter or buffer larger than the limit, before anything writes to it.
void check_state_size(const Module& m, const std::string& name, const Tensor& t, const char* what) {
  if (!t.defined() || t.is_symbolic()) return;  // lazy layers: their size is not known yet
  if (t_state_budget)
    count_state_elements(m.type_name() + " " + what + " '" + name + "' " + t.type_str(), t.numel());
  const int64_t limit = state_element_limit().load();
  const int64_t n = t.numel();
  KILN_CHECK(n <= limit, "[Module::register_", what, "] ", m.type_name(), ": ", what, " '", name,
             "' ", t.type_str(), " has ", n, " elements (",
             static_cast<int64_t>(static_cast<double>(n) * static_cast<double>(t.element_size()) /
                                  (1 << 20)),
             " MiB), more than the limit of ", limit,
             " per tensor. Fix: check the sizes that made it (a config's width?); if the model "
             "really needs it, raise the limit with kiln::nn::set_max_state_elements or "
             "KILN_MAX_STATE_ELEMENTS.");
}

}  // namespace

StateBudgetScope::StateBudgetScope(int64_t elements, std::string reason)
    : limit_(elements), reason_(std::move(reason)), previous_(t_state_budget) {
  t_state_budget = this;
}

StateBudgetScope::~StateBudgetScope() { t_state_budget = previous_; }

void count_state_elements(const std::string& what, int64_t elements) {
  StateBudgetScope* budget = t_state_budget;
  if (!budget) return;
  budget->used_ = size_add(budget->used_, elements, "the registered state's elements");
  KILN_CHECK(budget->used_ <= budget->limit_, "[state budget] the model being built registers ",
             what, ", which brings its parameters and buffers to ", budget->used_,
             " elements, more than the ", budget->limit_, " allowed: ", budget->reason_,
             ". Nothing was written to it. Fix: the sizes that built it (a stored config?) do "
             "not match; rebuild the model with the config that made the tensors.");
}

int64_t max_state_elements() {
  return state_element_limit().load();
}

void set_max_state_elements(int64_t elements) {
  KILN_CHECK(elements > 0, "[set_max_state_elements] expected a positive element count, got ",
             elements, ".");
  state_element_limit().store(elements);
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  check_state_size(*this, name, tensor, "parameter");
  if (tensor.defined()) {
    KILN_CHECK(tensor.is_leaf(), "[Module::register_parameter] ", type_name(), ": parameter '",
               name,
               "' must be a leaf tensor, got one computed by an op that records "
               "gradients. Fix: register tensor.detach(), or compute it under kiln::NoGradGuard.");
    KILN_CHECK(!requires_grad || tensor.is_floating_point(), "[Module::register_parameter] ",
               type_name(), ": parameter '", name, "' is ", tensor.dtype(),
               ", and only floating-point tensors can be trained. Fix: convert it with "
               ".to(kiln::kFloat32), or register it as a buffer (register_buffer).");
    tensor.set_requires_grad(requires_grad);
  }
  parameters_.emplace_back(name, tensor);
  bump_state_epoch();
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_new_name(name, "buffer");
  check_state_size(*this, name, tensor, "buffer");
  buffers_.push_back({name, tensor, persistent});
  bump_state_epoch();
  return tensor;
}

void Module::register_module_impl(const std::string& name, std::shared_ptr<Module> child) {
  check_new_name(name, "module");
  KILN_CHECK(child != nullptr, "[Module::register_module] ", type_name(), ": child '", name,
             "' is null. Fix: pass a constructed module (std::make_shared<Layer>(...)).");
  KILN_CHECK(child.get() != this, "[Module::register_module] ", type_name(),
             " cannot be its own child ('", name, "'). Fix: register a different module.");
  children_.emplace_back(name, std::move(child));
  detail::registration_epoch().fetch_add(1);
  bump_state_epoch();
}

NamedModules& Module::mutable_children() {
  detail::registration_epoch().fetch_add(1);
  bump_state_epoch();
  return children_;
}

size_t Module::child_position(const std::string& name, const char* op) const {
  for (size_t i = 0; i < children_.size(); ++i)
    if (children_[i].first == name) return i;
  std::string known;
  for (const auto& [child, m] : children_) known += (known.empty() ? "" : ", ") + child;
  KILN_FAIL("[Module::", op, "] ", type_name(), " has no child '", name, "' (its children: ",
            known.empty() ? "none" : known, "). Fix: use one of those names, or register_module to add one.");
}

void Module::unregister_module(const std::string& name) {
  const size_t at = child_position(name, "unregister_module");
  NamedModules& children = mutable_children();
  children.erase(children.begin() + static_cast<std::ptrdiff_t>(at));
}

Tensor Module::remove_parameter(const std::string& name) {
  for (auto it = parameters_.begin(); it != parameters_.end(); ++it) {
    if (it->first != name) continue;
    Tensor removed = it->second;
    parameters_.erase(it);
    bump_state_epoch();
    return removed;
  }
  KILN_FAIL("[Module] ", type_name(), " has no parameter '", name, "'.");
}

// ---- walks ----

std::vector<std::pair<std::string, Module*>> Module::named_modules(const std::string& prefix,
                                                                   bool remove_duplicate, bool include_self) {
  std::vector<std::pair<std::string, Module*>> out;
  std::unordered_set<const Module*> memo;
  collect_modules(this, prefix, remove_duplicate, memo, out);
  if (!include_self) out.erase(out.begin());
  return out;
}

std::vector<Module*> Module::modules() {
  std::vector<Module*> out;
  for (auto& [path, m] : named_modules()) out.push_back(m);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

NamedTensors Module::named_parameters(const std::string& prefix, bool recurse,
                                      bool remove_duplicate) const {
  auto* self = const_cast<Module*>(this);
  std::vector<std::pair<std::string, Module*>> mods =
      recurse ? self->named_modules(prefix, remove_duplicate)
              : std::vector<std::pair<std::string, Module*>>{{prefix, self}};
  NamedTensors out;
  std::unordered_set<const TensorImpl*> memo;
  for (const auto& [path, m] : mods)
    for (const auto& [name, t] : m->parameters_) {
      if (!t.defined()) continue;
      if (remove_duplicate && !memo.insert(t.impl()).second) continue;
      out.emplace_back(join_path(path, name), t);
    }
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters("", recurse)) out.push_back(t);
  return out;
}

namespace {
enum class BufferKind { kAll, kPersistent };
}

static NamedTensors named_buffers_impl(Module* self, const std::string& prefix, bool recurse,
                                       bool remove_duplicate, BufferKind kind) {
  std::vector<std::pair<std::string, Module*>> mods =
      recurse ? self->named_modules(prefix, remove_duplicate)
              : std::vector<std::pair<std::string, Module*>>{{prefix, self}};
  NamedTensors out;
  std::unordered_set<const TensorImpl*> memo;
  for (const auto& [path, m] : mods)
    for (const auto& [name, t] : m->named_buffers("", false, false)) {
      if (kind == BufferKind::kPersistent && !m->is_buffer_persistent(name)) continue;
      if (remove_duplicate && !memo.insert(t.impl()).second) continue;
      out.emplace_back(join_path(path, name), t);
    }
  return out;
}

NamedTensors Module::named_buffers(const std::string& prefix, bool recurse,
                                   bool remove_duplicate) const {
  if (!recurse) {
    NamedTensors out;
    std::unordered_set<const TensorImpl*> memo;
    for (const auto& b : buffers_) {
      if (!b.tensor.defined()) continue;
      if (remove_duplicate && !memo.insert(b.tensor.impl()).second) continue;
      out.emplace_back(join_path(prefix, b.name), b.tensor);
    }
    return out;
  }
  return named_buffers_impl(const_cast<Module*>(this), prefix, recurse, remove_duplicate,
                            BufferKind::kAll);
}

NamedTensors Module::named_persistent_buffers(const std::string& prefix,
                                              bool remove_duplicate) const {
  return named_buffers_impl(const_cast<Module*>(this), prefix, true, remove_duplicate,
                            BufferKind::kPersistent);
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers("", recurse)) out.push_back(t);
  return out;
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  std::unordered_set<const Module*> seen;
  std::function<void(Module&)> visit = [&](Module& m) {
    if (!seen.insert(&m).second) return;  // a shared child is visited once
    for (const auto& c : m.children_) visit(*c.second);
    fn(m);
  };
  visit(*this);
  return *this;
}

Module& Module::apply(const std::function<void(const std::string&, Module&)>& fn, const std::string& prefix) {
  std::unordered_set<const Module*> seen;
  std::function<void(const std::string&, Module&)> visit = [&](const std::string& path, Module& m) {
    if (!seen.insert(&m).second) return;
    for (const auto& [name, child] : m.children_) visit(join_path(path, name), *child);
    fn(path, m);
  };
  visit(prefix, *this);
  return *this;
}

Tensor* Module::find_parameter(std::string_view name) {
  for (auto& p : parameters_)
    if (p.first == name) return &p.second;
  return nullptr;
}

Tensor* Module::find_buffer(std::string_view name) {
  for (auto& b : buffers_)
    if (b.name == name) return &b.tensor;
  return nullptr;
}

std::shared_ptr<Module> Module::find_child(std::string_view name) const {
  for (const auto& c : children_)
    if (c.first == name) return c.second;
  return nullptr;
}

bool Module::is_buffer_persistent(std::string_view name) const {
  for (const auto& b : buffers_)
    if (b.name == name) return b.persistent;
  return false;
}

bool Module::has_state() const {
  for (const auto& p : parameters_)
    if (p.second.defined()) return true;
  for (const auto& b : buffers_)
    if (b.tensor.defined()) return true;
  for (const auto& c : children_)
    if (c.second->has_state()) return true;
  return false;
}

// ---- whole-model state ----

Module& Module::train(bool on) {
  if (training_ != on) bump_state_epoch();
  training_ = on;
  for (const auto& c : children_) c.second->train(on);
  return *this;
}

template <class Fn>
void Module::for_each_tensor(Fn&& fn) {
  for (auto& [path, t] : named_parameters()) fn(t);
  for (auto& [path, t] : named_buffers()) fn(t);
}

Module& Module::to(DType dtype) {
  KILN_CHECK(is_floating(dtype), "[Module::to] ", type_name(), ".to(", dtype,
             "): modules convert only to floating-point dtypes (integer buffers keep theirs). "
             "Fix: pass kiln::kFloat32, kFloat64, ...");
  NoGradGuard no_grad;
  for_each_tensor([&](const Tensor& t) {
    if (!t.is_floating_point() || t.dtype() == dtype) return;
    if (is_uninitialized(t)) {  // a lazy layer's parameter: it materializes in that dtype
      t.impl()->dtype = dtype;
      return;
    }
    Tensor grad = t.grad();
    detail::replace_tensor_data(t, t.detach().to(dtype));
    if (grad.defined()) t.set_grad(grad.to(dtype));
  });
  return *this;
}

Module& Module::to(Device device) {
  NoGradGuard no_grad;
  for_each_tensor([&](const Tensor& t) {
    if (t.device() == device) return;
    if (is_uninitialized(t)) {
      t.impl()->device = device;
      return;
    }
    Tensor grad = t.grad();
    detail::replace_tensor_data(t, t.detach().to(device));
    if (grad.defined()) t.set_grad(grad.to(device));
  });
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (auto& t : parameters()) {
    Tensor g = t.grad();
    if (!g.defined()) continue;
    if (set_to_none)
      t.set_grad(Tensor());
    else
      g.zero_();
  }
}

Module& Module::requires_grad_(bool requires_grad) {
  for (auto& [path, t] : named_parameters()) {
    KILN_CHECK(!requires_grad || t.is_floating_point(), "[Module::requires_grad_] parameter '",
               path, "' of ", type_name(), " is ", t.dtype(),
               " and cannot require gradients. Fix: convert it to a floating-point dtype.");
    t.set_requires_grad(requires_grad);
  }
  return *this;
}

// ---- hooks ----

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  if (!hooks_) hooks_ = std::make_shared<detail::HookTable>();
  uint64_t id = hooks_->next_id++;
  hooks_->pre.emplace_back(id, std::move(hook));
  return HookHandle(hooks_, id);
}

HookHandle Module::register_forward_hook(ForwardHook hook) {
  if (!hooks_) hooks_ = std::make_shared<detail::HookTable>();
  uint64_t id = hooks_->next_id++;
  hooks_->post.emplace_back(id, std::move(hook));
  return HookHandle(hooks_, id);
}

bool Module::has_forward_hooks() const {
  return hooks_ && (!hooks_->pre.empty() || !hooks_->post.empty());
}

void Module::run_pre_hooks(const std::vector<Tensor>& inputs) {
  auto hooks = hooks_->pre;  // a copy: a hook may remove itself
  for (auto& [id, hook] : hooks) hook(*this, inputs);
}

void Module::run_post_hooks(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  auto hooks = hooks_->post;
  for (auto& [id, hook] : hooks) hook(*this, inputs, outputs);
}

// ---- the tree index for the registration check ----

std::shared_ptr<const detail::TreeIndex> Module::tree_index() const {
  uint64_t epoch = detail::registration_epoch().load();
  std::lock_guard<std::mutex> lock(index_mutex_);
  if (index_ && index_->epoch == epoch) return index_;
  auto index = std::make_shared<detail::TreeIndex>();
  index->epoch = epoch;
  for (auto& [path, m] : const_cast<Module*>(this)->named_modules()) index->paths.emplace(m, path);
  index_ = index;
  return index_;
}

// ---- printing (PyTorch's Module.__repr__) ----

namespace {

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Indents every line but the first by `n` spaces.
std::string add_indent(const std::string& s, int n) {
  auto lines = split_lines(s);
  if (lines.size() <= 1) return s;
  std::string out = lines[0];
  for (size_t i = 1; i < lines.size(); ++i) out += "\n" + std::string(n, ' ') + lines[i];
  return out;
}

}  // namespace

std::string Module::repr() const {
  std::vector<std::string> extra_lines;
  if (std::string extra = extra_repr(); !extra.empty()) extra_lines = split_lines(extra);
  std::vector<std::string> child_lines;
  for (const auto& [name, child] : children_)
    child_lines.push_back("(" + name + "): " + add_indent(child->repr(), 2));
  std::string out = type_name() + "(";
  if (extra_lines.size() == 1 && child_lines.empty()) {
    out += extra_lines[0];
  } else if (!extra_lines.empty() || !child_lines.empty()) {
    for (const auto& l : extra_lines) out += "\n  " + l;
    for (const auto& l : child_lines) out += "\n  " + l;
    out += "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) {
  return os << module.repr();
}

}  // namespace kiln::nn
