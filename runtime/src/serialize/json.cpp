// The strict JSON parser and compact writer behind kiln/serialize/json.h.
#include "kiln/serialize/json.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace kiln::json {

std::string_view kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::Null:
      return "null";
    case Value::Kind::Bool:
      return "bool";
    case Value::Kind::Int:
      return "integer";
    case Value::Kind::Double:
      return "number";
    case Value::Kind::String:
      return "string";
    case Value::Kind::Array:
      return "array";
    case Value::Kind::Object:
      return "object";
  }
  return "?";
}

// ---- Value ----

#define KILN_JSON_EXPECT(cond, want)                                                    \
  KILN_CHECK(cond, "[json] expected a JSON ", want, ", got a JSON ", kind_name(kind()), \
             ". Fix: check the JSON document against the schema the caller expects.")

bool Value::as_bool() const {
  KILN_JSON_EXPECT(is_bool(), "bool");
  return std::get<bool>(v_);
}
int64_t Value::as_int() const {
  KILN_JSON_EXPECT(is_int(), "integer");
  return std::get<int64_t>(v_);
}
double Value::as_double() const {
  KILN_JSON_EXPECT(is_number(), "number");
  return is_int() ? static_cast<double>(std::get<int64_t>(v_)) : std::get<double>(v_);
}
const std::string& Value::as_string() const {
  KILN_JSON_EXPECT(is_string(), "string");
  return std::get<std::string>(v_);
}
const Array& Value::as_array() const {
  KILN_JSON_EXPECT(is_array(), "array");
  return std::get<Array>(v_);
}
Array& Value::as_array() {
  KILN_JSON_EXPECT(is_array(), "array");
  return std::get<Array>(v_);
}
const Object& Value::as_object() const {
  KILN_JSON_EXPECT(is_object(), "object");
  return std::get<Object>(v_);
}
Object& Value::as_object() {
  KILN_JSON_EXPECT(is_object(), "object");
  return std::get<Object>(v_);
}
#undef KILN_JSON_EXPECT

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : std::get<Object>(v_))
    if (k == key) return &v;
  return nullptr;
}

Value& Value::operator[](std::string_view key) {
  if (is_null()) v_ = Object();
  Object& obj = as_object();
  for (auto& [k, v] : obj)
    if (k == key) return v;
  obj.emplace_back(std::string(key), Value());
  return obj.back().second;
}

// ---- parser ----

namespace {

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& options) : s_(text), opt_(options) {}

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected characters after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(what, pos_); }
  [[noreturn]] void fail_at(const std::string& what, size_t at) const {
    throw ParseError(detail::str_cat("[json] invalid JSON at byte ", at, ": ", what, "."), at);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_ws() {
    while (!at_end() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  void expect(char c) {
    if (at_end()) fail(detail::str_cat("expected '", c, "', got the end of the input"));
    if (s_[pos_] != c) fail(detail::str_cat("expected '", c, "', got ", describe(pos_)));
    ++pos_;
  }

  std::string describe(size_t at) const {
    if (at >= s_.size()) return "the end of the input";
    unsigned char c = static_cast<unsigned char>(s_[at]);
    if (c >= 0x20 && c < 0x7f) return detail::str_cat("'", s_[at], "'");
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
    return buf;
  }

  Value parse_value(int depth) {
    if (at_end()) fail("expected a value, got the end of the input");
    if (++values_ > opt_.max_values)
      fail(detail::str_cat("more than ", opt_.max_values, " values in the document"));
    char c = s_[pos_];
    switch (c) {
      case '{':
        return parse_object(depth + 1);
      case '[':
        return parse_array(depth + 1);
      case '"':
        return Value(parse_string());
      case 't':
        literal("true");
        return Value(true);
      case 'f':
        literal("false");
        return Value(false);
      case 'n':
        literal("null");
        return Value();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
        fail(detail::str_cat("expected a value, got ", describe(pos_)));
    }
  }

  void literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail(detail::str_cat("expected '", word, "'"));
    pos_ += word.size();
  }

  void check_depth(int depth) {
    if (depth > opt_.max_depth)
      fail(detail::str_cat("nesting deeper than ", opt_.max_depth, " levels"));
  }

  Value parse_object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Object obj;
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return Value(std::move(obj));
    }
    while (true) {
      skip_ws();
      size_t key_at = pos_;
      if (peek() != '"') fail(detail::str_cat("expected a string key, got ", describe(pos_)));
      std::string key = parse_string();
      for (const auto& member : obj)
        if (member.first == key) fail_at(detail::str_cat("duplicate key \"", key, "\""), key_at);
      skip_ws();
      expect(':');
      skip_ws();
      Value v = parse_value(depth);
      obj.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return Value(std::move(obj));
      }
      fail(detail::str_cat("expected ',' or '}' in an object, got ", describe(pos_)));
    }
  }

  Value parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Array arr;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return Value(std::move(arr));
    }
    while (true) {
      skip_ws();
      arr.push_back(parse_value(depth));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return Value(std::move(arr));
      }
      fail(detail::str_cat("expected ',' or ']' in an array, got ", describe(pos_)));
    }
  }

  Value parse_number() {
    size_t start = pos_;
    bool integral = true;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') fail_at("a number may not have leading zeros", start);
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++pos_;
    } else {
      fail("expected a digit");
    }
    if (peek() == '.') {
      integral = false;
      ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit after '.'");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit in the exponent");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integral) {
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(first, last, v);
      if (ec == std::errc() && ptr == last) return Value(v);
      // Too large for int64: fall through and keep it as a double, like Python's json.
    }
    double d = 0;
    auto [ptr, ec] = std::from_chars(first, last, d);
    if (ec == std::errc::result_out_of_range || !std::isfinite(d))
      fail_at("number out of the range of a double", start);
    if (ec != std::errc() || ptr != last) fail_at("malformed number", start);
    return Value(d);
  }

  // Four hex digits of a \u escape.
  uint32_t parse_hex4() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<uint32_t>(c - 'A' + 10);
      else
        fail("expected 4 hex digits after \\u");
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  static void append_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Length of the valid UTF-8 sequence starting at pos_ (lead byte >= 0x80), or fails.
  // Rejects overlong forms, surrogates (U+D800..DFFF) and code points above U+10FFFF.
  size_t utf8_sequence_length() const {
    auto byte = [&](size_t i) -> unsigned {
      return pos_ + i < s_.size() ? static_cast<unsigned char>(s_[pos_ + i]) : 0u;
    };
    auto cont = [&](size_t i) { return (byte(i) & 0xC0u) == 0x80u; };
    unsigned b0 = byte(0);
    if (b0 >= 0xC2 && b0 <= 0xDF && cont(1)) return 2;
    if (b0 >= 0xE0 && b0 <= 0xEF && cont(1) && cont(2)) {
      unsigned b1 = byte(1);
      if (b0 == 0xE0 && b1 < 0xA0) fail("invalid UTF-8 (overlong encoding)");
      if (b0 == 0xED && b1 >= 0xA0) fail("invalid UTF-8 (encoded surrogate)");
      return 3;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4 && cont(1) && cont(2) && cont(3)) {
      unsigned b1 = byte(1);
      if (b0 == 0xF0 && b1 < 0x90) fail("invalid UTF-8 (overlong encoding)");
      if (b0 == 0xF4 && b1 >= 0x90) fail("invalid UTF-8 (code point above U+10FFFF)");
      return 4;
    }
    fail(detail::str_cat("invalid UTF-8 (", describe(pos_), ")"));
  }

  std::string parse_string() {
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20)
        fail(detail::str_cat("unescaped control character (", describe(pos_), ") in a string"));
      if (c >= 0x80) {
        size_t n = utf8_sequence_length();
        out.append(s_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      size_t esc_at = pos_;
      ++pos_;
      if (at_end()) fail("unterminated escape sequence");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at("lone low surrogate in \\u escape", esc_at);
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") fail_at("lone high surrogate in \\u escape", esc_at);
            pos_ += 2;
            uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF)
              fail_at("high surrogate not followed by a low surrogate", esc_at);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(cp, out);
          break;
        }
        default:
          fail_at(detail::str_cat("invalid escape '\\", e, "'"), esc_at);
      }
    }
  }

  std::string_view s_;
  const ParseOptions& opt_;
  size_t pos_ = 0;
  size_t values_ = 0;
};

