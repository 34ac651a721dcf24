// The sentinel primes that stand for symbolic sizes.
#include "kiln/symbolic_size.h"

#include <array>

#include "kiln/error.h"

namespace kiln {

namespace {

constexpr bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

// The first kMaxSymbolicSizes primes from `start` on. Large enough that no real dim is a
// multiple of one by accident in practice, small enough that products of a few symbols and
// a static coefficient stay far below int64's range.
constexpr std::array<int64_t, kMaxSymbolicSizes> primes_from(int64_t start) {
  std::array<int64_t, kMaxSymbolicSizes> out{};
  int64_t n = start;
  for (int k = 0; k < kMaxSymbolicSizes; ++n)
    if (is_prime(n)) out[k++] = n;
  return out;
}

constexpr auto kMain = primes_from(100003);
constexpr auto kAlternate = primes_from(200003);
static_assert(kMain.back() < kAlternate.front(), "the two sentinel sets must not overlap");

}  // namespace

int64_t symbol_sentinel(int k, bool alternate) {
  KILN_CHECK(k >= 0 && k < kMaxSymbolicSizes, "[symbols] expected a symbol index in [0, ",
             kMaxSymbolicSizes, "), found ", k, ". Fix: a graph has at most ", kMaxSymbolicSizes,
             " symbolic dims.");
  return (alternate ? kAlternate : kMain)[static_cast<size_t>(k)];
}

bool holds_symbolic_size(int64_t v) {
  if (v < kMain.front()) return false;
  for (int64_t p : kMain)
    if (v % p == 0) return true;
  for (int64_t p : kAlternate)
    if (v % p == 0) return true;
  return false;
}

}  // namespace kiln
