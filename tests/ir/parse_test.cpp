// The IR parser's errors: each names the line and column, what was expected and what was
// found.
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/graph.h"
#include "kiln/ir/symbols.h"
#include "test_util.h"

namespace kiln::ir {
namespace {

void expect_parse_error(const std::string& text, std::initializer_list<std::string_view> parts) {
  expect_error([&] { parse_graph(text); }, parts);
}

// A valid graph whose line 3 (the node) the tests replace.
std::string with_node(const std::string& node_line,
                      const std::string& input_line = "input %0 \"x\": float32[2]") {
  return "graph G {\n  " + input_line + "\n  " + node_line + "\n  return\n}\n";
}

TEST(IrParse, AcceptsTheBaseGraph) {
  EXPECT_EQ(parse_graph(with_node("%1: float32[2] = relu(%0) {}"))->nodes().size(), 1u);
}

TEST(IrParse, ExpectsGraphFirst) {
  expect_parse_error(
      "graf G {}",
      {"[ir parse] line 1, col 1: expected 'graph' at the start of the text, found 'graf'"});
}

TEST(IrParse, ExpectsAColonAfterTheValueList) {
  expect_parse_error(with_node("%1 = relu(%0) {}"),
                     {"[ir parse] line 3, col 6: expected ':' after the value list, found '='"});
}

TEST(IrParse, UnknownOpSuggestsACloseName) {
  expect_parse_error(with_node("%1: float32[2] = rleu(%0) {}"),
                     {"line 3, col 20: unknown op 'rleu'", "did you mean 'relu'?"});
  expect_parse_error(with_node("%1: float32[2] = frobnicate(%0) {}"),
                     {"unknown op 'frobnicate'", "use the name of an op in the op table"});
}

TEST(IrParse, UndefinedValue) {
  expect_parse_error(with_node("%1: float32[2] = relu(%5) {}"),
                     {"line 3, col 25: use of undefined value %5", "Fix: define it first"});
}

TEST(IrParse, ValueDefinedTwice) {
  expect_parse_error(with_node("%0: float32[2] = relu(%0) {}"),
                     {"line 3, col 3: value %0 is defined twice (first at line 2, col 9)"});
}

TEST(IrParse, RegionsSeeOnlyTheirOwnValues) {
  expect_parse_error(with_node("%1: float32[2] = add(%0, %0) {} {\n"
                               "    region (%2: float32[2]) {\n"
                               "      %3: float32[2] = relu(%0) {}\n"
                               "      yield %3\n"
                               "    }\n"
                               "  }"),
                     {"line 5, col 29: value %0 is defined outside this region",
                      "Fix: pass the value in as a region input"});
}

TEST(IrParse, BadTypes) {
  expect_parse_error(
      with_node("%1: floaty32[2] = relu(%0) {}"),
      {"line 3, col 7: expected a dtype (float32, int64, bool, ...), found 'floaty32'"});
  expect_parse_error(
      with_node("%1: float32[2x] = relu(%0) {}"),
      {"line 3, col 15: expected a size like 784, s0, s0*784 or s0^2*3, found '2x'"});
  expect_parse_error(with_node("%1: float32[2]@tpu = relu(%0) {}"),
                     {"line 3, col 18: expected a device like cpu or cuda:0, found 'tpu'"});
  expect_parse_error(with_node("%1: float32[2]@cuda:x = relu(%0) {}"),
                     {"expected a device like cpu or cuda:0, found 'cuda:x'"});
  expect_parse_error(with_node("%1: float32[2 = relu(%0) {}"),
                     {"expected ']' after the dims, found '='"});
}

TEST(IrParse, OneTypePerResult) {
  expect_parse_error(with_node("%1, %2: float32[2] = dropout(%0) {}"),
                     {"line 3, col 11: expected 2 types for the 2 values, found 1"});
}

TEST(IrParse, ValueNumbers) {
  expect_parse_error(with_node("%x: float32[2] = relu(%0) {}"),
                     {"line 3, col 4: expected a value number after '%', found 'x'"});
}

TEST(IrParse, OnlyConstantsCarryData) {
  expect_parse_error(
      with_node("return", "input %0 \"x\": float32[2] = [1, 2]"),
      {"line 2, col 28: only const inputs carry data", "kind 'input'", "declare it as const"});
}

TEST(IrParse, ConstantElements) {
  expect_parse_error(with_node("return", "const %0 \"c\": float32[3] = [1, 2]"),
                     {"line 2, col 30: expected 3 elements for float32[3], found 2"});
  expect_parse_error(with_node("return", "const %0 \"c\": float32[3] = [1, 2, 3, 4]"),
                     {"line 2, col 40: expected 3 elements for float32[3], found more"});
  expect_parse_error(with_node("return", "const %0 \"c\": int64[2] = [1, 2.5]"),
                     {"line 2, col 32: expected an element of dtype int64, found '2.5'"});
  expect_parse_error(with_node("return", "const %0 \"c\": bool[1] = [1]"),
                     {"expected an element of dtype bool, found '1'"});
  expect_parse_error(with_node("return", "const %0 \"c\": float32[s0] = []"),
                     {"a constant needs static dims, found the type float32[s0]"});
}

TEST(IrParse, ConstantSizesAreCheckedBeforeAllocating) {
  // A count that overflows int64, and one that the text cannot hold: refused before any
  // buffer is allocated (the first once wrapped around and overflowed a small heap buffer).
  expect_parse_error(
      with_node("return", "const %0 \"c\": float32[4294967296, 4294967296] = [1]"),
      {"line 2, col 51: the constant's type float32[4294967296, 4294967296] has more elements "
       "than a 64-bit size can count"});
  expect_parse_error(with_node("return", "const %0 \"c\": float32[9223372036854775807] = [1]"),
                     {"float32[9223372036854775807] needs 9223372036854775807 elements",
                      "characters of text follow"});
  expect_parse_error(with_node("return", "const %0 \"c\": float32[1000000] = [1, 2]"),
                     {"needs 1000000 elements, but only"});
}

TEST(IrParse, Strings) {
  expect_parse_error("graph \"G {\n", {"line 1, col 7: unterminated string"});
  expect_parse_error(
      with_node("return", "input %0 \"x\\t\": float32[2]"),
      {"line 2, col 14: expected an escape \\\", \\\\ or \\n in a string, found '\\t'"});
}

TEST(IrParse, Attributes) {
  expect_parse_error(with_node("%1: float32[2] = relu(%0) {foo=1}"),
                     {"line 3, col 29: bad attributes for 'relu'", "unknown field 'foo'"});
  expect_parse_error(with_node("%1: float32[2] = relu(%0)"),
                     {"expected the op's attributes in braces ({} for none), found 'return'"});
  expect_parse_error("graph G {\n  input %0: float32[2]\n  relu(%0) {dims=[1}\n",
                     {"line 3, col 12: unterminated '{' (expected a closing '}')"});
}

TEST(IrParse, NodeSyntax) {
  expect_parse_error(with_node("%1: float32[2] = relu(%0 {}"),
                     {"expected ')' after the op's inputs, found '{'"});
  expect_parse_error(with_node("%1: float32[2] = relu(%0) {} loc(\"a.cpp\":x)"),
                     {"expected a line number, found 'x'"});
  expect_parse_error(with_node("%1: float32[2] = relu(%0) {} {\n    foo\n  }"),
                     {"line 4, col 5: expected 'region', found 'foo'"});
  expect_parse_error(with_node("%1: float32[2] = relu(%0) {} {\n    region () {\n    }\n  }"),
                     {"line 5, col 5: expected a node or 'yield', found '}'"});
}

TEST(IrParse, GraphStructure) {
  expect_parse_error(
      "graph G {\n  input %0: float32[2]\n",
      {"line 3, col 1: expected an input, a node or 'return', found the end of the text"});
  expect_parse_error("graph G {\n  return\n",
                     {"expected '}' to close the graph, found the end of the text"});
  expect_parse_error(
      "graph G {\n  return\n}\nextra",
      {"line 4, col 1: expected the end of the text after the graph, found 'extra'"});
}

}  // namespace
}  // namespace kiln::ir

