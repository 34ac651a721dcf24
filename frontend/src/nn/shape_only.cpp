// The shape-only pass: an interceptor that answers every op with infer alone, the
// SymbolicInfo of its tensors, and the scope that installs both and restores the thread
// and the module tree afterwards.
#include "shape_only.h"

#include <atomic>

namespace kiln::nn::detail {

class ShapeOnlyInfo final : public SymbolicInfo {
 public:
  explicit ShapeOnlyInfo(std::string who) : who_(std::move(who)) {}
  void end() { active_ = false; }

  void check_data_read(const char* what, SourceLoc loc) const override {
    std::string at = loc.line() != 0
                         ? kiln::detail::str_cat(" at ", loc.file_name(), ":", loc.line())
                         : std::string();
    if (active_) {
      KILN_FAIL("[", who_, "] ", what, " read the data of a tensor", at,
                " during a shape-only pass, which runs no kernels: its tensors have shapes but "
                "no values. Fix: keep forward's control flow independent of tensor values "
                "(reading shapes is fine), or run a real forward (a dry run) instead of ",
                who_, ".");
    }
    KILN_FAIL("[", who_, "] ", what, " read the data of a tensor", at,
              " made by a shape-only pass that has ended: it has a shape but no data. Fix: do "
              "not keep tensors made inside ",
              who_, "'s forward (e.g. in a member variable) and use them afterwards.");
  }
  bool inplace_write_is_noop() const override { return active_; }

 private:
  std::string who_;
  std::atomic<bool> active_{true};
};

namespace {

Tensor make_shape_only(const std::shared_ptr<ShapeOnlyInfo>& info, IntList shape, DType dtype,
                       Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = Shape(shape);
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = device;
  impl->symbolic = info;
  return Tensor(std::move(impl));
}

// Puts every module back to its recorded flag. train() recurses, so a parent's call resets
// its subtree: walk parents first and repeat until stable (a module shared by parents with
// different flags may need a second round).
void restore_training(const std::vector<std::pair<Module*, bool>>& flags) {
  for (size_t round = 0; round <= flags.size(); ++round) {
    bool changed = false;
    for (const auto& [m, on] : flags) {
      if (m->is_training() == on) continue;
      m->train(on);
      changed = true;
    }
    if (!changed) return;
  }
}

}  // namespace

class ShapeOnlyScope::Interceptor final : public DispatchInterceptor {
 public:
  explicit Interceptor(std::shared_ptr<ShapeOnlyInfo> info) : info_(std::move(info)) {}
  Tensors intercept(const OpDef&, TensorSpan, const Attrs&, TensorTypes&& types) override {
    Tensors out;
    for (const TensorType& t : types)
      out.push_back(make_shape_only(info_, t.shape, t.dtype, t.device));
    return out;
  }

 private:
  std::shared_ptr<ShapeOnlyInfo> info_;
};

ShapeOnlyScope::ShapeOnlyScope(Module& root, std::string who)
    : info_(std::make_shared<ShapeOnlyInfo>(std::move(who))),
      interceptor_(std::make_unique<Interceptor>(info_)) {
  for (const auto& [path, m] : root.named_modules()) training_.emplace_back(m, m->is_training());
  try {
    root.eval();
  } catch (...) {
    restore_training(training_);
    throw;
  }
  previous_grad_mode_ = grad_mode_enabled();
  set_grad_mode(false);
  previous_interceptor_ = set_interceptor(interceptor_.get());
}

ShapeOnlyScope::~ShapeOnlyScope() {
  set_interceptor(previous_interceptor_);
  set_grad_mode(previous_grad_mode_);
  info_->end();
  try {
    restore_training(training_);
  } catch (...) {
    // A throwing train() override must not terminate the program from a destructor.
  }
}

Tensor ShapeOnlyScope::make_tensor(IntList shape, DType dtype, Device device) const {
  return make_shape_only(info_, shape, dtype, device);
}

bool is_shape_only(const Tensor& t) {
  return t.defined() && t.is_symbolic() &&
         dynamic_cast<const ShapeOnlyInfo*>(t.impl()->symbolic.get()) != nullptr;
}

std::vector<Shape> resolve_input_shapes(const std::vector<Shape>& shapes, int64_t batch,
                                        const std::string& who) {
  KILN_CHECK(!shapes.empty(), "[", who,
             "] expected the shape of the model's input, got none. Fix: pass one shape, e.g. "
             "{{-1, 784}} (-1: any batch size).");
  KILN_CHECK(shapes.size() == 1, "[", who, "] got ", shapes.size(),
             " input shapes, but only single-tensor forwards (model(x)) are supported for now. "
             "Fix: pass one shape, or materialize the model with a real dry run "
             "(kiln::nn::call(model, x, y)).");
  std::vector<Shape> out;
  for (const Shape& s : shapes) {
    Shape r = s;
    for (size_t d = 0; d < r.size(); ++d) {
      if (d == 0 && r[d] == -1) {
        r[d] = batch;
        continue;
      }
      KILN_CHECK(r[d] >= 0, "[", who, "] the input shape ", shape_str(s), " has ", r[d], " in dim ",
                 d,
                 ": only the leading (batch) dim may be -1, and sizes cannot be negative. "
                 "Fix: give every other dim its size, e.g. {-1, 3, 28, 28}.");
    }
    out.push_back(std::move(r));
  }
  return out;
}

Tensor run_shape_only(Module& model, const Shape& shape, DType dtype, const std::string& who) {
  ShapeOnlyScope scope(model, who);
  return model(scope.make_tensor(shape, dtype));
}

}  // namespace kiln::nn::detail
