// Symbolic sizes: factoring a size back into symbols, and the text
// form ("s0*784") the printer, the parser and diagnostics share.
#include "kiln/ir/symbols.h"

#include <charconv>

#include "kiln/error.h"
#include "kiln/shape.h"

namespace kiln::ir {

namespace {

void check_symbol_index(int k, const char* fn) {
  KILN_CHECK(k >= 0 && k < kMaxSymbols, "[ir] ", fn, ": expected a symbol index in [0, ",
             kMaxSymbols, "), found ", k, ". Fix: a graph has at most ", kMaxSymbols,
             " symbolic dims.");
}

[[noreturn]] void fail_size_text(std::string_view text, const char* problem) {
  KILN_FAIL("[ir] expected a size like 784, s0, s0*784 or s0^2*3, found \"", text, "\" (", problem,
            ").");
}

int64_t parse_int(std::string_view text, std::string_view whole) {
  int64_t v = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || res.ec != std::errc() || res.ptr != text.data() + text.size())
    fail_size_text(whole, "not an integer or a symbol");
  return v;
}

// One factor of a product: `sK`, `sK^E` or a positive integer.
int64_t parse_factor(std::string_view factor, std::string_view whole) {
  if (factor.empty() || factor.front() != 's') {
    int64_t f = parse_int(factor, whole);
    if (f <= 0) fail_size_text(whole, "a coefficient must be positive");
    return f;
  }
  size_t caret = factor.find('^');
  int64_t k = parse_int(factor.substr(1, caret - 1), whole);  // caret may be npos: to the end
  if (k < 0 || k >= kMaxSymbols) fail_size_text(whole, "symbol index out of range");
  int64_t e = caret == std::string_view::npos ? 1 : parse_int(factor.substr(caret + 1), whole);
  if (e < 1) fail_size_text(whole, "exponent must be at least 1");
  int64_t f = 1;
  for (int64_t i = 0; i < e; ++i) {  // overflows after a few steps for any large e
    auto r = checked_mul(f, symbol_sentinel(static_cast<int>(k), false));
    if (!r) fail_size_text(whole, "overflows int64");
    f = *r;
  }
  return f;
}

}  // namespace

int64_t symbol_value(int k) {
  check_symbol_index(k, "symbol_value");
  return symbol_sentinel(static_cast<int>(k), false);
}

int64_t alternate_symbol_value(int k) {
  check_symbol_index(k, "alternate_symbol_value");
  return symbol_sentinel(k, true);
}

std::optional<SymbolicSize> decode_size(int64_t v) {
  if (v <= 0) return std::nullopt;
  SymbolicSize s;
  bool symbolic = false;
  for (int k = 0; k < kMaxSymbols; ++k) {
    int64_t p = symbol_sentinel(static_cast<int>(k), false);
    while (v % p == 0 && s.exponents[k] < 255) {
      v /= p;
      ++s.exponents[k];
      symbolic = true;
    }
  }
  if (!symbolic) return std::nullopt;
  s.coeff = v;
  return s;
}

bool is_symbolic_size(int64_t v) {
  return decode_size(v).has_value();
}

std::string format_size(int64_t v) {
  std::optional<SymbolicSize> s = decode_size(v);
  if (!s) return std::to_string(v);
  std::string out;
  for (int k = 0; k < kMaxSymbols; ++k) {
    int e = s->exponents[k];
    if (e == 0) continue;
    if (!out.empty()) out += '*';
    out += 's' + std::to_string(k);
    if (e > 1) out += '^' + std::to_string(e);
  }
  if (s->coeff != 1) out += '*' + std::to_string(s->coeff);
  return out;
}

int64_t parse_size(std::string_view text) {
  // A plain number (any sign) or a product of factors in any order; format_size writes
  // the canonical order.
  if (text.find_first_of("s*") == std::string_view::npos) return parse_int(text, text);
  int64_t v = 1;
  for (size_t start = 0;;) {
    size_t star = text.find('*', start);
    auto product = checked_mul(v, parse_factor(text.substr(start, star - start), text));
    if (!product) fail_size_text(text, "overflows int64");
    v = *product;
    if (star == std::string_view::npos) return v;
    start = star + 1;
  }
}

int64_t substitute_size(int64_t v, std::span<const int64_t> values) {
  std::optional<SymbolicSize> s = decode_size(v);
  if (!s) return v;
  int64_t out = s->coeff;
  for (int k = 0; k < kMaxSymbols; ++k) {
    if (s->exponents[k] == 0) continue;
    KILN_CHECK(static_cast<size_t>(k) < values.size(), "[ir] substitute_size: the size ",
               format_size(v), " uses symbol s", k, " but only ", values.size(),
               " symbol values were given. Fix: pass a value for every symbol of the graph.");
    for (int e = 0; e < s->exponents[k]; ++e) {
      auto r = checked_mul(out, values[static_cast<size_t>(k)]);
      KILN_CHECK(r.has_value(), "[ir] substitute_size: ", format_size(v),
                 " overflows int64 with the given symbol values.");
      out = *r;
    }
  }
  return out;
}

}  // namespace kiln::ir
