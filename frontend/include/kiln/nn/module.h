// kiln::nn::Module: the base class of every layer, block and model. A module owns parameters,
// buffers and named children (the ownership tree); whole-model operations walk that tree.
//
//   struct Mlp : kiln::nn::Module {
//     kiln::nn::ModulePtr<kiln::nn::Linear> fc1 =
//         register_module("fc1", std::make_shared<kiln::nn::Linear>(784, 256));
//     kiln::Tensor forward(const kiln::Tensor& x) override { return fc1(x).relu(); }
//   };
//
// Calling a module (`model(x)`, `fc1(x)`, `kiln::nn::call(attn, q, k, v)`) pushes a call frame
// (its path in the tree, shown in every error raised inside it), runs the forward hooks, and
// checks that a module holding state is registered in the tree being run: PyTorch silently
// trains nothing for a layer kept in a std::vector; kiln throws and names the fix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/tensor.h"

namespace kiln::nn {

// The most elements one parameter or buffer may hold (default 2^31, 8 GiB of float32).
// register_parameter and register_buffer refuse a larger tensor before anything writes to
// it, so a mistyped size (a config's d_hidden of 3,000,000) is an error naming the layer, not
// a machine swapping until the OOM killer ends it. Raise it with set_max_state_elements, or
// the environment variable KILN_MAX_STATE_ELEMENTS, for models that need larger tensors.
int64_t max_state_elements();
void set_max_state_elements(int64_t elements);

class Module;
template <class M>
class ModulePtr;

// (path or name, value) pairs in registration order.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;

// What a non-strict load_state_dict() could not match (PyTorch's _IncompatibleKeys).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;     // in the module, absent from the state dict
  std::vector<std::string> unexpected_keys;  // in the state dict, absent from the module
};

struct LoadStateDictOptions {
  bool strict = true;
  // Maps each key of the loaded dict to this module's name for it (a Hugging Face or PyTorch
  // checkpoint's "encoder.layer.0.attention.self.query.weight" to kiln's path), before any
  // check; an empty result drops the key. Two keys renamed to one name are an error.
  std::function<std::string(const std::string&)> rename;
};

// Hooks observe a call; they run inside the module's call frame. `inputs` / `outputs` are the
// Tensor arguments / results of the call (a std::vector<Tensor>, std::pair or std::tuple of
// tensors is flattened; other arguments are not shown).
using ForwardPreHook = std::function<void(Module& module, const std::vector<Tensor>& inputs)>;
using ForwardHook = std::function<void(Module& module, const std::vector<Tensor>& inputs,
                                       const std::vector<Tensor>& outputs)>;

namespace detail {
struct HookTable;
struct TreeIndex;
class CallScope;
class CloneContext;
}  // namespace detail

// Returned by register_forward_(pre_)hook; remove() unregisters the hook (idempotent, and
// harmless after the module is gone).
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::weak_ptr<detail::HookTable> table, uint64_t id)
      : table_(std::move(table)), id_(id) {}
  void remove();

 private:
  std::weak_ptr<detail::HookTable> table_;
  uint64_t id_ = 0;
};

class Module {
 public:
  Module();
  virtual ~Module();
  Module& operator=(const Module&) = delete;

  // ---- forward ----
  // The single-tensor forward that operator() and Sequential call. Modules with other
  // signatures define their own forward overloads and are called with kiln::nn::call().
  virtual Tensor forward(const Tensor& input);
  // Runs forward(input) inside a call frame (hooks, registration check, error context).
  // Inline (defined below nn::call): no frame of its own on the eager path.
  Tensor operator()(const Tensor& input);

  // ---- identity and printing ----
  // The class name without namespaces ("Linear"); used in printouts and error messages.
  virtual std::string type_name() const;
  // The layer's settings shown inside the parentheses of its printout
  // ("in_features=784, out_features=256, bias=true"); empty by default.
  virtual std::string extra_repr() const { return {}; }
  // The indented tree in PyTorch's format; operator<< prints the same.
  std::string repr() const;

