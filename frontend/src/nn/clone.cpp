// Module::clone: a deep copy of a module tree that keeps the user's classes and members.
//
// A module's members (`Tensor weight`, `ModulePtr<Linear> fc`, its settings) are copied by
// its class's own copy constructor, remembered by type wherever kiln saw the class
// (register_module<M>, ModulePtr<M>, the containers' typed inserts, nn::clone<M>,
// Cloneable<M>; kiln's own layers up front). While that constructor runs, a CloneContext is
// installed on the thread: Module's copy constructor takes the copied registries from it, and
// Tensor's and ModulePtr's copy constructors ask it for the copy of what they point at. So the
// members end up on the copy's state without a libtorch-style reset() in every layer.
//
// Every state tensor of the tree is copied before any constructor runs, so a member that
// refers to a parameter registered elsewhere in the tree (a head tied to an embedding) finds
// its copy whatever the registration order.
#include <mutex>
#include <optional>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd.h"
#include "kiln/nn.h"
#include "kiln/nn/uninitialized.h"
#include "module_internal.h"

namespace kiln::nn {

namespace detail {

namespace {

struct ClassTable {
  std::mutex mutex;
  std::unordered_map<std::type_index, ModuleCopier> copiers;
};
ClassTable& class_table() {
  static ClassTable table;
  return table;
}

// kiln's own layers and containers, so that a tree holding one as a plain
// std::shared_ptr<Module> (a Sequential built from a list) still clones.
template <class... Ms>
void remember_classes() {
  (remember_class<Ms>(), ...);
}
void remember_kiln_classes() {
  static const bool done = [] {
    remember_classes<Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict>();
    remember_classes<Identity, Linear, LazyLinear, Flatten, Unflatten, Embedding, EmbeddingBag,
                     MultiheadAttention>();
    remember_classes<Dropout, Dropout1d, Dropout2d, Dropout3d>();
    remember_classes<LayerNorm, RMSNorm, GroupNorm, BatchNorm1d, BatchNorm2d, InstanceNorm1d,
                     InstanceNorm2d, InstanceNorm3d>();
    remember_classes<Conv1d, Conv2d, Conv3d, LazyConv2d, ConvTranspose1d, ConvTranspose2d,
                     ConvTranspose3d>();
    remember_classes<MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d,
                     AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, MaxUnpool2d>();
    remember_classes<RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell>();
    remember_classes<TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer,
                     TransformerDecoder, Transformer>();
    remember_classes<Upsample, PixelShuffle, PixelUnshuffle>();
    remember_classes<ZeroPad1d, ZeroPad2d, ZeroPad3d, ReflectionPad1d, ReflectionPad2d,
                     ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                     CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,
                     ConstantPad3d>();
    remember_classes<ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax, PReLU, LeakyReLU, ELU,
                     Softplus, Mish, Hardswish, Hardsigmoid, GLU>();
    return true;
  }();
  (void)done;
}

// How to copy m's class; nullopt for a class kiln never saw (a nullptr copier: seen, but
// not copyable).
std::optional<ModuleCopier> copier_of(const Module& m) {
  remember_kiln_classes();
  ClassTable& table = class_table();
  std::lock_guard lock(table.mutex);
  auto it = table.copiers.find(std::type_index(typeid(m)));
  if (it == table.copiers.end()) return std::nullopt;
  return it->second;
}

}  // namespace

void remember_module_class(const std::type_info& type, ModuleCopier copier) {
  ClassTable& table = class_table();
  std::lock_guard lock(table.mutex);
  table.copiers.emplace(std::type_index(type), copier);
}

class CloneContext final : public kiln::detail::TensorRemap {
 public:
  CloneContext(const Module& root, std::optional<Device> device) : device_(device) {
    collect(root, "");
  }

  std::shared_ptr<TensorImpl> find(const TensorImpl* impl) const override {
    auto it = tensors_.find(impl);
    return it == tensors_.end() ? nullptr : it->second;
  }

  // The copy of a registered parameter or buffer (undefined stays undefined).
  Tensor tensor_copy(const Tensor& original) const {
    if (!original.defined()) return Tensor();
    std::shared_ptr<TensorImpl> copy = find(original.impl());
    KILN_CHECK(copy != nullptr, "[Module::clone] a state tensor was registered while the clone ran. "
               "Fix: register parameters and buffers in constructors, not in copy constructors.");
    return Tensor(std::move(copy));
  }

