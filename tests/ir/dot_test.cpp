// Graphviz export: module clusters (nested by path), input shapes by kind, edges from
// producers, region clusters and highlighted nodes.
#include <gtest/gtest.h>

#include "ir/ir_test_util.h"
#include "kiln/ir/graph.h"

namespace kiln::ir {
namespace {

using testing::f32;
using testing::op;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

struct Blocks {
  Graph g{"Net \"v2\""};
  Value* x = g.add_input(InputKind::Input, "x", f32({2}));
  Value* w = g.add_input(InputKind::Parameter, "blocks.0.up.weight", f32({2}));
  Value* m = g.add_input(InputKind::Buffer, "bn.running_mean", f32({2}));
  Value* c = g.add_input(InputKind::Constant, "c", f32({1}), Tensor::from_vector<float>({1}));
  Node* up = g.add_node(op("mul"), no_attrs(), {x, w}, {f32({2})});
  Node* act = g.add_node(op("relu"), no_attrs(), {up->outputs[0]}, {f32({2})});
  Node* head = g.add_node(op("add"), no_attrs(), {act->outputs[0], m}, {f32({2})});
  Blocks() {
    up->module_path = "blocks.0.up";
    act->module_path = "blocks.1";
    g.add_output(head->outputs[0], "out");
  }
};

TEST(IrDot, DrawsNestedModuleClusters) {
  Blocks b;
  std::string dot = to_dot(b.g);
  EXPECT_EQ(dot.rfind("digraph \"Net \\\"v2\\\"\" {\n", 0), 0u) << dot;
  size_t blocks = dot.find("label=\"blocks\"");
  size_t block0 = dot.find("label=\"blocks.0\"");
  size_t up = dot.find("label=\"blocks.0.up\"");
  size_t block1 = dot.find("label=\"blocks.1\"");
  ASSERT_NE(blocks, std::string::npos) << dot;
  EXPECT_LT(blocks, block0);
  EXPECT_LT(block0, up);
  EXPECT_LT(up, block1);
  EXPECT_NE(block1, std::string::npos);
  EXPECT_EQ(count(dot, "subgraph cluster_"), 4u) << dot;
  // blocks.0.up's cluster holds the mul node, and is closed before blocks.1 opens.
  EXPECT_LT(up, dot.find("label=\"mul\\n%4: float32[2]\""));
  EXPECT_LT(dot.find("label=\"mul\\n"), block1);
  EXPECT_EQ(count(to_dot(b.g, {.cluster_modules = false}), "subgraph cluster_"), 0u);
}

TEST(IrDot, DrawsInputsByKindAndEdgesFromProducers) {
  Blocks b;
  std::string dot = to_dot(b.g);
  EXPECT_NE(dot.find("v0 [shape=ellipse, label=\"input x\\n%0: float32[2]\"]"), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("v1 [shape=box3d, label=\"param blocks.0.up.weight"), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("v2 [shape=cylinder, label=\"buffer bn.running_mean"), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("v3 [shape=note, label=\"const c"), std::string::npos) << dot;
  EXPECT_EQ(count(dot, " -> "), 6u) << dot;  // 2 into mul, 1 into relu, 2 into add, 1 return
  EXPECT_NE(dot.find("v0 -> "), std::string::npos);
  EXPECT_NE(dot.find("[label=\"out\"]"), std::string::npos);
  EXPECT_NE(dot.find("shape=doubleoctagon, label=\"return\""), std::string::npos);
}

TEST(IrDot, HighlightsNodesInRed) {
  Blocks b;
  std::string dot = to_dot(b.g, {.highlighted = {b.act}});
  EXPECT_EQ(count(dot, ", color=red"), 1u) << dot;
  EXPECT_NE(dot.find("label=\"relu\\n%5: float32[2]\", color=red, fontcolor=red"),
            std::string::npos)
      << dot;
}

TEST(IrDot, DrawsRegionsAsClusters) {
  Graph g;
  Value* x = g.add_input(InputKind::Input, "x", f32({2}));
  Node* host = g.add_node(op("add"), no_attrs(), {x, x}, {f32({2})});
  Graph* region = g.add_region(host);
  Value* r = region->add_input(InputKind::Input, "", f32({2}));
  region->add_output(region->add_node(op("relu"), no_attrs(), {r}, {f32({2})})->outputs[0]);
  g.add_output(host->outputs[0]);
  std::string dot = to_dot(g);
  EXPECT_NE(dot.find("label=\"region 0 of add %1\";"), std::string::npos) << dot;
  EXPECT_NE(dot.find("style=dashed;"), std::string::npos);
  EXPECT_NE(dot.find("label=\"yield\""), std::string::npos);
  EXPECT_NE(dot.find(" [style=dashed];"), std::string::npos);  // the yield feeds the host
}

}  // namespace
}  // namespace kiln::ir
