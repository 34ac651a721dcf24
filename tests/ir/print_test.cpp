// The IR text form: the exact printout of a small graph, and print -> parse -> print
// round trips (symbolic dims, constants of every dtype, absent inputs, regions, quoted
// names, paths and locations, devices).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ir/ir_test_util.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/dropout.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"

namespace kiln::ir {
namespace {

using testing::f32;
using testing::op;

const int64_t s0 = symbol_value(0), s1 = symbol_value(1);

// The printout must read back into a graph that prints identically.
void expect_round_trip(const Graph& g) {
  std::string text = print_graph(g);
  std::unique_ptr<Graph> parsed = parse_graph(text);
  EXPECT_EQ(print_graph(*parsed), text);
}

std::unique_ptr<Graph> mlp() {
  auto g = std::make_unique<Graph>("FashionMLP");
  Value* x = g->add_input(InputKind::Input, "x", f32({s0, 784}));
  Value* w = g->add_input(InputKind::Parameter, "fc1.weight", f32({784, 256}));
  g->add_input(InputKind::Constant, "scale", f32({3}), Tensor::from_vector<float>({1, 2.5f, 3}));
  Node* h = g->add_node(op("matmul"), no_attrs(), {x, w}, {f32({s0, 256})});
  h->module_path = "fc1";
  h->loc = {"tests/x.cpp", 12, ""};
  ops::DimReduceAttrs max;
  max.dim = 1;
  max.keepdim = true;
  Node* d = g->add_node(op("max_dim"), max, {h->outputs[0]},
                        {f32({s0, 1}), {DType::Int64, {s0, 1}, kCPU}});
  d->module_path = "head";
  ops::ReduceAttrs dims;
  dims.dims = {1};
  Node* s = g->add_node(op("sum"), dims, {d->outputs[0]}, {f32({s0})});
  ops::ShapeAttrs shape;
  shape.shape = {s0};
  g->add_node(op("view"), shape, {d->outputs[0]}, {f32({s0})});
  g->add_output(s->outputs[0], "out");
  g->add_output(d->outputs[1]);
  return g;
}

TEST(IrPrint, PrintsASmallGraphExactly) {
  EXPECT_EQ(print_graph(*mlp()),
            "graph FashionMLP {\n"
            "  input %0 \"x\": float32[s0, 784]\n"
            "  param %1 \"fc1.weight\": float32[784, 256]\n"
            "  const %2 \"scale\": float32[3] = [1, 2.5, 3]\n"
            "  %3: float32[s0, 256] = matmul(%0, %1) {} @fc1 loc(\"tests/x.cpp\":12)\n"
            "  %4, %5: float32[s0, 1], int64[s0, 1] = max_dim(%3) {dim=1, keepdim=true} @head\n"
            "  %6: float32[s0] = sum(%4) {dims=[1], keepdim=false}\n"
            "  %7: float32[s0] = view(%4) {shape=[s0]}\n"
            "  return %6 \"out\", %5\n"
            "}\n");
}

TEST(IrPrint, RoundTripsAGraphWithAttributesAndSymbols) {
  verify(*mlp());
  expect_round_trip(*mlp());
}

TEST(IrPrint, RoundTripsSymbolicAttributesAndRandomOps) {
  Graph g("Flatten");
  Value* x = g.add_input(InputKind::Input, "x", f32({s0, s1, 28, 28}));
  ops::ShapeAttrs flat;
  flat.shape = {s0 * s1, 784};
  Node* v = g.add_node(op("view"), flat, {x}, {f32({s0 * s1, 784})});
  ops::DropoutAttrs p;
  p.p = 0.1;
  p.seed = 42;
  Node* d = g.add_node(op("dropout"), p, {v->outputs[0]},
                       {f32({s0 * s1, 784}), {DType::Bool, {s0 * s1, 784}, kCPU}});
  g.add_output(d->outputs[0]);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("view(%0) {shape=[s0*s1, 784]}"), std::string::npos) << text;
  EXPECT_NE(text.find("dropout(%1) {p=0.1, seed=42"), std::string::npos) << text;
  expect_round_trip(g);
  std::unique_ptr<Graph> parsed = parse_graph(text);
  const auto& attrs = dynamic_cast<const ops::ShapeAttrs&>(*parsed->nodes()[0]->attrs);
  EXPECT_EQ(attrs.shape, (Shape{s0 * s1, 784}));
}

TEST(IrPrint, ParseKeepsIdsTypesAndProducers) {
  std::unique_ptr<Graph> g = parse_graph(print_graph(*mlp()));
  EXPECT_EQ(g->name(), "FashionMLP");
  ASSERT_EQ(g->nodes().size(), 4u);
  const Node& d = *g->nodes()[1];
  EXPECT_EQ(d.op->name, "max_dim");
  EXPECT_EQ(d.module_path, "head");
  ASSERT_EQ(d.outputs.size(), 2u);
  EXPECT_EQ(d.outputs[1]->id, 5);
  EXPECT_EQ(d.outputs[1]->producer, &d);
  EXPECT_EQ(d.outputs[1]->output_index, 1);
  EXPECT_EQ(d.inputs[0], g->nodes()[0]->outputs[0]);
  EXPECT_EQ(g->nodes()[0]->loc, (Location{"tests/x.cpp", 12, ""}));
  EXPECT_EQ(g->inputs()[0].value->type, f32({s0, 784}));
  EXPECT_EQ(g->outputs()[0].name, "out");
  const auto& view_attrs = dynamic_cast<const ops::ShapeAttrs&>(*g->nodes()[3]->attrs);
  EXPECT_EQ(view_attrs.shape, Shape{s0});
  EXPECT_EQ(g->next_value_id(), 8);  // new values continue after the parsed ids
}

// Bit patterns, so that -0 and nan compare as printed.
template <class T>
std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  const T* p = t.data_ptr<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t b = 0;
    std::memcpy(&b, p + i, sizeof(T));
    out.push_back(b);
  }
  return out;
}

