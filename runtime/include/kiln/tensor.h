// Tensor: a reference-counted handle to sizes, strides and an offset into a shared Storage.
// Copying a Tensor shares data (like torch::Tensor); clone() copies it.
//
// Methods in the first block are runtime metadata and data access. The op methods in the
// second block are defined by the frontend (frontend/src/tensor_methods.cpp), so that
// every op goes through dispatch; the deployable runtime never calls them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <source_location>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/scalar.h"
#include "kiln/shape.h"
#include "kiln/storage.h"

namespace kiln {

class Tensor;
struct TensorImpl;

namespace autograd {
class Node;
}

// Autograd state of one tensor; absent (null) for tensors that never met autograd.
struct AutogradMeta {
  bool requires_grad = false;  // set on leaves by the user
  bool retains_grad = false;   // non-leaf keeps its .grad (retain_grad())
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;                   // which output of grad_fn this tensor is
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: the node that accumulates .grad
};

// Where a host read of a tensor's data came from, for graph-break diagnostics.
using SourceLoc = std::source_location;

// Set on tensors that have no storage: values of a graph being recorded (the tracer),
// results of a shape-only pass (Module::build, nn::summary), and the parameters of lazy
// layers before their first forward. The virtual checks let each kind refuse what it
// cannot answer; the tensor accessors call them only when `symbolic` is set, so ordinary
// tensors pay one predictable branch.
struct SymbolicInfo {
  virtual ~SymbolicInfo() = default;
  // A shape accessor (`what`: "sizes()", "numel()", ...) was called. Allowed by default:
  // symbolic tensors have shapes. An uninitialized parameter throws.
  virtual void check_shape_read(const char* what) const { (void)what; }
  // The data was asked for (item(), data_ptr(), to_vector(), an eager kernel's input; loc
  // is empty for the latter). Runs before the concretization hook; nothing by default.
  virtual void check_data_read(const char* what, SourceLoc loc) const {
    (void)what;
    (void)loc;
  }
  // True when an in-place op writing this tensor under an interceptor only needs its
  // checks (a shape-only pass has no data to write). False: refused, as today.
  virtual bool inplace_write_is_noop() const { return false; }
  // The printout inside "tensor(<...>)"; empty: "symbolic float32[2, 3]".
  virtual std::string describe() const { return {}; }
  // The tensor is being printed (str(), operator<<). A tracer treats it as a read of the
  // value; nothing by default.
  virtual void check_print() const {}
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // null for symbolic tensors
  Shape sizes;
  Shape strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  Device device;
  bool is_wrapped_number = false;  // a host scalar promoted to a 0-d tensor
  bool is_view = false;            // shares storage with the tensor it was made from
  uint64_t dynamic_dims = 0;       // bit d: dim d is dynamic for compile (kiln::mark_dynamic)
  std::unique_ptr<AutogradMeta> autograd;
  std::shared_ptr<SymbolicInfo> symbolic;

  AutogradMeta& autograd_meta() {
    if (!autograd) autograd = std::make_unique<AutogradMeta>();
    return *autograd;
  }
};

namespace detail {
// How nn::Module::clone() gives a copied module's Tensor members its own state: while a
// clone runs on some thread, tensor_remaps_active is non-zero and a Tensor copied on that
// thread asks clone_remap() for the copy of what it points at (the original tensor when it
// is not the cloned module's state). Otherwise a copy costs one relaxed load more.
extern std::atomic<int> tensor_remaps_active;
std::shared_ptr<TensorImpl> clone_remap(const std::shared_ptr<TensorImpl>& impl);
// What a clone installs: the copy of `impl`, or nullptr when it has none.
class TensorRemap {
 public:
  virtual std::shared_ptr<TensorImpl> find(const TensorImpl* impl) const = 0;

 protected:
  ~TensorRemap() = default;
};
// Makes `remap` this thread's for the scope's lifetime (scopes nest).
class TensorRemapScope {
 public:
  explicit TensorRemapScope(const TensorRemap& remap);
  ~TensorRemapScope();
  TensorRemapScope(const TensorRemapScope&) = delete;
  TensorRemapScope& operator=(const TensorRemapScope&) = delete;

