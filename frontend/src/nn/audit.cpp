// kiln::nn::audit (see audit.h): the op recorder that classifies every tensor forward uses,
// the snapshot that makes the audit free of side effects, and the checks that turn what
// forward and backward did into findings with module paths and fixes.
#include "kiln/nn/audit.h"

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "kiln/autograd.h"
#include "kiln/autograd/node.h"
#include "kiln/dispatch.h"
#include "kiln/generator.h"
#include "kiln/tensor_ops/elementwise.h"

namespace kiln::nn {

const char* audit_severity_name(AuditSeverity severity) {
  switch (severity) {
    case AuditSeverity::Info:
      return "note";
    case AuditSeverity::Warning:
      return "warning";
    case AuditSeverity::Error:
      return "error";
  }
  return "?";
}

bool AuditReport::ok() const {
  for (const AuditFinding& f : findings)
    if (f.severity != AuditSeverity::Info) return false;
  return true;
}

std::vector<AuditFinding> AuditReport::of(AuditCheck check) const {
  std::vector<AuditFinding> out;
  for (const AuditFinding& f : findings)
    if (f.check == check) out.push_back(f);
  return out;
}

std::string AuditReport::to_string() const {
  int counts[3] = {0, 0, 0};
  for (const AuditFinding& f : findings) ++counts[static_cast<int>(f.severity)];
  std::ostringstream os;
  os << "audit of " << model_type << ": ";
  if (ops > 0) os << ops << " op calls, ";
  os << trainable_parameters << " trainable parameters (" << parameters_with_grad
     << " received a gradient): ";
  if (findings.empty()) {
    os << "no findings\n";
    return os.str();
  }
  const char* names[3][2] = {{"note", "notes"}, {"warning", "warnings"}, {"error", "errors"}};
  bool first = true;
  for (int s = 2; s >= 0; --s) {
    if (counts[s] == 0) continue;
    os << (first ? "" : ", ") << counts[s] << " " << names[s][counts[s] == 1 ? 0 : 1];
    first = false;
  }
  os << "\n";
  for (const AuditFinding& f : findings)
    os << "  " << audit_severity_name(f.severity) << ": " << f.message << "\n";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const AuditReport& report) {
  return os << report.to_string();
}

namespace {

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + " " + shape_str(t.sizes());
}

// "blocks.0 (Block)", "<root> (Net)"; findings whose module is unknown say so.
std::string where(const std::string& path, const std::string& type) {
  if (type.empty()) return "<unknown module>";
  return (path.empty() ? "<root>" : path) + " (" + type + ")";
}

std::string owner_path(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

std::string local_name(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

AuditFinding finding(AuditSeverity severity, AuditCheck check, std::string path, std::string type,
                     std::string tensor, std::string op, std::string text) {
  AuditFinding f;
  f.severity = severity;
  f.check = check;
  f.message = where(path, type) + ": " + text;
  f.module_path = std::move(path);
  f.module_type = std::move(type);
  f.tensor = std::move(tensor);
  f.op = std::move(op);
  return f;
}

// Saves the .grad of every leaf this backward may write and clears it, so that a defined
// .grad afterwards means "this backward reached it"; restore() puts the old ones back. The
// leaves are held weakly: a tensor made per call must still die when the call ends.
class GradSaver {
 public:
  void save(const Tensor& t) {
    auto [it, added] = index_.try_emplace(t.impl(), entries_.size());
    if (!added && !entries_[it->second].leaf.expired()) return;
    if (!added) it->second = entries_.size();  // the address was reused by a new tensor
    AutogradMeta* meta = t.impl()->autograd.get();
    entries_.push_back({t.impl_ptr(), meta ? meta->grad : nullptr});
    if (meta) meta->grad = nullptr;
  }
  void restore() noexcept {
    for (Entry& e : entries_)
      if (auto leaf = e.leaf.lock())
        if (leaf->autograd || e.old) leaf->autograd_meta().grad = std::move(e.old);
    entries_.clear();
    index_.clear();
  }

 private:
  struct Entry {
    std::weak_ptr<TensorImpl> leaf;
    std::shared_ptr<TensorImpl> old;
  };
  std::vector<Entry> entries_;
  std::unordered_map<const TensorImpl*, size_t> index_;
};

// Everything forward and backward may change, put back by restore(): buffer values (only
// those whose storage version moved), training flags and the default generator's position.
class ModelSnapshot {
 public:
  explicit ModelSnapshot(Module& model) : rng_offset_(default_generator().offset()) {
    NoGradGuard no_grad;
    for (auto& [path, m] : model.named_modules()) training_.emplace_back(m, m->is_training());
    for (auto& [path, b] : model.named_buffers()) buffers_.push_back({b, b.clone(), b.version()});
  }
  ~ModelSnapshot() {
    if (restored_) return;
    try {
      restore();
    } catch (...) {  // already unwinding from forward's exception: that one is the news
    }
  }
  ModelSnapshot(const ModelSnapshot&) = delete;
  ModelSnapshot& operator=(const ModelSnapshot&) = delete;

  void restore_buffers() {
    NoGradGuard no_grad;
    for (SavedBuffer& b : buffers_) {
      if (b.buffer.version() == b.version) continue;
      b.buffer.copy_(b.value);
      b.version = b.buffer.version();
    }
  }

  void restore() {
    restored_ = true;
    restore_buffers();
    // train(on) recurses, so one module's call can undo a descendant's flag (a module shared
    // under two parents): repeat until every flag is back.
    for (size_t round = 0; round <= training_.size(); ++round) {
      bool changed = false;
      for (auto& [m, on] : training_) {
        if (m->is_training() == on) continue;
        m->train(on);
        changed = true;
      }
      if (!changed) break;
    }
    default_generator().set_offset(rng_offset_);
  }

 private:
  struct SavedBuffer {
    Tensor buffer;
    Tensor value;
    uint64_t version;
  };
  std::vector<std::pair<Module*, bool>> training_;
  std::vector<SavedBuffer> buffers_;
  uint64_t rng_offset_;
  bool restored_ = false;
};

}  // namespace

namespace detail {

// The op recorder and what it saw. Installed (by AuditForwardScope) during forward only.
class AuditState final : public DispatchInterceptor {
 public:
  AuditState(Module& model, const std::vector<Tensor>& inputs) : model_(model) {
    for (auto& [path, t] : model.named_parameters()) {
      add_registration(t, path, true);
      params_.emplace_back(path, t);
      if (t.requires_grad()) grads_.save(t);
    }
    for (auto& [path, t] : model.named_buffers()) add_registration(t, path, false);
    for (const Tensor& t : inputs) {
      if (!t.defined()) continue;
      if (t.impl()->storage) input_storages_.insert(t.impl()->storage.get());
      if (t.requires_grad() && t.is_leaf()) grads_.save(t);
    }
  }
  ~AuditState() override { grads_.restore(); }

  void set_previous(DispatchInterceptor* previous) { previous_ = previous; }

  Tensors intercept(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                    TensorTypes&&) override {
    ++ops_;
    for (const Tensor& t : inputs) classify(t, op.name);
    Tensors outputs;
    {
      // The kernel and autograd run as usual, with this recorder out of the way.
      struct Reinstall {
        AuditState* self;
        ~Reinstall() { set_interceptor(self); }
      } reinstall{this};
      set_interceptor(previous_);
      outputs = dispatch(op, inputs, attrs);
    }
    for (const Tensor& o : outputs) {
      if (!o.defined()) continue;
      bool is_input = false;  // an op may hand an input back; it stays what it was
      for (const Tensor& t : inputs) is_input |= t.defined() && t.is_same(o);
      if (!is_input) produced_[o.impl()] = o.impl_ptr();
    }
    return outputs;
  }

  // In-place writes (BatchNorm's running statistics): the target is read as well as
  // written, so it is classified like an input; the write runs with the recorder away.
  bool intercept_into(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                      const Tensor& self) override {
    ++ops_;
    for (const Tensor& t : inputs) classify(t, op.name);
    classify(self, op.name);
    struct Reinstall {
      AuditState* self;
      ~Reinstall() { set_interceptor(self); }
    } reinstall{this};
    set_interceptor(previous_);
    dispatch_into(op, inputs, attrs, self);
    return true;
  }

  // Call after backward, before the graph is dropped.
  void read_gradients() {
    for (auto& [path, t] : params_)
      if (t.requires_grad() && t.grad().defined()) with_grad_.insert(t.impl());
    for (Candidate& c : candidates_)
      if (auto impl = c.impl.lock()) c.got_grad = c.trainable_leaf && Tensor(impl).grad().defined();
  }

  // Call after the loss, outputs and graph are gone: temporaries made per call have died.
  AuditReport report() {
    AuditReport r;
    r.model_type = model_.type_name();
    r.ops = ops_;
    auto modules = model_.named_modules("", /*remove_duplicate=*/false);
    std::unordered_map<std::string, Module*> module_at;
    for (auto& [path, m] : modules) module_at.emplace(path, m);

    for (const Candidate& c : candidates_) {
      if (c.storage.expired()) continue;  // made per call, not kept by anyone: a constant
      if (c.got_grad) {
        r.findings.push_back(finding(
            AuditSeverity::Error, AuditCheck::GradientOnUnregistered, c.path, c.type, c.desc, c.op,
            "a " + c.desc + " tensor used by " + c.op +
                " received a gradient but is not a registered parameter: an optimizer built "
                "from parameters() will not train it, to() will not move it and state_dict() "
                "will not save it. Fix: register_parameter(\"name\", t) in " +
                constructor_of(c.type) + " and use the handle it returns."));
      } else {
        r.findings.push_back(finding(
            AuditSeverity::Warning, AuditCheck::UnregisteredTensor, c.path, c.type, c.desc, c.op,
            "a " + c.desc + " tensor used by " + c.op +
                " is not a parameter, buffer or input — to() will not move it and "
                "state_dict() will not save it. Fix: register_buffer(\"name\", t) in " +
                constructor_of(c.type) +
                " (persistent=false for a constant that need not be saved), or "
                "register_parameter if it should train."));
      }
    }

    for (auto& [path, t] : params_) {
      if (!t.requires_grad()) continue;  // frozen: no gradient is expected
      ++r.trainable_parameters;
      if (with_grad_.count(t.impl())) {
        ++r.parameters_with_grad;
        continue;
      }
      std::string owner = owner_path(path);
      Module* m = module_at.count(owner) ? module_at[owner] : &model_;
      std::string desc = describe(t);
      std::string text = "parameter " + path + " (" + desc + ") received no gradient: ";
      auto use = uses_.find(t.impl()->storage.get());
      if (use == uses_.end()) {
        text += "forward never used it. Fix: use it in forward";
      } else {
        text += "forward used it (" + use->second.op + " in " +
                where(use->second.path, use->second.type) +
                ") but the gradient did not reach it: detached, used under NoGradGuard, or "
                "its result does not reach the output. Fix: use the parameter itself (not "
                ".detach() or a copy) in ops that reach the loss";
      }
      text += ", remove it, or freeze it with requires_grad_(false) if it is not meant to train.";
      r.findings.push_back(finding(AuditSeverity::Warning, AuditCheck::NoGradient, owner,
                                   m->type_name(), path + " (" + desc + ")",
                                   use == uses_.end() ? "" : use->second.op, text));
    }

    add_sharing_findings(modules, module_at, r.findings);
    return r;
  }

 private:
  struct Registration {
    std::string path;
    bool parameter;
  };
  struct Use {
    std::string op, path, type;
  };
  // A tensor forward used that the tree does not own, seen at its first use.
  struct Candidate {
    std::weak_ptr<TensorImpl> impl;
    std::weak_ptr<Storage> storage;
    std::string path, type, op, desc;
    bool trainable_leaf = false;
    bool got_grad = false;
  };

  static std::string constructor_of(const std::string& type) {
    return type.empty() ? std::string("the constructor of the module that owns it")
                        : type + "'s constructor";
  }

  void add_registration(const Tensor& t, const std::string& path, bool parameter) {
    by_impl_.try_emplace(t.impl(), Registration{path, parameter});
    if (t.impl()->storage)
      by_storage_.try_emplace(t.impl()->storage.get(), Registration{path, parameter});
  }

  void classify(const Tensor& t, const std::string& op) {
    if (!t.defined() || t.impl()->is_wrapped_number) return;  // a host scalar (x * 2)
    TensorImpl* impl = t.impl();
    if (auto it = produced_.find(impl); it != produced_.end()) {
      if (!it->second.expired()) return;
      produced_.erase(it);  // that output died and a new tensor took its address
    }
    // Views share the storage of what they view: a member view of a parameter is the
    // parameter (it moves and saves with it).
    Storage* storage = impl->storage.get();
    if (by_impl_.count(impl) || (storage && by_storage_.count(storage))) {
      if (storage) uses_.try_emplace(storage, Use{op, frame_path(), frame_type()});
      return;
    }
    if (storage && input_storages_.count(storage)) return;
    if (auto it = candidate_index_.find(impl);
        it != candidate_index_.end() && !candidates_[it->second].impl.expired())
      return;
    Candidate c;
    c.impl = t.impl_ptr();
    c.storage = impl->storage;
    c.op = op;
    c.desc = describe(t);
    c.trainable_leaf = t.requires_grad() && t.is_leaf();
    c.path = frame_path();
    c.type = frame_type();
    candidate_index_[impl] = candidates_.size();
    candidates_.push_back(std::move(c));
    if (candidates_.back().trainable_leaf) grads_.save(t);
  }

  static std::string frame_path() {
    const auto& stack = call_stack();
    return stack.empty() ? std::string() : stack.back().path;
  }
  static std::string frame_type() {
    const auto& stack = call_stack();
    return stack.empty() ? std::string() : stack.back().module->type_name();
  }

  // One tensor or module registered at several paths. A registration is (owner module, local
  // name): paths that differ only because an ancestor module is shared are one registration,
  // reported once as that ancestor's sharing.
  void add_sharing_findings(const std::vector<std::pair<std::string, Module*>>& modules,
                            std::unordered_map<std::string, Module*>& module_at,
                            std::vector<AuditFinding>& out) {
    using Key = std::pair<const Module*, std::string>;
    auto registration_of = [&](const std::string& path) {
      return Key{module_at[owner_path(path)], local_name(path)};
    };

    // Shared modules (tied weights through one child): notes.
    std::vector<Module*> order;
    std::unordered_map<Module*, std::vector<std::pair<Key, std::string>>> module_regs;
    for (const auto& [path, m] : modules) {
      if (path.empty()) continue;
      auto& regs = module_regs[m];
      if (regs.empty()) order.push_back(m);
      Key key = registration_of(path);
      bool known = false;
      for (const auto& r : regs) known |= r.first == key;
      if (!known) regs.emplace_back(key, path);
    }
    for (Module* m : order) {
      const auto& regs = module_regs[m];
      if (regs.size() < 2 || !m->has_state()) continue;
      std::string others;
      for (size_t i = 1; i < regs.size(); ++i) others += (i > 1 ? ", " : "") + regs[i].second;
      size_t n = m->parameters().size();
      out.push_back(finding(
          AuditSeverity::Info, AuditCheck::SharedModule, regs[0].second, m->type_name(), "", "",
          "the same " + m->type_name() + " module is also registered as " + others + ": its " +
              std::to_string(n) + (n == 1 ? " parameter is" : " parameters are") +
              " shared (tied weights); parameters() lists them once and state_dict() saves "
              "them under every path. Fix: nothing if the sharing is deliberate."));
    }

    // Tensors: grouped by the memory they show (storage, offset, geometry, dtype), so two
    // leaves over one memory are caught as well as one leaf registered twice.
    struct Entry {
      std::string path;
      Tensor tensor;
      bool parameter;
      Key registration;
    };
    using DataKey =
        std::tuple<const void*, int64_t, std::vector<int64_t>, std::vector<int64_t>, int>;
    std::map<DataKey, std::vector<Entry>> groups;
    std::vector<DataKey> group_order;
    auto add = [&](const NamedTensors& named, bool parameter) {
      for (const auto& [path, t] : named) {
        const void* mem = t.impl()->storage ? static_cast<const void*>(t.impl()->storage.get())
                                            : static_cast<const void*>(t.impl());
        DataKey key{mem, t.storage_offset(),
                    std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                    std::vector<int64_t>(t.strides().begin(), t.strides().end()),
                    static_cast<int>(t.dtype())};
        auto& g = groups[key];
        if (g.empty()) group_order.push_back(key);
        Key reg = registration_of(path);
        bool known = false;
        for (const Entry& e : g) known |= e.registration == reg && e.parameter == parameter;
        if (!known) g.push_back({path, t, parameter, reg});
      }
    };
    add(model_.named_parameters("", true, /*remove_duplicate=*/false), true);
    add(model_.named_buffers("", true, /*remove_duplicate=*/false), false);

    for (const DataKey& key : group_order) {
      const auto& g = groups[key];
      for (size_t i = 1; i < g.size(); ++i) {
        const Entry& first = g[0];
        const Entry& e = g[i];
        const char* first_kind = first.parameter ? "parameter" : "buffer";
        const char* kind = e.parameter ? "parameter" : "buffer";
        std::string owner = owner_path(e.path);
        std::string type = module_at[owner]->type_name();
        std::string desc = describe(e.tensor);
        bool same_tensor = first.tensor.is_same(e.tensor);
        if (same_tensor && first.parameter == e.parameter &&
            first.registration.first != e.registration.first) {
          // One tensor in two modules: the usual way to tie an output layer to an embedding.
          out.push_back(finding(
              AuditSeverity::Info, AuditCheck::DuplicateRegistration, owner, type, desc, "",
              std::string("the ") + desc + " " + kind + " " + first.path +
                  " is also registered as " + e.path +
                  " (weight tying): parameters() lists it once and state_dict() saves it under "
                  "both names. Fix: nothing if the tie is deliberate; otherwise give " +
                  e.path + " a tensor of its own."));
          continue;
        }
        std::string text =
            same_tensor
                ? std::string("the ") + desc + " " + first_kind + " " + first.path +
                      " is registered again as " + kind + " " + e.path +
                      ": parameters() lists it once, but state_dict() saves it under both names "
                      "and load_state_dict() writes it twice."
                : std::string("the ") + desc + " " + kind + " " + e.path +
                      " shares its memory with " + first_kind + " " + first.path +
                      ": two registered tensors over one memory, so an optimizer updates it "
                      "twice per step and state_dict() saves it twice.";
        text +=
            " Fix: register each tensor once (register_parameter(\"w2\", w1) registers w1 "
            "again); to share a layer, register the same child module at both places.";
        out.push_back(finding(AuditSeverity::Warning, AuditCheck::DuplicateRegistration, owner,
                              type, desc, "", text));
      }
    }
  }

  Module& model_;
  DispatchInterceptor* previous_ = nullptr;
  int64_t ops_ = 0;
  std::unordered_map<const TensorImpl*, Registration> by_impl_;
  std::unordered_map<const Storage*, Registration> by_storage_;
  std::unordered_set<const Storage*> input_storages_;
  NamedTensors params_;
  // Outputs of this forward's ops. Weak, so intermediates are freed as usual; a weak_ptr
  // also tells a dead output from a new tensor that reused its address.
  std::unordered_map<const TensorImpl*, std::weak_ptr<TensorImpl>> produced_;
  std::unordered_map<const Storage*, Use> uses_;  // first use of each registered tensor
  std::vector<Candidate> candidates_;
  std::unordered_map<const TensorImpl*, size_t> candidate_index_;
  std::unordered_set<const TensorImpl*> with_grad_;
  GradSaver grads_;
};

AuditForwardScope::AuditForwardScope(AuditState& state) : state_(state) {
  previous_ = set_interceptor(&state_);
  state_.set_previous(previous_);
  installed_ = true;
}

AuditForwardScope::~AuditForwardScope() {
  if (installed_) set_interceptor(previous_);
}

Tensor audit_default_loss(const std::vector<Tensor>& outputs, const Module& model) {
  Tensor total;
  for (const Tensor& o : outputs) {
    if (!o.defined() || !o.is_floating_point()) continue;
    Tensor s = o.sum();
    total = total.defined() ? total + s : s;
  }
  KILN_CHECK(total.defined(), "[audit] the forward of ", model.type_name(),
             " returned no floating-point tensor to differentiate (forward's Tensor, "
             "std::vector<Tensor>, std::pair and std::tuple results are read). Fix: pass a loss "
             "function: kiln::nn::audit(model, [&](const auto& out) { return ...; }, inputs...).");
  return total;
}

Tensor audit_check_loss(const Tensor& loss, const Module& model) {
  KILN_CHECK(loss.defined(), "[audit] the loss function for ", model.type_name(),
             " returned an undefined tensor. Fix: return the loss, a one-element tensor.");
  KILN_CHECK(loss.numel() == 1 && loss.is_floating_point(),
             "[audit] expected the loss function for ", model.type_name(),
             " to return a one-element floating-point tensor, found ", describe(loss),
             ". Fix: reduce it with .sum() or .mean().");
  return loss;
}

AuditReport run_audit(Module& model, std::vector<Tensor> inputs, const AuditStep& step) {
  KILN_CHECK(current_interceptor() == nullptr,
             "[audit] expected no op interceptor on this "
             "thread, found one (a trace or another audit is running). Fix: call audit outside "
             "tracing and outside forward.");
  KILN_CHECK(call_stack().empty(),
             "[audit] expected to be called from top-level code, found it "
             "called inside the forward of ",
             where(call_stack().empty() ? "" : call_stack().back().path,
                   call_stack().empty() ? "" : call_stack().back().module->type_name()),
             ", where module paths would be relative to another model. Fix: call "
             "kiln::nn::audit(model, inputs...) outside any forward.");
  ModelSnapshot snapshot(model);
  EnableGradGuard enable_grad;  // the audit is about training: gradients are always recorded
  AuditState state(model, inputs);

  Tensor loss = step(state);
  // retain_graph: a member tensor with history from outside this forward keeps it intact.
  if (loss.requires_grad()) loss.backward(Tensor(), /*retain_graph=*/true);
  state.read_gradients();
  loss = Tensor();  // frees the graph, so per-call tensors die before the liveness check
  AuditReport report = state.report();
  snapshot.restore();
  return report;
}

}  // namespace detail
}  // namespace kiln::nn