TEST(IrPrint, RoundTripsConstantsOfEveryDtype) {
  const float inf = std::numeric_limits<float>::infinity();
  Graph g("Constants");
  auto add_const = [&](const char* name, Tensor t) {
    g.add_input(InputKind::Constant, name, Type::of(t), t);
  };
  add_const("f32", Tensor::from_vector<float>({0.1f, -0.0f, 1e-30f, NAN, inf, -inf}, {2, 3}));
  add_const("f64", Tensor::from_vector<double>({0.1, 1.0 / 3, -2.5e300}));
  add_const("i32", Tensor::from_vector<int32_t>({std::numeric_limits<int32_t>::min(), 0, 7}));
  add_const("i64", Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::max(), -1}));
  add_const("b", Tensor::from_vector<bool>({true, false}));
  add_const("f16", Tensor::from_vector<Half>({Half(0.1f), Half(-65504.0f), Half(6e-8f)}));
  add_const("bf16", Tensor::from_vector<BFloat16>({BFloat16(0.1f), BFloat16(3e38f)}));
  add_const("scalar", Tensor::scalar(4.0, DType::Float32));
  add_const("empty", Tensor::from_vector<float>({}, {0}));
  g.add_output(g.inputs()[0].value, "first");
  std::string text = print_graph(g);
  EXPECT_NE(text.find("const %0 \"f32\": float32[2, 3] = [0.1, -0, 1e-30, nan, inf, -inf]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("= [0.1, 0.3333333333333333, -2.5e+300]"), std::string::npos) << text;
  EXPECT_NE(text.find("= [-2147483648, 0, 7]"), std::string::npos) << text;
  EXPECT_NE(text.find("= [true, false]"), std::string::npos) << text;
  EXPECT_NE(text.find("const %7 \"scalar\": float32[] = [4]"), std::string::npos) << text;
  EXPECT_NE(text.find("const %8 \"empty\": float32[0] = []"), std::string::npos) << text;
  expect_round_trip(g);

  std::unique_ptr<Graph> parsed = parse_graph(text);
  const auto& in = parsed->inputs();
  EXPECT_EQ(bits<float>(in[0].constant), bits<float>(g.inputs()[0].constant));
  EXPECT_EQ(bits<double>(in[1].constant), bits<double>(g.inputs()[1].constant));
  EXPECT_EQ(in[3].constant.to_vector<int64_t>(), g.inputs()[3].constant.to_vector<int64_t>());
  EXPECT_EQ(bits<Half>(in[5].constant), bits<Half>(g.inputs()[5].constant));
  EXPECT_EQ(bits<BFloat16>(in[6].constant), bits<BFloat16>(g.inputs()[6].constant));
  EXPECT_EQ(in[7].constant.dim(), 0);
}

TEST(IrPrint, RoundTripsAbsentOptionalInputs) {
  Graph g("Conv");
  Value* x = g.add_input(InputKind::Input, "x", f32({s0, 3, 8, 8}));
  Value* w = g.add_input(InputKind::Parameter, "conv.weight", f32({4, 3, 3, 3}));
  ops::Conv2dAttrs a;
  a.padding = {1, 1};
  g.add_node(op("conv2d"), a, {x, w, nullptr}, {f32({s0, 4, 8, 8})});
  g.add_output(g.nodes()[0]->outputs[0]);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("conv2d(%0, %1, _) {stride=[1, 1], padding=[1, 1]"), std::string::npos)
      << text;
  expect_round_trip(g);
  EXPECT_EQ(parse_graph(text)->nodes()[0]->inputs[2], nullptr);
}

