// Symbolic sizes: the sentinel primes, decoding products back into symbols, the text form
// and substitution of runtime values.
#include "kiln/ir/symbols.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "test_util.h"

namespace kiln::ir {
namespace {

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

const int64_t s0 = symbol_value(0), s1 = symbol_value(1), s11 = symbol_value(11);

TEST(IrSymbols, SentinelsArePrimeDistinctAndDisjoint) {
  std::set<int64_t> seen;
  for (int k = 0; k < kMaxSymbols; ++k) {
    int64_t v = symbol_value(k), a = alternate_symbol_value(k);
    EXPECT_TRUE(is_prime(v)) << v;
    EXPECT_TRUE(is_prime(a)) << a;
    EXPECT_GE(v, 100003);
    EXPECT_LT(v, 101000);
    EXPECT_GE(a, 200003);
    EXPECT_TRUE(seen.insert(v).second);
    EXPECT_TRUE(seen.insert(a).second);
  }
  EXPECT_EQ(symbol_value(0), 100003);
}

TEST(IrSymbols, SymbolIndexOutOfRangeIsAnError) {
  expect_error([] { symbol_value(kMaxSymbols); },
               {"symbol_value", "expected a symbol index in [0, 12)", "found 12"});
  expect_error([] { alternate_symbol_value(-1); }, {"alternate_symbol_value", "found -1"});
}

TEST(IrSymbols, DecodeFactorsProductsOfSentinels) {
  auto d = decode_size(s0 * s1 * s1 * 784);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->coeff, 784);
  EXPECT_EQ(d->exponents[0], 1);
  EXPECT_EQ(d->exponents[1], 2);
  EXPECT_EQ(d->exponents[2], 0);
  EXPECT_TRUE(is_symbolic_size(s11));
  for (int64_t plain : {int64_t{784}, int64_t{1}, int64_t{0}, int64_t{-1}, -s0, int64_t{100002}}) {
    EXPECT_FALSE(decode_size(plain).has_value()) << plain;
    EXPECT_FALSE(is_symbolic_size(plain)) << plain;
  }
  // The validation trace's sentinels are translated before decoding: they read as numbers.
  EXPECT_FALSE(decode_size(alternate_symbol_value(0)).has_value());
}

TEST(IrSymbols, FormatWritesSymbolsAscendingThenTheCoefficient) {
  EXPECT_EQ(format_size(784), "784");
  EXPECT_EQ(format_size(-1), "-1");
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(s0), "s0");
  EXPECT_EQ(format_size(s0 * 784), "s0*784");
  EXPECT_EQ(format_size(s1 * s0), "s0*s1");
  EXPECT_EQ(format_size(s0 * s0 * 3), "s0^2*3");
  EXPECT_EQ(format_size(s11 * s1 * s1), "s1^2*s11");
}

TEST(IrSymbols, ParseInvertsFormat) {
  for (int64_t v : {int64_t{784}, int64_t{-1}, int64_t{0}, s0, s0 * 784, s0 * s1, s0 * s0 * 3,
                    s11 * s1 * s1, int64_t{-7}}) {
    EXPECT_EQ(parse_size(format_size(v)), v) << format_size(v);
  }
  // Any factor order reads; format_size writes the canonical one.
  EXPECT_EQ(parse_size("784*s0"), s0 * 784);
  EXPECT_EQ(parse_size("s1*2*s0^2"), s0 * s0 * s1 * 2);
}

TEST(IrSymbols, ParseRejectsMalformedText) {
  for (const char* text : {"", "s", "sx", "s0*", "*s0", "x12", "1.5", "s0**2", "s0^"}) {
    expect_error([&] { parse_size(text); }, {"[ir] expected a size like 784, s0, s0*784 or s0^2*3",
                                             "not an integer or a symbol"});
  }
  expect_error([] { parse_size("s12"); }, {"found \"s12\"", "symbol index out of range"});
  expect_error([] { parse_size("s0^0"); }, {"exponent must be at least 1"});
  expect_error([] { parse_size("s0*-2"); }, {"a coefficient must be positive"});
  expect_error([] { parse_size("s0*0"); }, {"a coefficient must be positive"});
  expect_error([] { parse_size("s0^4*s1^4"); }, {"overflows int64"});
  expect_error([] { parse_size("s0^9"); }, {"overflows int64"});
}

TEST(IrSymbols, SubstituteReplacesEachSymbolByItsValue) {
  std::vector<int64_t> values{32, 5};
  EXPECT_EQ(substitute_size(784, values), 784);
  EXPECT_EQ(substitute_size(-1, values), -1);
  EXPECT_EQ(substitute_size(s0, values), 32);
  EXPECT_EQ(substitute_size(s0 * 784, values), 32 * 784);
  EXPECT_EQ(substitute_size(s0 * s1 * s1 * 3, values), 32 * 5 * 5 * 3);
}

TEST(IrSymbols, SubstituteNamesAMissingSymbol) {
  std::vector<int64_t> values{32};
  expect_error([&] { substitute_size(s0 * s1, values); },
               {"substitute_size", "s0*s1 uses symbol s1", "only 1 symbol values"});
}

TEST(IrSymbols, SubstituteReportsOverflow) {
  std::vector<int64_t> values{int64_t{1} << 40};
  expect_error([&] { substitute_size(s0 * s0, values); },
               {"substitute_size", "s0^2", "overflows int64"});
}

}  // namespace
}  // namespace kiln::ir
