// Tensor metadata, element access and printing (the runtime half of Tensor).
#include "kiln/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "kiln/device_interface.h"
#include "kiln/dispatch.h"
#include "kiln/state_epoch.h"

namespace kiln {

namespace {

std::shared_ptr<TensorImpl> make_impl(std::shared_ptr<Storage> storage, IntList sizes, IntList strides,
                                      int64_t offset, DType dtype, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = Shape(sizes);
  impl->strides = Shape(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  impl->device = device;
  return impl;
}

void check_sizes(IntList sizes, const char* where) {
  for (int64_t s : sizes)
    KILN_CHECK(s >= 0, where, ": sizes must be non-negative, got ", shape_str(sizes), ".");
}

// Visits every element offset (in elements) of a strided tensor in row-major order.
template <class F>
void for_each_offset(const TensorImpl& t, F&& f) {
  int64_t n = numel(t.sizes);
  if (n == 0) return;
  size_t rank = t.sizes.size();
  Shape idx(rank, 0);
  int64_t off = t.offset;
  for (int64_t i = 0; i < n; ++i) {
    f(off);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < t.sizes[d]) {
        off += t.strides[d];
        break;
      }
      off -= t.strides[d] * (t.sizes[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace

Tensor Tensor::empty(IntList sizes, DType dtype, Device device) {
  check_sizes(sizes, "Tensor::empty");
  const size_t nbytes = static_cast<size_t>(size_mul(
      kiln::numel(sizes), static_cast<int64_t>(itemsize(dtype)), "Tensor::empty: the byte count"));
  Shape strides = contiguous_strides(sizes);
  return Tensor(make_impl(Storage::allocate(nbytes, device), sizes, strides, 0, dtype, device));
}

Tensor Tensor::from_blob(void* data, IntList sizes, DType dtype, IntList strides,
                         std::function<void(void*)> deleter, Device device) {
  check_sizes(sizes, "Tensor::from_blob");
  KILN_CHECK(strides.empty() || strides.size() == sizes.size(), "Tensor::from_blob: got ",
             sizes.size(), " sizes but ", strides.size(), " strides; pass one stride per dim or none.");
  Shape st = strides.empty() ? contiguous_strides(sizes) : Shape(strides);
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    KILN_CHECK(st[i] >= 0, "Tensor::from_blob: negative strides are not supported, got ", shape_str(st), ".");
    if (sizes[i] > 0)
      span = size_add(span, size_mul(sizes[i] - 1, st[i], "Tensor::from_blob: the span"),
                      "Tensor::from_blob: the span");
  }
  if (kiln::numel(sizes) == 0) span = 0;
  const int64_t bytes =
      size_mul(span, static_cast<int64_t>(itemsize(dtype)), "Tensor::from_blob: the byte count");
  auto storage =
      Storage::from_external(data, static_cast<size_t>(bytes), device, std::move(deleter));
  return Tensor(make_impl(std::move(storage), sizes, st, 0, dtype, device));
}

Tensor Tensor::scalar(Scalar value, std::optional<DType> dtype, Device device) {
  DType dt = dtype ? *dtype : (value.is_floating() ? default_dtype() : value.kind());
  Tensor t = empty({}, dt);
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      *static_cast<T*>(t.raw_data()) = T(value.to<float>());
    } else {
      *static_cast<T*>(t.raw_data()) = value.to<T>();
    }
  });
  return device.is_cpu() ? t : detail::copy_view_span(t, device);
}

Tensor Tensor::alias(IntList sizes, IntList strides, int64_t offset) const {
  auto impl = make_impl(impl_->storage, sizes, strides, offset, impl_->dtype, impl_->device);
  impl->is_view = true;
  impl->symbolic = impl_->symbolic;
  return Tensor(std::move(impl));
}

void Tensor::symbolic_shape_read(const char* what) const { impl_->symbolic->check_shape_read(what); }

void Tensor::undefined_read(const char* what) {
  KILN_FAIL("[Tensor] ", what,
            " of an undefined tensor (a default-constructed kiln::Tensor(), "
            "which holds no data). Fix: pass a tensor made by a factory such as kiln::zeros or "
            "kiln::randn, or test t.defined() before using it.");
}

int64_t Tensor::size(int64_t d) const {
  check_shape_read("size()");
  return impl_->sizes[static_cast<size_t>(wrap_dim(d, dim(), "size"))];
}

int64_t Tensor::stride(int64_t d) const {
  return impl_->strides[static_cast<size_t>(wrap_dim(d, dim(), "stride"))];
}

bool Tensor::is_contiguous() const {
  // The strides contiguous_strides() gives: a size-0 dim counts as 1, so an empty tensor
  // fresh from Tensor::empty({3, 0}) (strides [1, 1]) is contiguous.
  int64_t expected = 1;
  for (size_t i = impl_->sizes.size(); i-- > 0;) {
    if (impl_->sizes[i] == 1) continue;
    if (impl_->strides[i] != expected) return false;
    expected *= std::max<int64_t>(impl_->sizes[i], 1);
  }
  return true;
}

bool Tensor::shares_storage(const Tensor& other) const {
  return impl_->storage && impl_->storage == other.impl_->storage;
}

uint64_t Tensor::version() const { return impl_->storage ? impl_->storage->version() : 0; }

void Tensor::bump_version() const {
  if (impl_->storage) impl_->storage->bump_version();
}

std::string Tensor::type_str() const {
  return std::string(dtype_name(dtype())) + shape_str(sizes());
}

void* Tensor::raw_data(SourceLoc loc) const {
  KILN_CHECK(defined(), "Tensor::data: the tensor is undefined (default-constructed).");
  if (impl_->symbolic) concretize(*this, "data_ptr()", loc);
  KILN_CHECK(impl_->storage, "Tensor::data: the tensor has no storage.");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * static_cast<int64_t>(element_size());
}

Scalar Tensor::item_scalar(SourceLoc loc) const {
  KILN_CHECK(defined(), "Tensor::item: the tensor is undefined.");
  if (impl_->symbolic) concretize(*this, "item()", loc);
  KILN_CHECK(numel() == 1, "Tensor::item: expected a tensor with one element, got ", type_str(),
             ". Fix: reduce it first (sum(), mean()) or index one element.");
  // A device tensor's element is copied to the host first, as PyTorch's item() does.
  const void* p = device().is_cpu() ? raw_data(loc) : detail::copy_view_span(*this, kCPU).raw_data();
  return visit_dtype(dtype(), [&](auto tag) -> Scalar {
    using T = decltype(tag);
    return Scalar(*static_cast<const T*>(p));
  });
}

Tensor::operator bool() const {
  KILN_CHECK(defined(), "Tensor: an undefined tensor has no truth value. Fix: test whether a "
             "tensor is set with t.defined().");
  if (impl_->symbolic) concretize(*this, "a conversion to bool", SourceLoc());
  KILN_CHECK(numel() == 1, "Tensor: the truth value of a tensor with ", numel(),
             " elements is ambiguous (", type_str(), "). Fix: reduce it to one element first, "
             "e.g. (x > 0).any(), (x > 0).all() or x.sum() > 1.");
  return item_scalar(SourceLoc()).to<bool>();
}

namespace detail {

std::atomic<int> tensor_remaps_active{0};

namespace {
thread_local const TensorRemap* this_threads_remap = nullptr;
}  // namespace

std::shared_ptr<TensorImpl> clone_remap(const std::shared_ptr<TensorImpl>& impl) {
  if (!this_threads_remap || !impl) return impl;  // another thread is cloning
  std::shared_ptr<TensorImpl> copy = this_threads_remap->find(impl.get());
  return copy ? copy : impl;
}

TensorRemapScope::TensorRemapScope(const TensorRemap& remap) : previous_(this_threads_remap) {
  this_threads_remap = &remap;
  tensor_remaps_active.fetch_add(1);
}
TensorRemapScope::~TensorRemapScope() {
  this_threads_remap = previous_;
  tensor_remaps_active.fetch_sub(1);
}

void read_elements(const Tensor& device_tensor, DType as, void* out, SourceLoc loc) {
  KILN_CHECK(device_tensor.defined(), "Tensor::to_vector: the tensor is undefined.");
  if (device_tensor.impl()->symbolic) concretize(device_tensor, "to_vector()", loc);
  // A device tensor's elements are copied to the host first (to_vector and printing work on
  // every device, as in PyTorch).
  const Tensor t = device_tensor.device().is_cpu() ? device_tensor
                                                   : detail::copy_view_span(device_tensor, kCPU);
  const char* base = static_cast<const char*>(t.impl()->storage->data());
  size_t isz = t.element_size();
  visit_dtype(t.dtype(), [&](auto src_tag) {
    using S = decltype(src_tag);
    visit_dtype(as, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      D* dst = static_cast<D*>(out);
      int64_t i = 0;
      for_each_offset(*t.impl(), [&](int64_t off) {
        S v;
        std::memcpy(&v, base + off * static_cast<int64_t>(isz), sizeof(S));
        if constexpr (std::is_same_v<D, bool>) {
          reinterpret_cast<uint8_t*>(dst)[i++] = static_cast<float>(v) != 0;
        } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
          dst[i++] = D(static_cast<float>(v));
        } else {
          dst[i++] = static_cast<D>(static_cast<std::conditional_t<std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>, float, S>>(v));
        }
      });
    });
  });
}

}  // namespace detail

