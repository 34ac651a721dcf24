// Tests for the strict JSON parser and compact writer (kiln/serialize/json.h): values,
// escapes, UTF-8, number forms, round trips, and every parse error with its message.
#include "kiln/serialize/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace kiln::json {
namespace {

// Expects parse(text) to fail with a message containing `fragment` at byte `offset`.
void expect_parse_error(std::string_view text, const std::string& fragment,
                        std::optional<size_t> offset = std::nullopt,
                        const ParseOptions& options = {}) {
  try {
    parse(text, options);
    ADD_FAILURE() << "parsed without error: " << text;
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << fragment;
    if (offset) {
      EXPECT_EQ(e.offset, *offset) << e.what();
    }
  }
}

TEST(Json, ParsesScalars) {
  EXPECT_TRUE(parse("null").is_null());
  EXPECT_EQ(parse("true").as_bool(), true);
  EXPECT_EQ(parse(" false ").as_bool(), false);
  EXPECT_EQ(parse("0").as_int(), 0);
  EXPECT_EQ(parse("-17").as_int(), -17);
  EXPECT_EQ(parse("9223372036854775807").as_int(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parse("-9223372036854775808").as_int(), std::numeric_limits<int64_t>::min());
  // Beyond int64: kept as a double, like Python's json module does with floats.
  Value big = parse("9223372036854775808");
  EXPECT_EQ(big.kind(), Value::Kind::Double);
  EXPECT_EQ(big.as_double(), 9223372036854775808.0);
  EXPECT_EQ(parse("1.5").as_double(), 1.5);
  EXPECT_EQ(parse("-0.25e2").as_double(), -25.0);
  EXPECT_EQ(parse("1E-3").as_double(), 0.001);
  EXPECT_FALSE(parse("1.0").is_int());  // a fraction makes it a double even when whole
  EXPECT_TRUE(std::signbit(parse("-0.0").as_double()));
  EXPECT_EQ(parse("\"hi\"").as_string(), "hi");
}

TEST(Json, ParsesNestedDocumentsInOrder) {
  Value v = parse(R"( { "b" : [1, 2.5, "x", [], {}], "a": {"z": null, "y": true} } )");
  ASSERT_TRUE(v.is_object());
  const Object& obj = v.as_object();
  ASSERT_EQ(obj.size(), 2u);
  EXPECT_EQ(obj[0].first, "b");  // document order, not sorted
  EXPECT_EQ(obj[1].first, "a");
  const Array& arr = obj[0].second.as_array();
  ASSERT_EQ(arr.size(), 5u);
  EXPECT_EQ(arr[0].as_int(), 1);
  EXPECT_EQ(arr[1].as_double(), 2.5);
  EXPECT_EQ(arr[2].as_string(), "x");
  EXPECT_TRUE(arr[3].as_array().empty());
  EXPECT_TRUE(arr[4].as_object().empty());
  EXPECT_TRUE(v.find("a")->find("z")->is_null());
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_EQ(arr[0].find("a"), nullptr);  // not an object
}

TEST(Json, StringEscapesAndUnicode) {
  EXPECT_EQ(parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(parse(R"("\u0041\u00e9\u20AC")").as_string(), "A\xC3\xA9\xE2\x82\xAC");
  // A surrogate pair: U+1F600 is F0 9F 98 80 in UTF-8.
  EXPECT_EQ(parse(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");
  // Raw UTF-8 passes through unchanged.
  EXPECT_EQ(parse("\"h\xC3\xA9llo \xF0\x9F\x98\x80\"").as_string(),
            "h\xC3\xA9llo \xF0\x9F\x98\x80");
  EXPECT_EQ(parse(R"("\u0000")").as_string(), std::string(1, '\0'));
}

TEST(Json, DumpIsCompactAndEscapesLikeSerde) {
  Value v;
  v["name"] = "q\"\\\n\t\x01\x1f/\xC3\xA9";
  v["n"] = int64_t{-3};
  v["list"] = Array{Value(1), Value(true), Value(), Value(0.1)};
  EXPECT_EQ(dump(v),
            "{\"name\":\"q\\\"\\\\\\n\\t\\u0001\\u001f/\xC3\xA9\",\"n\":-3,"
            "\"list\":[1,true,null,0.1]}");
  v["n"] = int64_t{4};  // assignment keeps the key's position
  EXPECT_EQ(v.as_object()[1].first, "n");
  EXPECT_EQ(v.as_object()[1].second.as_int(), 4);
}

TEST(Json, DoublesRoundTripExactly) {
  for (double d : {0.1, 1.0, -2.5, 1e300, 5e-324, 123456789.125, 1.0 / 3.0}) {
    std::string text = dump(Value(d));
    Value back = parse(text);
    EXPECT_EQ(back.kind(), Value::Kind::Double) << text;
    EXPECT_EQ(back.as_double(), d) << text;
  }
  EXPECT_EQ(dump(Value(1.0)), "1.0");
  EXPECT_EQ(dump(Value(1e300)), "1e+300");
}

TEST(Json, RoundTripsDocuments) {
  std::string text = R"({"a":[1,-2,3.5,"s",{"x":[[]]}],"b":{},"c":"\u00e9\n","d":false,"e":null})";
  Value v = parse(text);
  EXPECT_EQ(parse(dump(v)), v);
  EXPECT_EQ(dump(v),
            "{\"a\":[1,-2,3.5,\"s\",{\"x\":[[]]}],\"b\":{},\"c\":\"\xC3\xA9\\n\","
            "\"d\":false,\"e\":null}");
}

TEST(Json, SyntaxErrors) {
  expect_parse_error("", "expected a value, got the end of the input", 0);
  expect_parse_error("   ", "expected a value", 3);
  expect_parse_error("{\"a\":1,}", "expected a string key, got '}'", 7);
  expect_parse_error("[1,]", "expected a value, got ']'", 3);
  expect_parse_error("[1 2]", "expected ',' or ']' in an array, got '2'", 3);
  expect_parse_error("{\"a\" 1}", "expected ':', got '1'", 5);
  expect_parse_error("{\"a\":1 \"b\":2}", "expected ',' or '}' in an object", 7);
  expect_parse_error("{\"a\":1", "expected ',' or '}' in an object, got the end of the input");
  expect_parse_error("{1:2}", "expected a string key, got '1'", 1);
  expect_parse_error("tru", "expected 'true'", 0);
  expect_parse_error("nul", "expected 'null'");
  expect_parse_error("NaN", "expected a value, got 'N'", 0);
  expect_parse_error("Infinity", "expected a value, got 'I'");
  expect_parse_error("// c\n1", "expected a value, got '/'");
  expect_parse_error("1 2", "unexpected characters after the JSON value", 2);
  expect_parse_error("{} x", "unexpected characters after the JSON value", 3);
}

TEST(Json, NumberErrors) {
  expect_parse_error("01", "leading zeros", 0);
  expect_parse_error("-01", "leading zeros", 0);
  expect_parse_error("-", "expected a digit");
  expect_parse_error("1.", "expected a digit after '.'");
  expect_parse_error(".5", "expected a value, got '.'");
  expect_parse_error("1e", "expected a digit in the exponent");
  expect_parse_error("+1", "expected a value, got '+'");
  expect_parse_error("1e400", "number out of the range of a double", 0);
}

TEST(Json, StringErrors) {
  expect_parse_error("\"abc", "unterminated string");
  expect_parse_error("\"a\\", "unterminated escape sequence");
  expect_parse_error("\"\\x\"", "invalid escape '\\x'", 1);
  expect_parse_error("\"\\u12G4\"", "expected 4 hex digits after \\u");
  expect_parse_error("\"\\ud800\"", "lone high surrogate", 1);
  expect_parse_error("\"\\ud800\\u0041\"", "high surrogate not followed by a low surrogate");
  expect_parse_error("\"\\udc00\"", "lone low surrogate");
  expect_parse_error("\"a\nb\"", "unescaped control character (byte 0x0A) in a string", 2);
  expect_parse_error("\"\x01\"", "unescaped control character");
}

TEST(Json, Utf8Errors) {
  expect_parse_error("\"\xFF\"", "invalid UTF-8 (byte 0xFF)", 1);
  expect_parse_error("\"\xC3\"", "invalid UTF-8");      // truncated sequence
  expect_parse_error("\"\xC0\x80\"", "invalid UTF-8");  // overlong NUL
  expect_parse_error("\"\xE0\x80\x80\"", "invalid UTF-8 (overlong encoding)");
  expect_parse_error("\"\xED\xA0\x80\"", "invalid UTF-8 (encoded surrogate)");
  expect_parse_error("\"\xF4\x90\x80\x80\"", "invalid UTF-8 (code point above U+10FFFF)");
  expect_parse_error("\"\x80\"", "invalid UTF-8 (byte 0x80)");

  EXPECT_TRUE(is_valid_utf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_FALSE(is_valid_utf8("\xC3"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xF5\x80\x80\x80"));
}

TEST(Json, DuplicateKeysAreRejected) {
  expect_parse_error(R"({"a":1,"b":2,"a":3})", "duplicate key \"a\"", 13);
  expect_parse_error(R"({"o":{"k":1,"k":1}})", "duplicate key \"k\"");
  EXPECT_NO_THROW(parse(R"({"a":{"a":1}})"));  // the same key at different levels is fine
}

TEST(Json, LimitsStopHostileInput) {
  std::string deep(100000, '[');  // would overflow the stack without the depth limit
  expect_parse_error(deep, "nesting deeper than 64 levels", 64);
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_NO_THROW(parse(ok));
  ParseOptions shallow;
  shallow.max_depth = 2;
  expect_parse_error("{\"a\":{\"b\":[]}}", "nesting deeper than 2 levels", {}, shallow);

  ParseOptions few;
  few.max_values = 4;
  EXPECT_NO_THROW(parse("[1,2,3]", few));  // the array and its three elements
  expect_parse_error("[1,2,3,4]", "more than 4 values in the document", {}, few);
}

TEST(Json, AccessorAndWriterErrors) {
  Value v = parse("[1]");
  try {
    v.as_object();
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected a JSON object, got a JSON array"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse("1.5").as_int(), Error);
  EXPECT_THROW(parse("\"1\"").as_double(), Error);
  EXPECT_EQ(parse("2").as_double(), 2.0);

  try {
    dump(Value(std::nan("")));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("JSON has no NaN or infinity"), std::string::npos);
  }
  EXPECT_THROW(dump(Value(INFINITY)), Error);
  try {
    dump(Value("bad \xFF"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected a UTF-8 string"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::json