  // The copy of `original` (made once: a module registered twice stays shared).
  std::shared_ptr<Module> module_copy(const Module& original) {
    if (auto it = modules_.find(&original); it != modules_.end()) return it->second;
    const std::string& path = paths_.at(&original);
    KILN_CHECK(!in_progress_.contains(&original), "[Module::clone] ", where(path, original),
               " refers to a module that is still being copied (its ancestor). Fix: do not "
               "hold a ModulePtr to a parent; pass what the child needs as arguments.");
    in_progress_.insert(&original);
    std::shared_ptr<Module> copy;
    {
      kiln::detail::TensorRemapScope remap(*this);
      ActiveScope active(this);
      if (typeid(original) == typeid(Module)) {
        copy = std::shared_ptr<Module>(new Module(original));
      } else {
        std::optional<ModuleCopier> copier = copier_of(original);
        KILN_CHECK(copier.has_value(), "[Module::clone] ", where(path, original),
                   ": kiln has not seen this class by its type (it was only handled as a "
                   "std::shared_ptr<Module>), so it cannot call its copy constructor. Fix: "
                   "clone the root with kiln::nn::clone(ptr), derive the class from "
                   "kiln::nn::Cloneable<", original.type_name(),
                   ">, or add it with its own type (register_module, or push_back of a "
                   "std::shared_ptr<", original.type_name(), ">).");
        KILN_CHECK(*copier != nullptr, "[Module::clone] ", where(path, original),
                   ": its class cannot be copy-constructed (a member such as a std::unique_ptr "
                   "or std::mutex has no copy). Fix: hold such members in a std::shared_ptr, "
                   "or give the class a copy constructor that copies its settings.");
        copy = (*copier)(original);
      }
    }
    in_progress_.erase(&original);
    modules_.emplace(&original, copy);
    return copy;
  }

  // The copy of `module` if it is part of the tree being cloned.
  std::shared_ptr<Module> remap_module(const Module& module) {
    if (!paths_.contains(&module)) return nullptr;
    return module_copy(module);
  }

  static CloneContext* active() { return active_; }

 private:
  class ActiveScope {
   public:
    explicit ActiveScope(CloneContext* context) : previous_(active_) { active_ = context; }
    ~ActiveScope() { active_ = previous_; }
    ActiveScope(const ActiveScope&) = delete;
    ActiveScope& operator=(const ActiveScope&) = delete;

   private:
    CloneContext* previous_;
  };

  static std::string where(const std::string& path, const Module& m) {
    return (path.empty() ? std::string("the root") : "'" + path + "'") + " (" + m.type_name() + ")";
  }

  // Copies every state tensor of the tree (each once) and records each module's path.
  void collect(const Module& m, const std::string& path) {
    if (!paths_.emplace(&m, path).second) return;
    for (const auto& [name, t] : m.parameters_) add(t, path, name);
    for (const auto& slot : m.buffers_) add(slot.tensor, path, slot.name);
    for (const auto& [name, child] : m.children_) collect(*child, path.empty() ? name : path + "." + name);
  }

  void add(const Tensor& t, const std::string& path, const std::string& name) {
    if (!t.defined() || tensors_.contains(t.impl())) return;
    const std::string full = path.empty() ? name : path + "." + name;
    KILN_CHECK(!is_uninitialized(t), "[Module::clone] '", full,
               "' is an uninitialized parameter (a lazy layer that has not run yet). Fix: run "
               "one forward, or model.build(input_shapes), before clone().");
    NoGradGuard no_grad;
    Tensor copy = on_device(t.detach());
    copy.set_requires_grad(t.requires_grad());
    if (Tensor grad = t.grad(); grad.defined()) copy.set_grad(on_device(grad.detach()));
    tensors_.emplace(t.impl(), copy.impl_ptr());
  }

  Tensor on_device(const Tensor& t) const {
    if (device_ && *device_ != t.device()) return t.to(*device_);
    return t.clone();
  }

  std::optional<Device> device_;
  std::unordered_map<const TensorImpl*, std::shared_ptr<TensorImpl>> tensors_;
  std::unordered_map<const Module*, std::string> paths_;
  std::unordered_map<const Module*, std::shared_ptr<Module>> modules_;
  std::unordered_set<const Module*> in_progress_;
  static thread_local CloneContext* active_;
};

thread_local CloneContext* CloneContext::active_ = nullptr;

std::shared_ptr<Module> clone_remap_module(const std::shared_ptr<Module>& module) {
  CloneContext* context = CloneContext::active();
  return context && module ? context->remap_module(*module) : nullptr;
}

}  // namespace detail

Module::Module(const Module& other)
    : training_(other.training_), unregistered_call_allowed_(other.unregistered_call_allowed_) {
  detail::CloneContext* context = detail::CloneContext::active();
  KILN_CHECK(context != nullptr, "[Module] a ", other.type_name(),
             " was copied with its copy constructor; the copy would share the original's "
             "parameters. Fix: call clone() (or kiln::nn::clone(ptr)) for a deep copy, or share "
             "the module through a std::shared_ptr.");
  for (const auto& [name, t] : other.parameters_) parameters_.emplace_back(name, context->tensor_copy(t));
  for (const auto& slot : other.buffers_)
    buffers_.push_back({slot.name, context->tensor_copy(slot.tensor), slot.persistent});
  for (const auto& [name, child] : other.children_) children_.emplace_back(name, context->module_copy(*child));
  detail::registration_epoch().fetch_add(1);
}

std::shared_ptr<Module> Module::clone(std::optional<Device> device) const {
  KILN_CHECK(detail::CloneContext::active() == nullptr, "[Module::clone] ", type_name(),
             ": clone() was called from a copy constructor while another clone runs. Fix: let "
             "the outer clone copy the members (a ModulePtr member is cloned with its module).");
  detail::CloneContext context(*this, device);
  return context.module_copy(*this);
}

}  // namespace kiln::nn
