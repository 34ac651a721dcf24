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
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln {

// How an IR prints and parses integer attributes: it names the sentinel values that stand
// for symbolic sizes ("s0*4"). Without one, integers print as numbers.
class IntCodec {
 public:
  virtual ~IntCodec() = default;
  virtual void print(std::ostream& os, int64_t v) const = 0;
  virtual int64_t parse(std::string_view text) const = 0;  // throws kiln::Error
};

class Attrs {
 public:
  virtual ~Attrs() = default;
  virtual std::unique_ptr<Attrs> clone() const = 0;
  virtual bool equals(const Attrs& other) const = 0;
  virtual size_t hash() const = 0;
  // "{dim=[1], keepdim=true}"; doubles print in their shortest exact form, so parse()
  // gives back equal attributes.
  virtual void print(std::ostream& os, const IntCodec* ints = nullptr) const = 0;
  // Sets the fields named in `text` (the printed form); unnamed fields keep their values.
  // Unknown names and malformed values throw kiln::Error naming the field.
  virtual void parse(std::string_view text, const IntCodec* ints = nullptr) = 0;
  // Rewrites every int64 field, int-list element and optional int through fn (a compiled
  // graph substitutes the runtime values of symbolic sizes this way).
  virtual void map_ints(const std::function<int64_t(int64_t)>& fn) = 0;
  // Rewrites every Device field through fn (a graph exported for a GPU moves its factory
  // ops there).
  virtual void map_devices(const std::function<Device(Device)>& fn) = 0;
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
  void print(std::ostream& os, const IntCodec* = nullptr) const override { os << "{}"; }
  void parse(std::string_view text, const IntCodec* ints = nullptr) override;
  void map_ints(const std::function<int64_t(int64_t)>&) override {}
  void map_devices(const std::function<Device(Device)>&) override {}
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

void print_double(std::ostream& os, double v);  // shortest form that parses back exactly
// In double quotes, with '"' and '\\' escaped by a backslash (parse_attr_string undoes it).
void print_string(std::ostream& os, std::string_view v);

struct AttrPrinter {
  std::ostream& os;
  const IntCodec* ints = nullptr;
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
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (ints) {
        ints->print(os, v);
      } else {
        os << v;
      }
    } else if constexpr (std::is_same_v<T, double>) {
      print_double(os, v);
    } else if constexpr (std::is_enum_v<T>) {
      os << static_cast<int64_t>(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      print_string(os, v);
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

// The printed form split into fields: {"dim": "[1]", "keepdim": "true"}; throws on
// malformed text (unbalanced brackets, a field without '=').
std::vector<std::pair<std::string, std::string>> split_attr_fields(std::string_view text);
[[noreturn]] void fail_attr_value(std::string_view field, std::string_view text, const char* expected);
bool parse_attr_bool(std::string_view field, std::string_view text);
int64_t parse_attr_int(std::string_view field, std::string_view text, const IntCodec* ints);
uint64_t parse_attr_uint(std::string_view field, std::string_view text);
double parse_attr_double(std::string_view field, std::string_view text);
DType parse_attr_dtype(std::string_view field, std::string_view text);
Device parse_attr_device(std::string_view field, std::string_view text);
std::string parse_attr_string(std::string_view field, std::string_view text);
std::vector<std::string_view> split_attr_list(std::string_view field, std::string_view text);
// Throws naming the fields of `text` that the attributes do not have.
void check_attr_fields_used(const std::vector<std::pair<std::string, std::string>>& fields,
                            const std::vector<bool>& used, std::string_view attrs_text);

struct AttrParser {
  const std::vector<std::pair<std::string, std::string>>& fields;
  std::vector<bool>& used;
  const IntCodec* ints;

  template <class T>
  void operator()(const char* name, T& v) {
    for (size_t i = 0; i < fields.size(); ++i) {
      if (fields[i].first != name) continue;
      used[i] = true;
      parse_one(name, fields[i].second, v);
    }
  }
  template <class T>
  void parse_one(std::string_view name, std::string_view text, T& v) {
    if constexpr (requires { parse_attr(name, text, v); }) {
      parse_attr(name, text, v);  // a custom field type (found by ADL)
    } else if constexpr (std::is_same_v<T, bool>) {
      v = parse_attr_bool(name, text);
    } else if constexpr (std::is_same_v<T, DType>) {
      v = parse_attr_dtype(name, text);
    } else if constexpr (std::is_same_v<T, Device>) {
      v = parse_attr_device(name, text);
    } else if constexpr (std::is_enum_v<T>) {
      v = static_cast<T>(parse_attr_int(name, text, nullptr));
    } else if constexpr (std::is_same_v<T, int64_t>) {
      v = parse_attr_int(name, text, ints);
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      v = parse_attr_uint(name, text);
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(parse_attr_int(name, text, nullptr));
    } else if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(parse_attr_double(name, text));
    } else if constexpr (std::is_same_v<T, std::string>) {
      v = parse_attr_string(name, text);
    } else if constexpr (requires { v.has_value(); v.emplace(); }) {
      if (text == "none") {
        v.reset();
      } else {
        parse_one(name, text, v.emplace());
      }
    } else {
      static_assert(requires { v.clear(); v.push_back(*v.begin()); },
                    "attribute field type has no parser");
      v.clear();
      for (std::string_view e : split_attr_list(name, text)) {
        typename T::value_type x{};
        parse_one(name, e, x);
        v.push_back(x);
      }
    }
  }
};

// Applies fn to every int64 a field holds.
struct AttrIntMapper {
  const std::function<int64_t(int64_t)>& fn;
  template <class T>
  void operator()(const char*, T& v) { map_one(v); }
  template <class T>
  void map_one(T& v) {
    if constexpr (std::is_same_v<T, int64_t>) {
      v = fn(v);
    } else if constexpr (requires { v.has_value(); *v; }) {
      if (v.has_value()) map_one(*v);
    } else if constexpr (requires { v.begin(); v.end(); } && !std::is_same_v<T, std::string>) {
      for (auto& e : v) map_one(e);
    }
  }
};

struct AttrDeviceMapper {
  const std::function<Device(Device)>& fn;
  template <class T>
  void operator()(const char*, T& v) {
    if constexpr (std::is_same_v<T, Device>) v = fn(v);
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
    self().fields(h);
    return h.seed;
  }
  void print(std::ostream& os, const IntCodec* ints = nullptr) const override {
    os << "{";
    detail::AttrPrinter p{os, ints};
    self().fields(p);
    os << "}";
  }
  void parse(std::string_view text, const IntCodec* ints = nullptr) override {
    auto fields = detail::split_attr_fields(text);
    std::vector<bool> used(fields.size(), false);
    detail::AttrParser p{fields, used, ints};
    self().fields(p);
    detail::check_attr_fields_used(fields, used, text);
  }
  void map_ints(const std::function<int64_t(int64_t)>& fn) override {
    detail::AttrIntMapper m{fn};
    self().fields(m);
  }
  void map_devices(const std::function<Device(Device)>& fn) override {
    detail::AttrDeviceMapper m{fn};
    self().fields(m);
  }

 private:
  Derived& self() const { return const_cast<Derived&>(static_cast<const Derived&>(*this)); }
};

}  // namespace kiln
