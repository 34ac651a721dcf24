// Symbolic sizes. A graph traced with a dynamic dim keeps that dim as a symbol (s0, s1,
// ...). Shapes and integer attributes stay plain int64 so every op's infer runs unchanged:
// symbol sk is stored as a sentinel, the prime symbol_value(k), and a size computed from
// symbols by multiplication (s0*784 after a flatten, s0*s1) is stored as the product,
// which factors back uniquely. Sums and quotients of symbols do not survive this encoding:
// the tracer detects them (a second trace with other sentinels disagrees) and makes the
// dim static instead.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kiln/symbolic_size.h"

namespace kiln::ir {

inline constexpr int kMaxSymbols = kMaxSymbolicSizes;

// The sentinel standing for symbol k (0 <= k < kMaxSymbols).
int64_t symbol_value(int k);
// A second, disjoint set of sentinels (the tracer's validation trace).
int64_t alternate_symbol_value(int k);

// coeff * s0^e0 * s1^e1 * ...
struct SymbolicSize {
  int64_t coeff = 1;
  std::array<uint8_t, kMaxSymbols> exponents{};
  bool operator==(const SymbolicSize&) const = default;
};

// The symbolic form of v when v is a product of sentinels (times a coefficient); nullopt
// for a plain number (including every v <= 0).
std::optional<SymbolicSize> decode_size(int64_t v);
bool is_symbolic_size(int64_t v);
// "784", "s0", "s0*784", "s0*s1", "s0^2" (the coefficient last, omitted when 1).
std::string format_size(int64_t v);
// The inverse of format_size; throws kiln::Error on malformed text.
int64_t parse_size(std::string_view text);
// v with each symbol k replaced by values[k] (a runtime size). Throws when v uses a symbol
// beyond values.
int64_t substitute_size(int64_t v, std::span<const int64_t> values);

}  // namespace kiln::ir