 private:
  const TensorRemap* previous_;
};
inline std::shared_ptr<TensorImpl> copy_of(const std::shared_ptr<TensorImpl>& impl) {
  if (tensor_remaps_active.load(std::memory_order_relaxed) != 0) [[unlikely]]
    return clone_remap(impl);
  return impl;
}
}  // namespace detail

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor& other) : impl_(detail::copy_of(other.impl_)) {}
  Tensor(Tensor&& other) noexcept = default;
  Tensor& operator=(const Tensor& other) {
    impl_ = detail::copy_of(other.impl_);
    return *this;
  }
  Tensor& operator=(Tensor&& other) noexcept = default;

  // ---- construction (runtime) ----
  // Uninitialized contiguous tensor.
  static Tensor empty(IntList sizes, DType dtype = default_dtype(), Device device = kCPU);
  // Copies `values` into a new tensor of `sizes` (a 1-D tensor when sizes is empty).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, IntList sizes = {});
  // Wraps external memory without copying. The caller keeps it alive (or passes a deleter).
  static Tensor from_blob(void* data, IntList sizes, DType dtype, IntList strides = {},
                          std::function<void(void*)> deleter = {}, Device device = kCPU);
  // A 0-d tensor holding `value` (dtype from the scalar's category unless given).
  static Tensor scalar(Scalar value, std::optional<DType> dtype = std::nullopt,
                       Device device = kCPU);
  // A view of the same storage with new geometry; no checks beyond bounds.
  Tensor alias(IntList sizes, IntList strides, int64_t offset) const;

  // ---- metadata (runtime) ----
  bool defined() const { return impl_ != nullptr; }
  // The value of a one-element tensor (`while ((x.abs().sum() > 1))`), as in PyTorch; a
  // tensor of another size, or an undefined one, throws (test t.defined() for "is set").
  explicit operator bool() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  [[gnu::always_inline]] int64_t dim() const {
    check_shape_read("dim()");
    return static_cast<int64_t>(impl_->sizes.size());
  }
  [[gnu::always_inline]] IntList sizes() const {
    check_shape_read("sizes()");
    return impl_->sizes;
  }
  IntList strides() const { return impl_->strides; }
  [[gnu::always_inline]] Shape shape() const {
    check_shape_read("shape()");
    return impl_->sizes;
  }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  [[gnu::always_inline]] int64_t numel() const {
    check_shape_read("numel()");
    return kiln::numel(impl_->sizes);
  }
  int64_t storage_offset() const { return impl_->offset; }
  DType dtype() const {
    if (!impl_) [[unlikely]]
      undefined_read("dtype()");
    return impl_->dtype;
  }
  Device device() const {
    if (!impl_) [[unlikely]]
      undefined_read("device()");
    return impl_->device;
  }
  size_t element_size() const { return itemsize(impl_->dtype); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  bool is_symbolic() const { return impl_->symbolic != nullptr; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  bool shares_storage(const Tensor& other) const;
  uint64_t version() const;  // bumped by every in-place write to the storage
  void bump_version() const;
  std::string type_str() const;  // "float32[2, 3]"

  // ---- data access (runtime); reading data is a concretization for the tracer ----
  void* raw_data(SourceLoc loc = SourceLoc::current()) const;  // first element
  template <class T>
  T* data_ptr(SourceLoc loc = SourceLoc::current()) const;
  template <class T>
  T item(SourceLoc loc = SourceLoc::current()) const;
  Scalar item_scalar(SourceLoc loc = SourceLoc::current()) const;
  template <class T>
  std::vector<T> to_vector(SourceLoc loc = SourceLoc::current()) const;  // row-major
  std::string str() const;  // PyTorch-style printout

  // ---- autograd state (runtime metadata; the engine lives in the frontend) ----
  bool requires_grad() const;
  Tensor& set_requires_grad(bool requires_grad);
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;

  // ---- ops (defined by the frontend; each goes through dispatch) ----
  Tensor& requires_grad_(bool requires_grad = true) { return set_requires_grad(requires_grad); }
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false,
                bool create_graph = false) const;
  void retain_grad() const;
  Tensor detach() const;

  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor contiguous() const;
  Tensor clone() const;

  Tensor reshape(IntList sizes) const;
  Tensor view(IntList sizes) const;
  Tensor permute(IntList dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(IntList sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor as_strided(IntList sizes, IntList strides, int64_t offset = 0) const;

  Tensor sum(IntList dims = {}, bool keepdim = false) const;
  Tensor mean(IntList dims = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor prod(IntList dims = {}, bool keepdim = false) const;
  Tensor amax(IntList dims = {}, bool keepdim = false) const;
  Tensor amin(IntList dims = {}, bool keepdim = false) const;
  Tensor all(IntList dims = {}, bool keepdim = false) const;
  Tensor any(IntList dims = {}, bool keepdim = false) const;
  Tensor var(IntList dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor std(IntList dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor logsumexp(IntList dims, bool keepdim = false) const;
  Tensor norm(double p = 2, IntList dims = {}, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor pow(Scalar exponent) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor abs() const;
  Tensor sqrt() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;

  // In-place (bump the version counter; refused on leaves that require grad).
  Tensor& add_(const Tensor& other, Scalar alpha = 1);
  Tensor& add_(Scalar other);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar other);
  Tensor& copy_(const Tensor& src);
  Tensor& zero_();
  Tensor& fill_(Scalar value);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);

 private:
  // Refuses a shape read of an undefined tensor (a default-constructed Tensor()) and lets a
  // symbolic tensor refuse one (an uninitialized parameter has no shape). The call is out
  // of line and the accessors are forced inline (the cold call would tip GCC into
  // outlining numel()), so each read adds a load and two branches. strides() is not
  // checked: it is read by kernels, after the shape.
  [[gnu::always_inline]] void check_shape_read(const char* what) const {
    if (!impl_) [[unlikely]]
      undefined_read(what);
    if (impl_->symbolic) [[unlikely]]
      symbolic_shape_read(what);
  }
  [[gnu::cold]] void symbolic_shape_read(const char* what) const;
  [[noreturn, gnu::cold]] static void undefined_read(const char* what);

  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- template definitions ----

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, IntList sizes) {
  Shape shape = sizes.empty() ? Shape{static_cast<int64_t>(values.size())} : Shape(sizes);
  KILN_CHECK(kiln::numel(shape) == static_cast<int64_t>(values.size()),
             "Tensor::from_vector: expected ", kiln::numel(shape), " values for shape ",
             shape_str(shape), ", got ", values.size(), ". Fix: pass a shape whose product is ",
             values.size(), ".");
  Tensor t = empty(shape, dtype_of<T>());
  T* out = t.data_ptr<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

template <class T>
T* Tensor::data_ptr(SourceLoc loc) const {
  KILN_CHECK(dtype() == dtype_of<T>(), "Tensor::data_ptr: the tensor is ", dtype(),
             " but data_ptr was asked for ", dtype_of<T>(), ". Fix: use data_ptr<",
             dtype_name(dtype()), "'s C++ type> or convert with .to(", dtype_of<T>(), ").");
  return static_cast<T*>(raw_data(loc));
}

template <class T>
T Tensor::item(SourceLoc loc) const {
  return item_scalar(loc).to<T>();
}

namespace detail {
// Reads every element in row-major order, converted to double or int64 (via visit).
void read_elements(const Tensor& t, DType as, void* out, SourceLoc loc);
}  // namespace detail

template <class T>
std::vector<T> Tensor::to_vector(SourceLoc loc) const {
  std::vector<T> out(static_cast<size_t>(numel()));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> tmp(out.size());
    detail::read_elements(*this, DType::Bool, tmp.data(), loc);
    for (size_t i = 0; i < out.size(); ++i) out[i] = tmp[i] != 0;
  } else {
    detail::read_elements(*this, dtype_of<T>(), out.data(), loc);
  }
  return out;
}

}  // namespace kiln