namespace kiln::ir {
namespace {

// A slice of a static dim by a symbolic end, as a trace of `pos[:x.size(0)] + x` records it.
const char* kBounded = R"(graph bounded {
  assume s0 <= 4 slice @embed loc("model.cpp":7 "Net::forward")
  input %0 "x": float32[s0]
  const %1 "pos": float32[4] = [1, 2, 3, 4]
  %2: float32[s0] = slice(%1) {dim=0, start=0, end=s0, step=1}
  %3: float32[s0] = add(%0, %2) {}
  return %3
})";

TEST(IrSizeBounds, PrintParseCloneAndHashKeepThem) {
  std::unique_ptr<Graph> g = parse_graph(kBounded);
  ASSERT_EQ(g->size_bounds().size(), 1u);
  EXPECT_EQ(g->size_bounds()[0].size, symbol_value(0));
  EXPECT_EQ(g->size_bounds()[0].max, 4);
  EXPECT_EQ(g->size_bounds()[0].where(), "slice at model.cpp:7 (Net::forward) in module 'embed'");
  verify(*g);
  EXPECT_EQ(print_graph(*g), std::string(kBounded) + "\n");
  EXPECT_EQ(print_graph(*clone_graph(*g)), print_graph(*g));
  // The bound is part of what the graph computes: another bound is another graph, while
  // where it came from (a location) is not.
  std::string looser = kBounded;
  looser.replace(looser.find("<= 4"), 4, "<= 9");
  EXPECT_NE(structural_hash(*parse_graph(looser)), structural_hash(*g));
  std::string elsewhere = kBounded;
  elsewhere.replace(elsewhere.find("\"model.cpp\":7"), 13, "\"other.cpp\":1");
  EXPECT_EQ(structural_hash(*parse_graph(elsewhere)), structural_hash(*g));
  // The tightest bound of a size wins.
  g->add_size_bound({symbol_value(0), 3, "narrow"});
  g->add_size_bound({symbol_value(0), 8, "slice"});
  ASSERT_EQ(g->size_bounds().size(), 1u);
  EXPECT_EQ(g->size_bounds()[0].max, 3);
  EXPECT_EQ(g->size_bounds()[0].where(), "narrow in the root module");
}