TEST(IrPrint, RoundTripsRegions) {
  // No control-flow op exists yet: `add` hosts the regions (print and parse do not verify).
  Graph g("Branches");
  Value* x = g.add_input(InputKind::Input, "x", f32({2}));
  Value* y = g.add_input(InputKind::Input, "y", f32({2}));
  Node* host = g.add_node(op("add"), no_attrs(), {x, y}, {f32({2})});
  Graph* then_region = g.add_region(host);
  Value* a = then_region->add_input(InputKind::Input, "", f32({2}));
  then_region->add_output(
      then_region->add_node(op("relu"), no_attrs(), {a}, {f32({2})})->outputs[0]);
  Graph* else_region = g.add_region(host);
  Value* b = else_region->add_input(InputKind::Input, "b", f32({2}));
  Value* c = else_region->add_input(InputKind::Constant, "c", f32({2}),
                                    Tensor::from_vector<float>({1, 2}));
  Node* inner = else_region->add_node(op("add"), no_attrs(), {b, c}, {f32({2})});
  Graph* nested = else_region->add_region(inner);
  nested->add_input(InputKind::Input, "", f32({2}));
  else_region->add_output(inner->outputs[0], "sum");
  g.add_output(host->outputs[0]);
  std::string text = print_graph(g);
  EXPECT_EQ(text,
            "graph Branches {\n"
            "  input %0 \"x\": float32[2]\n"
            "  input %1 \"y\": float32[2]\n"
            "  %2: float32[2] = add(%0, %1) {} {\n"
            "    region (%3: float32[2]) {\n"
            "      %4: float32[2] = relu(%3) {}\n"
            "      yield %4\n"
            "    }\n"
            "    region (%5 \"b\": float32[2], const %6 \"c\": float32[2] = [1, 2]) {\n"
            "      %7: float32[2] = add(%5, %6) {} {\n"
            "        region (%8: float32[2]) {\n"
            "          yield\n"
            "        }\n"
            "      }\n"
            "      yield %7 \"sum\"\n"
            "    }\n"
            "  }\n"
            "  return %2\n"
            "}\n");
  expect_round_trip(g);
  std::unique_ptr<Graph> parsed = parse_graph(text);
  ASSERT_EQ(parsed->nodes()[0]->regions.size(), 2u);
  EXPECT_EQ(parsed->nodes()[0]->regions[1]->parent(), parsed.get());
  EXPECT_EQ(parsed->node_count(), 3u);
}

