// SmallVector: a vector that keeps its first N elements inline, so shapes, strides and
// the one or two outputs of an op never touch the heap on the eager hot path.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {

template <class T, size_t N>
class SmallVector {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  explicit SmallVector(size_t n, const T& value = T()) { assign(n, value); }
  SmallVector(std::initializer_list<T> init) { append(init.begin(), init.end()); }
  template <class It, class = decltype(*std::declval<It>())>
  SmallVector(It first, It last) { append(first, last); }
  SmallVector(std::span<const T> s) { append(s.begin(), s.end()); }
  // Any contiguous range with data()/size() (kiln::IntList among them).
  template <class R, class = decltype(std::declval<const R&>().data() + std::declval<const R&>().size()),
            class = std::enable_if_t<!std::is_same_v<R, SmallVector> && !std::is_same_v<R, std::vector<T>>>>
  SmallVector(const R& r) { append(r.data(), r.data() + r.size()); }
  SmallVector(const std::vector<T>& v) { append(v.begin(), v.end()); }
  SmallVector(const SmallVector& other) { append(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { move_from(std::move(other)); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
      append(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      destroy_all();
      release_heap();
      move_from(std::move(other));
    }
    return *this;
  }
  ~SmallVector() {
    destroy_all();
    release_heap();
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return ptr(); }
  const T* data() const { return ptr(); }
  T* begin() { return ptr(); }
  T* end() { return ptr() + size_; }
  const T* begin() const { return ptr(); }
  const T* end() const { return ptr() + size_; }
  T& operator[](size_t i) { return ptr()[i]; }
  const T& operator[](size_t i) const { return ptr()[i]; }
  T& back() { return ptr()[size_ - 1]; }
  const T& back() const { return ptr()[size_ - 1]; }
  T& front() { return ptr()[0]; }
  const T& front() const { return ptr()[0]; }
  operator std::span<const T>() const { return {ptr(), size_}; }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

  void reserve(size_t n) {
    if (n <= capacity_) return;
    size_t cap = std::max(n, capacity_ * 2);
    T* fresh = static_cast<T*>(::operator new(cap * sizeof(T), std::align_val_t(alignof(T))));
    for (size_t i = 0; i < size_; ++i) {
      new (fresh + i) T(std::move(ptr()[i]));
      ptr()[i].~T();
    }
    release_heap();
    heap_ = fresh;
    capacity_ = cap;
  }
  void push_back(const T& v) {
    if (size_ == capacity_) {
      T copy(v);  // v may live inside this vector
      reserve(size_ + 1);
      new (ptr() + size_) T(std::move(copy));
    } else {
      new (ptr() + size_) T(v);
    }
    ++size_;
  }
  void push_back(T&& v) {
    if (size_ == capacity_) reserve(size_ + 1);
    new (ptr() + size_) T(std::move(v));
    ++size_;
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) reserve(size_ + 1);
    new (ptr() + size_) T(std::forward<Args>(args)...);
    return ptr()[size_++];
  }
  void pop_back() { ptr()[--size_].~T(); }
  void clear() { destroy_all(); }
  void resize(size_t n, const T& value = T()) {
    if (n < size_) {
      for (size_t i = n; i < size_; ++i) ptr()[i].~T();
      size_ = n;
      return;
    }
    reserve(n);
    for (size_t i = size_; i < n; ++i) new (ptr() + i) T(value);
    size_ = n;
  }
  void assign(size_t n, const T& value) {
    clear();
    resize(n, value);
  }
  template <class It>
  void append(It first, It last) {
    reserve(size_ + static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) new (ptr() + size_++) T(*first);
  }
  T* insert(T* pos, const T& value) {
    size_t idx = static_cast<size_t>(pos - begin());
    push_back(value);
    std::rotate(begin() + idx, end() - 1, end());
    return begin() + idx;
  }
  T* erase(T* pos) {
    std::move(pos + 1, end(), pos);
    pop_back();
    return pos;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  T* ptr() { return heap_ ? heap_ : reinterpret_cast<T*>(inline_); }
  const T* ptr() const { return heap_ ? heap_ : reinterpret_cast<const T*>(inline_); }
  void destroy_all() {
    for (size_t i = 0; i < size_; ++i) ptr()[i].~T();
    size_ = 0;
  }
  void release_heap() {
    if (heap_) ::operator delete(heap_, std::align_val_t(alignof(T)));
    heap_ = nullptr;
    capacity_ = N;
  }
  void move_from(SmallVector&& other) {
    if (other.heap_) {
      heap_ = other.heap_;
      size_ = other.size_;
      capacity_ = other.capacity_;
      other.heap_ = nullptr;
      other.size_ = 0;
      other.capacity_ = N;
      return;
    }
    for (size_t i = 0; i < other.size_; ++i) new (ptr() + i) T(std::move(other.ptr()[i]));
    size_ = other.size_;
    other.destroy_all();
  }

  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* heap_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace kiln