TEST(IrSizeBounds, ParseAndVerifyRefuseMalformedBounds) {
  auto with_assume = [](const std::string& line) {
    return "graph G {\n  " + line + "\n  input %0 \"x\": float32[s0]\n  return %0\n}\n";
  };
  EXPECT_EQ(parse_graph(with_assume("assume s0*2 <= 10 slice"))->size_bounds()[0].size,
            symbol_value(0) * 2);
  expect_parse_error(with_assume("assume 5 <= 10 slice"),
                     {"line 2, col 10", "an assume bounds a symbolic size, found the number 5"});
  expect_parse_error(with_assume("assume s0 <= 0 slice"), {"expected the bound, a positive integer"});
  expect_parse_error(with_assume("assume s0 < 3 slice"), {"expected '=' in '<='"});
  expect_parse_error(with_assume("assume s0 <= x slice"), {"expected the bound, a positive integer"});
  Graph g;
  g.add_size_bound({784, 10, "slice"});
  expect_error([&] { verify(g); }, {"[ir verify] the size bound 784 <= 10 (slice in the root "
                                    "module) must bound a symbolic size"});
  // Without a symbol, a slice end past its dim is still an error.
  std::string past = kBounded;
  past.replace(past.find("end=s0"), 6, "end=9");
  past.replace(past.find("%2: float32[s0]"), 15, "%2: float32[9]");
  expect_error([&] { verify(*parse_graph(past)); },
               {"[slice] range [0, 9) is outside dim 0 of size 4"});
}

}  // namespace
}  // namespace kiln::ir