void dump_to(const Value& v, std::string& out) {
  switch (v.kind()) {
    case Value::Kind::Null:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::Double: {
      double d = v.as_double();
      KILN_CHECK(std::isfinite(d), "[json] cannot write the number ", d,
                 ": JSON has no NaN or infinity. Fix: store it as a string or null.");
      char buf[64];
      auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest round trip
      std::string_view text(buf, static_cast<size_t>(ptr - buf));
      out += text;
      // Keep it a double when read back (to_chars writes 1.0 as "1").
      if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
      return;
    }
    case Value::Kind::String:
      dump_string(v.as_string(), out);
      return;
    case Value::Kind::Array: {
      out += '[';
      bool first = true;
      for (const Value& e : v.as_array()) {
        if (!first) out += ',';
        first = false;
        dump_to(e, out);
      }
      out += ']';
      return;
    }
    case Value::Kind::Object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.as_object()) {
        if (!first) out += ',';
        first = false;
        dump_string(k, out);
        out += ':';
        dump_to(e, out);
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

Value parse(std::string_view text, const ParseOptions& options) {
  return Parser(text, options).parse_document();
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  auto cont = [&](size_t k) {
    return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0u) == 0x80u;
  };
  while (i < s.size()) {
    unsigned b0 = static_cast<unsigned char>(s[i]);
    unsigned b1 = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0u;
    if (b0 < 0x80) {
      i += 1;
    } else if (b0 >= 0xC2 && b0 <= 0xDF && cont(1)) {
      i += 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF && cont(1) && cont(2) && !(b0 == 0xE0 && b1 < 0xA0) &&
               !(b0 == 0xED && b1 >= 0xA0)) {
      i += 3;
    } else if (b0 >= 0xF0 && b0 <= 0xF4 && cont(1) && cont(2) && cont(3) &&
               !(b0 == 0xF0 && b1 < 0x90) && !(b0 == 0xF4 && b1 >= 0x90)) {
      i += 4;
    } else {
      return false;
    }
  }
  return true;
}

void dump_string(std::string_view s, std::string& out) {
  KILN_CHECK(is_valid_utf8(s),
             "[json] expected a UTF-8 string, got bytes that are not valid "
             "UTF-8 (",
             s.size(), " bytes). Fix: convert the text to UTF-8 before writing it.");
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

std::string dump(const Value& v) {
  std::string out;
  dump_to(v, out);
  return out;
}

}  // namespace kiln::json
