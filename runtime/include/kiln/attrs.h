// Typed op attributes. Each op declares a plain struct listing its fields once, in
// `fields(v)`; printing, hashing and equality (used by the IR and caches) derive from it.
//
//   struct LeakyReluAttrs : AttrsOf<LeakyReluAttrs> {
//     double negative_slope = 0.01;
//     template <class V> void fields(V& v) { v("negative_slope", negative_slope); }
//   };
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln {

class Attrs {
 public:
  virtual ~Attrs() = default;
  virtual std::unique_ptr<Attrs> clone() const = 0;
  virtual bool equals(const Attrs& other) const = 0;
  virtual size_t hash() const = 0;
  virtual void print(std::ostream& os) const = 0;  // "{dim=[1], keepdim=true}"
  std::string str() const {
    std::ostringstream os;
    print(os);
    return os.str();
  }
};

// Ops without attributes pass this.
class NoAttrs final : public Attrs {
 public:
  std::unique_ptr<Attrs> clone() const override { return std::make_unique<NoAttrs>(); }
  bool equals(const Attrs& other) const override { return dynamic_cast<const NoAttrs*>(&other); }
  size_t hash() const override { return 0; }
  void print(std::ostream& os) const override { os << "{}"; }
};
const NoAttrs& no_attrs();

namespace detail {

inline void hash_combine(size_t& seed, size_t v) {
  seed ^= v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
}

struct AttrHasher {
  size_t seed = 0;
  template <class T>
  void operator()(const char*, const T& v) { hash_combine(seed, hash_one(v)); }
  template <class T>
  static size_t hash_one(const T& v) {
    if constexpr (std::is_enum_v<T>) {
      return std::hash<int64_t>()(static_cast<int64_t>(v));
    } else if constexpr (std::is_same_v<T, Device>) {
      return std::hash<int64_t>()(static_cast<int64_t>(v.type) * 65536 + v.index);
    } else if constexpr (requires { v.begin(); v.end(); } && !std::is_same_v<T, std::string>) {
      size_t s = 0;
      for (const auto& e : v) hash_combine(s, hash_one(e));
      return s;
    } else if constexpr (requires { v.has_value(); }) {
      return v.has_value() ? hash_one(*v) + 1 : 0;
    } else {
      return std::hash<T>()(v);
    }
  }
};

struct AttrPrinter {
  std::ostream& os;
  bool first = true;
  template <class T>
  void operator()(const char* name, const T& v) {
    os << (first ? "" : ", ") << name << "=";
    first = false;
    print_one(v);
  }
  template <class T>
  void print_one(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      os << (v ? "true" : "false");
    } else if constexpr (std::is_same_v<T, DType>) {
      os << dtype_name(v);
    } else if constexpr (std::is_enum_v<T>) {
      os << static_cast<int64_t>(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      os << '"' << v << '"';
    } else if constexpr (requires { v.begin(); v.end(); }) {
      os << "[";
      bool f = true;
      for (const auto& e : v) {
        os << (f ? "" : ", ");
        f = false;
        print_one(e);
      }
      os << "]";
    } else if constexpr (requires { v.has_value(); }) {
      if (v.has_value()) {
        print_one(*v);
      } else {
        os << "none";
      }
    } else {
      os << v;
    }
  }
};

}  // namespace detail

// CRTP base: derive, add fields, list them in fields(v).
template <class Derived>
class AttrsOf : public Attrs {
 public:
  std::unique_ptr<Attrs> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  bool equals(const Attrs& other) const override {
    auto* o = dynamic_cast<const Derived*>(&other);
    return o && hash() == o->hash() && str() == o->str();
  }
  size_t hash() const override {
    detail::AttrHasher h;
    const_cast<Derived&>(static_cast<const Derived&>(*this)).fields(h);
    return h.seed;
  }
  void print(std::ostream& os) const override {
    os << "{";
    detail::AttrPrinter p{os};
    const_cast<Derived&>(static_cast<const Derived&>(*this)).fields(p);
    os << "}";
  }
};

}  // namespace kiln
