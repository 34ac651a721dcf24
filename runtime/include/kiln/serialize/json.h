// A small strict JSON value, parser and writer (RFC 8259), for checkpoint headers and
// model configs. No dependencies; objects keep their key order.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/error.h"

namespace kiln::json {

// Thrown by parse(); `offset` is the byte position in the input where the problem is.
class ParseError : public Error {
 public:
  ParseError(const std::string& message, size_t offset) : Error(message), offset(offset) {}
  size_t offset;
};

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // in document order

// One JSON value. Numbers written without fraction or exponent that fit int64 are kept as
// exact integers (is_int); every other number is a double.
class Value {
 public:
  enum class Kind : uint8_t { Null, Bool, Int, Double, String, Array, Object };

  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int v) : v_(int64_t{v}) {}
  Value(int64_t v) : v_(v) {}
  Value(double v) : v_(v) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(json::Array a) : v_(std::move(a)) {}
  Value(json::Object o) : v_(std::move(o)) {}

  // The alternatives of v_ are in Kind's order.
  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_null() const { return kind() == Kind::Null; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_number() const { return is_int() || kind() == Kind::Double; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_array() const { return kind() == Kind::Array; }
  bool is_object() const { return kind() == Kind::Object; }

  // Accessors throw kiln::Error naming the expected and the actual kind.
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // ints convert
  const std::string& as_string() const;
  const json::Array& as_array() const;
  json::Array& as_array();
  const json::Object& as_object() const;
  json::Object& as_object();

  // Object lookup: the member's value, or null when absent (or not an object).
  const Value* find(std::string_view key) const;
  // Object insert-or-assign, keeping first-insertion order. Turns null into an object.
  Value& operator[](std::string_view key);

  friend bool operator==(const Value& a, const Value& b) { return a.v_ == b.v_; }

 private:
  // A variant keeps a Value at 40 bytes: a parsed header costs little memory per value.
  std::variant<std::monostate, bool, int64_t, double, std::string, json::Array, json::Object> v_;
};

std::string_view kind_name(Value::Kind k);  // "object", "string", ...

struct ParseOptions {
  int max_depth = 64;  // nesting limit: hostile input cannot exhaust the stack
  // Limit on the number of values (scalars, strings, arrays, objects) in the document, so
  // hostile input cannot make the parsed tree exhaust memory.
  size_t max_values = std::numeric_limits<size_t>::max();
};

// Parses exactly one JSON value surrounded by optional whitespace. Strict: no comments,
// trailing commas, NaN/Infinity, leading zeros, unescaped control characters, invalid
// UTF-8 or lone surrogates; a key repeated in one object is an error.
Value parse(std::string_view text, const ParseOptions& options = {});

// Compact JSON (no whitespace), in the style of serde_json and Python's
// json.dumps(separators=(",", ":"), ensure_ascii=False): '"' and '\\' escaped, control
// characters as \b \f \n \r \t or \u00XX, everything else (including non-ASCII) verbatim.
// Doubles are written in the shortest form that reads back exactly; NaN/inf and strings
// that are not valid UTF-8 are refused (kiln::Error).
std::string dump(const Value& v);
void dump_string(std::string_view s, std::string& out);  // appends a quoted, escaped string

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points above
// U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace kiln::json