TEST(IrPrint, QuotesNamesPathsAndLocations) {
  Graph g("My \"Net\"<float>");
  Value* x = g.add_input(InputKind::Input, "x \"in\"\\\n", f32({2}));
  Node* n = g.add_node(op("relu"), no_attrs(), {x}, {f32({2})});
  n->module_path = "blocks.0.\"odd\\path\"";
  n->loc = {"dir/a \"b\".cpp", 7, "Net<\"t\">::forward"};
  Node* m = g.add_node(op("relu"), no_attrs(), {n->outputs[0]}, {f32({2})});
  m->module_path = "blocks.0.up";
  m->loc = {"x.cpp", 3, ""};
  g.add_output(m->outputs[0], "out \"1\"");
  std::string text = print_graph(g);
  EXPECT_NE(text.find("graph \"My \\\"Net\\\"<float>\" {"), std::string::npos) << text;
  EXPECT_NE(text.find("input %0 \"x \\\"in\\\"\\\\\\n\": float32[2]"), std::string::npos) << text;
  EXPECT_NE(text.find("@\"blocks.0.\\\"odd\\\\path\\\"\" loc(\"dir/a \\\"b\\\".cpp\":7 "
                      "\"Net<\\\"t\\\">::forward\")"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("relu(%1) {} @blocks.0.up loc(\"x.cpp\":3)"), std::string::npos) << text;
  expect_round_trip(g);
  std::unique_ptr<Graph> parsed = parse_graph(text);
  EXPECT_EQ(parsed->name(), g.name());
  EXPECT_EQ(parsed->inputs()[0].name, g.inputs()[0].name);
  EXPECT_EQ(parsed->nodes()[0]->module_path, n->module_path);
  EXPECT_EQ(parsed->nodes()[0]->loc, n->loc);
  EXPECT_EQ(parsed->outputs()[0].name, "out \"1\"");
}

TEST(IrPrint, RoundTripsDevicesAndSymbolProducts) {
  Graph g("Devices");
  Value* x = g.add_input(InputKind::Input, "x", {DType::Float32, {s0, s1, s0 * s1 * 4}, Device("cuda:1")});
  Value* y = g.add_input(InputKind::Buffer, "y", {DType::Int64, {}, kCPU});
  g.add_node(op("relu"), no_attrs(), {x}, {{DType::Float32, {s0, s1, s0 * s1 * 4}, Device("cuda:1")}});
  g.add_output(g.nodes()[0]->outputs[0]);
  g.add_output(y, "buffer:y");
  std::string text = print_graph(g);
  EXPECT_NE(text.find("float32[s0, s1, s0*s1*4]@cuda:1"), std::string::npos) << text;
  expect_round_trip(g);
  EXPECT_EQ(parse_graph(text)->inputs()[0].value->type.device, Device("cuda:1"));
}

TEST(IrPrint, ParsesCommentsAndNodesWithoutResults) {
  const char* text =
      "// a comment before the graph\n"
      "graph G {  // trailing comment\n"
      "  input %0 \"x\": float32[2]\n"
      "  relu(%0) {}\n"
      "  return\n"
      "}\n";
  std::unique_ptr<Graph> g = parse_graph(text);
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_TRUE(g->nodes()[0]->outputs.empty());
  EXPECT_EQ(print_graph(*g),
            "graph G {\n  input %0 \"x\": float32[2]\n  relu(%0) {}\n  return\n}\n");
}

}  // namespace
}  // namespace kiln::ir