// ---- printing ----

namespace {

struct Formatter {
  bool floating = false;
  bool all_integral = true;
  bool scientific = false;
  int width = 1;
  int precision = 4;

  void fit(const std::vector<double>& values) {
    double max_abs = 0, min_abs = INFINITY;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      if (v != std::floor(v)) all_integral = false;
      max_abs = std::max(max_abs, std::fabs(v));
      if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
    }
    if (floating && !all_integral && (max_abs >= 1e8 || (min_abs < 1e-4 && max_abs > 0)))
      scientific = true;
    for (double v : values) width = std::max<int>(width, static_cast<int>(format(v).size()));
  }
  std::string format(double v) const {
    std::ostringstream os;
    if (!floating) {
      os << static_cast<int64_t>(v);
    } else if (std::isnan(v)) {
      os << "nan";
    } else if (std::isinf(v)) {
      os << (v < 0 ? "-inf" : "inf");
    } else if (scientific) {
      os << std::scientific << std::setprecision(precision) << v;
    } else if (all_integral) {
      os << std::fixed << std::setprecision(0) << v << ".";
    } else {
      os << std::fixed << std::setprecision(precision) << v;
    }
    return os.str();
  }
};

void print_rec(std::ostream& os, const std::vector<double>& values, IntList sizes, size_t dim,
               int64_t& pos, const Formatter& fmt, int indent, bool is_bool, bool summarize) {
  if (dim == sizes.size()) {
    double v = values[static_cast<size_t>(pos++)];
    std::string s = is_bool ? (v != 0 ? "True" : "False") : fmt.format(v);
    os << std::string(static_cast<size_t>(std::max<int>(0, fmt.width - static_cast<int>(s.size()))), ' ') << s;
    return;
  }
  int64_t n = sizes[dim];
  int64_t inner = 1;
  for (size_t d = dim + 1; d < sizes.size(); ++d) inner *= sizes[d];
  os << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 6 && i == 3) {
      os << "...";
      pos += (n - 6) * inner;
      i = n - 3;
      os << (dim + 1 == sizes.size() ? ", " : std::string(",\n") + std::string(static_cast<size_t>(indent + 1), ' '));
    }
    print_rec(os, values, sizes, dim + 1, pos, fmt, indent + 1, is_bool, summarize);
    if (i + 1 < n) {
      if (dim + 1 == sizes.size()) {
        os << ", ";
      } else {
        os << "," << std::string(sizes.size() - dim - 1, '\n') << std::string(static_cast<size_t>(indent + 1), ' ');
      }
    }
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  if (is_symbolic()) impl_->symbolic->check_print();  // a lazy segment may run here
  if (is_symbolic()) {
    std::string described = impl_->symbolic->describe();
    os << "tensor(<" << (described.empty() ? "symbolic " + type_str() : described) << ">)";
    return os.str();
  }
  std::vector<double> values = to_vector<double>();
  Formatter fmt;
  fmt.floating = is_floating_point();
  fmt.fit(values);
  bool summarize = numel() > 1000;
  os << "tensor(";
  if (numel() == 0) {
    os << "[]";
  } else {
    int64_t pos = 0;
    print_rec(os, values, sizes(), 0, pos, fmt, 7, dtype() == DType::Bool, summarize);
  }
  if (numel() == 0 && dim() != 1) os << ", size=" << shape_str(sizes());
  bool default_type = dtype() == default_dtype() || dtype() == DType::Int64 || dtype() == DType::Bool;
  if (!default_type) os << ", dtype=" << dtype_name(dtype());
  if (!device().is_cpu()) os << ", device='" << device() << "'";
  if (requires_grad()) os << ", requires_grad=True";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

// ---- autograd metadata ----

bool Tensor::requires_grad() const {
  auto* m = impl_->autograd.get();
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  KILN_CHECK(defined(), "requires_grad_: the tensor is undefined.");
  auto* m = impl_->autograd.get();
  KILN_CHECK(!(m && m->grad_fn), "requires_grad_: only leaf tensors can change requires_grad; this "
             "tensor was produced by an op that tracks gradients. Fix: use .detach().requires_grad_() "
             "to make a new leaf.");
  KILN_CHECK(!requires_grad || is_floating(dtype()), "requires_grad_: only floating-point tensors can "
             "require gradients, got ", dtype(), ". Fix: convert with .to(kiln::kFloat32) first.");
  if (requires_grad || m) impl_->autograd_meta().requires_grad = requires_grad;
  bump_state_epoch();
  return *this;
}

bool Tensor::is_leaf() const {
  auto* m = impl_->autograd.get();
  return !m || !m->grad_fn;
}

Tensor Tensor::grad() const {
  auto* m = impl_->autograd.get();
  return m && m->grad ? Tensor(m->grad) : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  impl_->autograd_meta().grad = grad.impl_ptr();
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  auto* m = impl_->autograd.get();
  return m ? m->grad_fn : none;
}

}  // namespace kiln
