// Reading attributes back from their printed form ("{dim=[1], keepdim=true}"): the IR
// parser rebuilds every node's typed attribute struct through these.
#include "kiln/attrs.h"

#include <charconv>
#include <cmath>

#include "kiln/error.h"

namespace kiln {

void NoAttrs::parse(std::string_view text, const IntCodec*) {
  auto fields = detail::split_attr_fields(text);
  detail::check_attr_fields_used(fields, std::vector<bool>(fields.size(), false), text);
}

namespace detail {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// Splits `body` at top-level commas (outside brackets and quotes).
std::vector<std::string_view> split_top_level(std::string_view body, std::string_view whole) {
  std::vector<std::string_view> parts;
  int depth = 0;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (quoted) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        quoted = false;
      continue;
    }
    if (c == '"')
      quoted = true;
    else if (c == '[' || c == '{' || c == '(')
      ++depth;
    else if (c == ']' || c == '}' || c == ')')
      --depth;
    else if (c == ',' && depth == 0) {
      parts.push_back(trim(body.substr(start, i - start)));
      start = i + 1;
    }
    KILN_CHECK(depth >= 0, "[attrs] unbalanced brackets in \"", whole,
               "\": expected each closing bracket to match an opening one, found an extra '", c,
               "'. Fix: print attributes with Attrs::print, which balances them.");
  }
  KILN_CHECK(depth == 0 && !quoted, "[attrs] unbalanced brackets or quotes in \"", whole,
             "\": expected every bracket closed and every string quoted at both ends, found ",
             quoted ? "an unterminated string" : "an unclosed bracket",
             ". Fix: print attributes with Attrs::print, which balances them.");
  std::string_view last = trim(body.substr(start));
  if (!last.empty() || !parts.empty()) parts.push_back(last);
  return parts;
}

}  // namespace

void print_double(std::ostream& os, double v) {
  if (std::isnan(v)) {
    os << "nan";
    return;
  }
  if (std::isinf(v)) {
    os << (v < 0 ? "-inf" : "inf");
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  os.write(buf, res.ptr - buf);
}

void print_string(std::ostream& os, std::string_view v) {
  os << '"';
  for (char c : v) {
    if (c == '"' || c == '\\') os << '\\';
    os << c;
  }
  os << '"';
}

std::vector<std::pair<std::string, std::string>> split_attr_fields(std::string_view text) {
  std::string_view t = trim(text);
  KILN_CHECK(t.size() >= 2 && t.front() == '{' && t.back() == '}',
             "[attrs] expected attributes in braces, e.g. {dim=[1], keepdim=true}, found \"", text,
             "\". Fix: wrap the fields in braces.");
  std::vector<std::pair<std::string, std::string>> out;
  for (std::string_view part : split_top_level(t.substr(1, t.size() - 2), text)) {
    size_t eq = part.find('=');
    KILN_CHECK(eq != std::string_view::npos && eq > 0, "[attrs] expected name=value, found \"",
               part, "\" in \"", text, "\". Fix: separate fields by commas, each as name=value.");
    std::string name(trim(part.substr(0, eq)));
    // The parser would keep only the last value of a repeated field: refuse the ambiguity.
    for (const auto& field : out)
      KILN_CHECK(field.first != name, "[attrs] expected each field once, found '", name,
                 "' twice in \"", text, "\". Fix: drop one of them.");
    out.emplace_back(std::move(name), std::string(trim(part.substr(eq + 1))));
  }
  return out;
}

void fail_attr_value(std::string_view field, std::string_view text, const char* expected) {
  KILN_FAIL("[attrs] field '", field, "' expected ", expected, ", found \"", text,
            "\". Fix: write the value as Attrs::print does.");
}

bool parse_attr_bool(std::string_view field, std::string_view text) {
  if (text == "true") return true;
  if (text == "false") return false;
  fail_attr_value(field, text, "true or false");
}

int64_t parse_attr_int(std::string_view field, std::string_view text, const IntCodec* ints) {
  if (ints) return ints->parse(text);
  int64_t v = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size())
    fail_attr_value(field, text, "an integer");
  return v;
}

uint64_t parse_attr_uint(std::string_view field, std::string_view text) {
  uint64_t v = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size())
    fail_attr_value(field, text, "a non-negative integer");
  return v;
}

double parse_attr_double(std::string_view field, std::string_view text) {
  if (text == "nan") return std::nan("");
  if (text == "inf") return INFINITY;
  if (text == "-inf") return -INFINITY;
  double v = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size())
    fail_attr_value(field, text, "a number");
  return v;
}

DType parse_attr_dtype(std::string_view field, std::string_view text) {
  auto d = dtype_from_name(text);
  if (!d) fail_attr_value(field, text, "a dtype name (float32, int64, bool, ...)");
  return *d;
}

Device parse_attr_device(std::string_view field, std::string_view text) {
  // Only the forms Device prints (and bare "cuda"): Device's own parser accepts "cuda:1x"
  // and wraps indices past int16.
  std::optional<Device> d;
  if (text == "cpu" || text.rfind("cuda", 0) == 0) {
    try {
      d = Device(std::string(text));
    } catch (const Error&) {
    }
  }
  if (!d || d->index < 0 || (text != "cuda" && d->str() != text))
    fail_attr_value(field, text, "cpu or cuda:N");
  return *d;
}

std::string parse_attr_string(std::string_view field, std::string_view text) {
  if (text.size() < 2 || text.front() != '"' || text.back() != '"')
    fail_attr_value(field, text, "a quoted string");
  std::string out;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    char c = text[i];
    if (c == '"') fail_attr_value(field, text, "a quoted string with inner quotes escaped as \\\"");
    if (c == '\\') {
      if (i + 2 >= text.size())
        fail_attr_value(field, text, "a quoted string without a dangling \\");
      c = text[++i];
    }
    out += c;
  }
  return out;
}

std::vector<std::string_view> split_attr_list(std::string_view field, std::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    fail_attr_value(field, text, "a list in brackets");
  return split_top_level(text.substr(1, text.size() - 2), text);
}

void check_attr_fields_used(const std::vector<std::pair<std::string, std::string>>& fields,
                            const std::vector<bool>& used, std::string_view attrs_text) {
  for (size_t i = 0; i < fields.size(); ++i) {
    KILN_CHECK(used[i], "[attrs] unknown field '", fields[i].first, "' in \"", attrs_text,
               "\". Fix: use the field names the op prints.");
  }
}

}  // namespace detail
}  // namespace kiln