  // ---- registration ----
  // Registers `tensor` as a parameter (a trainable leaf) and returns a handle sharing it.
  // An undefined tensor reserves the slot (e.g. Linear's bias with bias=false); walks skip it.
  // Both registrations refuse a tensor of more than max_state_elements() elements.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // Registers non-trainable state. persistent=false buffers move with to() but stay out of
  // the state dict.
  Tensor register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  // Registers `child` under `name` and returns it with call syntax (`fc1(x)`).
  template <class M>
  auto register_module(const std::string& name, std::shared_ptr<M> child);
  // Puts `child` in the place of the child registered as `name` (its position in walks and
  // in the state dict) and returns it. A member that held the old child still does: assign
  // the result to it (`fc = replace_module("fc", std::make_shared<Linear>(8, 2))`), as in
  // libtorch. An unknown name is an error listing the children.
  template <class M>
  ModulePtr<M> replace_module(const std::string& name, std::shared_ptr<M> child);
  // Removes the child `name` with everything under it from this module's walks and state
  // dict; an unknown name is an error listing the children.
  void unregister_module(const std::string& name);

  // ---- walks (registration order, depth first) ----
  // Shared tensors and modules are listed once (at their first path) unless
  // remove_duplicate is false, which lists every path (the state dict needs them all).
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(const std::string& prefix = "", bool recurse = true,
                                bool remove_duplicate = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(const std::string& prefix = "", bool recurse = true,
                             bool remove_duplicate = true) const;
  // Persistent buffers only (what the state dict holds).
  NamedTensors named_persistent_buffers(const std::string& prefix = "",
                                        bool remove_duplicate = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  const NamedModules& named_children() const { return children_; }
  // Every module of the tree, the root first. The root is not owned by a shared_ptr in
  // general, so modules() returns raw pointers valid while the tree lives.
  std::vector<Module*> modules();
  // include_self = false leaves the root out (libtorch's named_modules(prefix, false)).
  std::vector<std::pair<std::string, Module*>> named_modules(const std::string& prefix = "",
                                                             bool remove_duplicate = true,
                                                             bool include_self = true);
  // Calls fn on every module of the tree once, children before their parent.
  Module& apply(const std::function<void(Module&)>& fn);
  // The same walk with each module's dotted path (the root's is `prefix`).
  Module& apply(const std::function<void(const std::string& path, Module&)>& fn, const std::string& prefix = "");

  // The parameter / buffer / child registered directly on this module under `name`
  // (nullptr when there is none).
  Tensor* find_parameter(std::string_view name);
  Tensor* find_buffer(std::string_view name);
  std::shared_ptr<Module> find_child(std::string_view name) const;
  bool is_buffer_persistent(std::string_view name) const;

  // ---- whole-model state ----
  // Sets training mode on this module and every descendant (Dropout, BatchNorm read it).
  virtual Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  // Converts floating-point parameters and buffers (and their .grad) to `dtype` in place:
  // every handle to them (members, optimizers) sees the new data. Integer buffers such as
  // BatchNorm's num_batches_tracked keep their dtype, as in PyTorch.
  Module& to(DType dtype);
  // Moves parameters and buffers to `device` in place. The CPU is the only device today.
  Module& to(Device device);
  // Clears every parameter's gradient (set_to_none) or fills it with zeros.
  void zero_grad(bool set_to_none = true);
  // Sets requires_grad on every parameter (false freezes the module; frozen parameters stay
  // registered, move with to() and stay in the state dict).
  Module& requires_grad_(bool requires_grad = true);

  // ---- checkpoints (state_dict.cpp) ----
  // Every parameter and persistent buffer by dotted path, in registration order; a tensor
  // shared by two paths (tied weights) appears under both. The tensors are the module's own
  // (detached handles sharing storage), not copies.
  NamedTensors state_dict() const;
  // Copies `state` into the parameters and buffers (keeping every handle valid, so tied
  // weights stay tied and optimizers keep working). strict: any missing or unexpected key
  // or shape mismatch throws one error listing all of them, before anything is changed.
  // Not strict: shape mismatches still throw; missing and unexpected keys are returned.
  LoadStateDictResult load_state_dict(const NamedTensors& state, bool strict = true);
  // The same with the dict's keys renamed first (LoadStateDictOptions::rename).
  LoadStateDictResult load_state_dict(const NamedTensors& state, const LoadStateDictOptions& options);

  // ---- copies (clone.cpp) ----
  // A deep copy of this module and everything under it (libtorch's clone(), Python's
  // copy.deepcopy): parameters, buffers and gradients copied (onto `device` when given),
  // children cloned, and what the original shares the copy shares among its own (tied
  // weights, a child registered twice). The copy has the original's class, settings and
  // training mode: its members are copied, and a Tensor or ModulePtr member that refers to
  // the original's state or children refers to the copy's (a plain std::shared_ptr member
  // would still point at the original's child: hold children in ModulePtr, as
  // register_module returns). Forward hooks are not copied.
  // The class must be known to kiln, which copies through the class's copy constructor: it is
  // for kiln's layers and containers and for every class kiln saw by its type (registered with
  // register_module, held in a ModulePtr, pushed typed into a container, or derived from
  // Cloneable<Net>); kiln::nn::clone(ptr) makes any class known. Errors name the module and
  // the fix.
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const;

  // ---- lazy layers (build.cpp) ----
  // Materializes every lazy layer without real data (Keras's build((None, 20))): runs one
  // shape-only forward on inputs of these shapes (-1 in the leading dim means "any batch"),
  // drawing the same random values a dry run would. One shape per forward input.
  Module& build(const std::vector<Shape>& input_shapes, DType dtype = DType::Float32);

  // ---- hooks ----
  HookHandle register_forward_pre_hook(ForwardPreHook hook);
  HookHandle register_forward_hook(ForwardHook hook);
  bool has_forward_hooks() const;

  // True when this module or a descendant holds a defined parameter or buffer.
  bool has_state() const;
  // See allow_unregistered_call().
  bool unregistered_call_allowed() const { return unregistered_call_allowed_; }
  void set_unregistered_call_allowed(bool allowed) { unregistered_call_allowed_ = allowed; }

 protected:
  // Copies the settings of `other`, and its state from the clone() that is running; any
  // other copy (`Linear b = a;`) is an error, since b would share a's parameters.
  Module(const Module& other);
  // Containers rename and reorder their children; they keep the tree index current.
  NamedModules& mutable_children();
  void register_module_impl(const std::string& name, std::shared_ptr<Module> child);
  // Checks a name for a parameter, buffer or child: non-empty, no '.', not taken.
  void check_new_name(const std::string& name, const char* what) const;
  // Where child `name` sits in named_children(); an unknown name throws from `op`.
  size_t child_position(const std::string& name, const char* op) const;
  // Removes the parameter `name` registered on this module (ParameterDict::pop); it must exist.
  Tensor remove_parameter(const std::string& name);

 private:
  friend class detail::CallScope;
  friend class detail::CloneContext;
  struct BufferSlot {
    std::string name;
    Tensor tensor;
    bool persistent;
  };

  void run_pre_hooks(const std::vector<Tensor>& inputs);
  void run_post_hooks(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
  // Paths of every module of this tree, rebuilt when any registration happened since.
  std::shared_ptr<const detail::TreeIndex> tree_index() const;
  template <class Fn>
  void for_each_tensor(Fn&& fn);

  NamedTensors parameters_;
  std::vector<BufferSlot> buffers_;
  NamedModules children_;
  bool training_ = true;
  bool unregistered_call_allowed_ = false;
  std::shared_ptr<detail::HookTable> hooks_;
  mutable std::mutex index_mutex_;
  mutable std::shared_ptr<const detail::TreeIndex> index_;
};

std::ostream& operator<<(std::ostream& os, const Module& module);

// A shared_ptr to a module that can be called like a function: `fc1(x)` runs
// kiln::nn::call(*fc1, x). Converts to std::shared_ptr<M> and std::shared_ptr<Module>.
// Copying one inside a clone() gives the copy of the module it points at (see clone).
template <class M>
class ModulePtr : public std::shared_ptr<M> {
 public:
  ModulePtr() = default;
  ModulePtr(std::shared_ptr<M> p);
  ModulePtr(const ModulePtr& other);
  ModulePtr(ModulePtr&& other) noexcept = default;
  ModulePtr& operator=(const ModulePtr& other);
  ModulePtr& operator=(ModulePtr&& other) noexcept = default;
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const;
};

// A root that clones itself as libtorch's do: `struct Net : kiln::nn::Cloneable<Net>`, then
// `std::shared_ptr<Net> copy = net->clone();` (no reset() to write: see Module::clone).
template <class Derived>
class Cloneable : public Module {
 public:
  Cloneable();
  std::shared_ptr<Derived> clone(std::optional<Device> device = std::nullopt) const {
    return std::static_pointer_cast<Derived>(Module::clone(device));
  }
};

// Clones `module` (Module::clone) knowing its class from the pointer's type.
template <class M>
std::shared_ptr<M> clone(const std::shared_ptr<M>& module, std::optional<Device> device = std::nullopt);

// The opt-out from the registration check, for a module deliberately held by reference and
// not owned by the tree that calls it (e.g. a frozen teacher model). Its calls start a tree
// of their own; its state is not part of the caller's parameters or state dict.
void allow_unregistered_call(Module& module, bool allow = true);

// ---- call frames (what diagnostics and the tracer read) ----

struct CallFrame {
  const Module* module;
  std::string path;  // dotted path in the tree being run; "" for its root
};
// The modules being called on this thread, outermost first.
const std::vector<CallFrame>& call_stack();
// " (in module blocks.0, Linear)" for the innermost frame; "" outside any module.
std::string call_context();

namespace detail {

std::string demangle_type_name(const char* mangled);
// Converts a parameter or buffer in place: `slot`'s TensorImpl takes `converted`'s data, so
// every handle sharing it sees the new dtype/device.
void replace_tensor_data(const Tensor& slot, const Tensor& converted);

// Pushes a call frame for `module` after the registration check; pops it on destruction.
class CallScope {
 public:
  explicit CallScope(Module& module);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  bool hooked() const { return module_.has_forward_hooks(); }
  void pre(const std::vector<Tensor>& inputs) { module_.run_pre_hooks(inputs); }
  void post(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
    module_.run_post_hooks(inputs, outputs);
  }

 private:
  Module& module_;
};

inline void collect_tensors(std::vector<Tensor>& out, const Tensor& t) {
  out.push_back(t);
}
inline void collect_tensors(std::vector<Tensor>& out, const std::vector<Tensor>& ts) {
  out.insert(out.end(), ts.begin(), ts.end());
}
template <class A, class B>
void collect_tensors(std::vector<Tensor>& out, const std::pair<A, B>& p);
template <class... Ts>
void collect_tensors(std::vector<Tensor>& out, const std::tuple<Ts...>& t);
template <class T>
void collect_tensors(std::vector<Tensor>&, const T&) {}  // not a tensor: hooks do not see it
template <class A, class B>
void collect_tensors(std::vector<Tensor>& out, const std::pair<A, B>& p) {
  collect_tensors(out, p.first);
  collect_tensors(out, p.second);
}
template <class... Ts>
void collect_tensors(std::vector<Tensor>& out, const std::tuple<Ts...>& t) {
  std::apply([&](const auto&... e) { (collect_tensors(out, e), ...); }, t);
}

}  // namespace detail

namespace detail {
// Iterates a container's children as shared_ptr<Module> (`for (auto& layer : *blocks)`).
class ChildIterator {
 public:
  using Base = NamedModules::const_iterator;
  using value_type = std::shared_ptr<Module>;
  using difference_type = std::ptrdiff_t;
  using reference = const std::shared_ptr<Module>&;
  using pointer = const std::shared_ptr<Module>*;
  using iterator_category = std::forward_iterator_tag;
  ChildIterator() = default;
  explicit ChildIterator(Base it) : it_(it) {}
  reference operator*() const { return it_->second; }
  pointer operator->() const { return &it_->second; }
  ChildIterator& operator++() {
    ++it_;
    return *this;
  }
  ChildIterator operator++(int) {
    auto old = *this;
    ++it_;
    return old;
  }
  friend bool operator==(const ChildIterator& a, const ChildIterator& b) = default;

 private:
  Base it_;
};

// How clone() copies a module of a class it knows (Module::clone): through the class's copy
// constructor. Classes are remembered once each, process-wide, by their std::type_info.
using ModuleCopier = std::shared_ptr<Module> (*)(const Module& original);
// `copier` is nullptr for a class that cannot be copied (a member such as a std::unique_ptr).
void remember_module_class(const std::type_info& type, ModuleCopier copier);
template <class M>
std::shared_ptr<Module> copy_module(const Module& original) {
  return std::make_shared<M>(static_cast<const M&>(original));
}
template <class M>
void remember_class() {
  if constexpr (!std::is_abstract_v<M> && !std::is_same_v<M, Module>) {
    static const bool remembered = [] {
      ModuleCopier copier = nullptr;
      if constexpr (std::is_copy_constructible_v<M>) copier = &copy_module<M>;
      remember_module_class(typeid(M), copier);
      return true;
    }();
    (void)remembered;
  }
}
// `module` as a Module pointer, its class remembered first (for containers' typed inserts).
template <class M>
std::shared_ptr<Module> remembered(std::shared_ptr<M> module) {
  remember_class<M>();
  return module;
}
// The copy of `module` in the clone() running on this thread; nullptr outside one or for a
// module outside the tree being cloned.
std::shared_ptr<Module> clone_remap_module(const std::shared_ptr<Module>& module);
template <class M>
std::shared_ptr<M> module_copy_of(const std::shared_ptr<M>& p) {
  if (!p || kiln::detail::tensor_remaps_active.load(std::memory_order_relaxed) == 0) return p;
  std::shared_ptr<Module> copy = clone_remap_module(p);
  return copy ? std::static_pointer_cast<M>(copy) : p;
}

// Casts a container element to the type the caller expects, with an error naming both.
template <class M>
ModulePtr<M> cast_child(const std::shared_ptr<Module>& child, const std::string& where) {
  auto typed = std::dynamic_pointer_cast<M>(child);
  KILN_CHECK(typed != nullptr, "[", where, "] the element is a ", child->type_name(), ", not a ",
             demangle_type_name(typeid(M).name()),
             ". Fix: ask for its real type, or use the untyped accessor (operator[]).");
  return typed;
}
}  // namespace detail

// Calls module.forward(args...) inside a call frame: the way to call a module whose forward
// takes other arguments than one tensor (`kiln::nn::call(*attn, q, k, v)`).
template <class M, class... Args>
decltype(auto) call(M& module, Args&&... args) {
  static_assert(std::is_base_of_v<Module, M>, "kiln::nn::call: the callee must be a Module");
  detail::CallScope scope(module);
  if (!scope.hooked()) return module.forward(std::forward<Args>(args)...);
  std::vector<Tensor> inputs;
  (detail::collect_tensors(inputs, args), ...);
  scope.pre(inputs);
  using Out = decltype(module.forward(std::forward<Args>(args)...));
  if constexpr (std::is_void_v<Out>) {
    module.forward(std::forward<Args>(args)...);
    scope.post(inputs, {});
  } else {
    auto out = module.forward(std::forward<Args>(args)...);
    std::vector<Tensor> outputs;
    detail::collect_tensors(outputs, out);
    scope.post(inputs, outputs);
    return Out(std::move(out));
  }
}

inline Tensor Module::operator()(const Tensor& input) {
  return call(*this, input);
}

template <class M>
ModulePtr<M>::ModulePtr(std::shared_ptr<M> p) : std::shared_ptr<M>(std::move(p)) {
  detail::remember_class<M>();
}
template <class M>
ModulePtr<M>::ModulePtr(const ModulePtr& other) : std::shared_ptr<M>(detail::module_copy_of<M>(other)) {}
template <class M>
ModulePtr<M>& ModulePtr<M>::operator=(const ModulePtr& other) {
  std::shared_ptr<M>::operator=(detail::module_copy_of<M>(other));
  return *this;
}

template <class Derived>
Cloneable<Derived>::Cloneable() {
  detail::remember_class<Derived>();
}

template <class M>
std::shared_ptr<M> clone(const std::shared_ptr<M>& module, std::optional<Device> device) {
  static_assert(std::is_base_of_v<Module, M>, "kiln::nn::clone: the argument must be a Module");
  KILN_CHECK(module != nullptr, "[kiln::nn::clone] got a null module. Fix: pass a constructed module.");
  detail::remember_class<M>();
  return std::static_pointer_cast<M>(module->clone(device));
}

template <class M>
template <class... Args>
decltype(auto) ModulePtr<M>::operator()(Args&&... args) const {
  KILN_CHECK(this->get() != nullptr, "[Module] called an empty ModulePtr<",
             detail::demangle_type_name(typeid(M).name()),
             ">. Fix: assign it from register_module(...) before calling it.");
  return call(**this, std::forward<Args>(args)...);
}

template <class M>
auto Module::register_module(const std::string& name, std::shared_ptr<M> child) {
  static_assert(std::is_base_of_v<Module, M>, "register_module: the child must be a Module");
  detail::remember_class<M>();
  register_module_impl(name, child);
  return ModulePtr<M>(std::move(child));
}

template <class M>
ModulePtr<M> Module::replace_module(const std::string& name, std::shared_ptr<M> child) {
  static_assert(std::is_base_of_v<Module, M>, "replace_module: the child must be a Module");
  const size_t at = child_position(name, "replace_module");
  KILN_CHECK(child != nullptr && child.get() != this, "[Module::replace_module] ", type_name(), ": the new child '",
             name, "' is null or this module itself. Fix: pass a constructed module.");
  detail::remember_class<M>();
  mutable_children()[at].second = child;
  return ModulePtr<M>(std::move(child));
}

}  // namespace kiln::nn
