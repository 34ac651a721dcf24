// Building graphs: value numbering (regions share the outermost counter), node outputs and
// their producers, attribute copies, and the type/location/kind printers.
#include "kiln/ir/graph.h"

#include <gtest/gtest.h>

#include "ir/ir_test_util.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/reduction.h"

namespace kiln::ir {
namespace {

using testing::f32;
using testing::op;

TEST(IrGraph, ValuesAreNumberedInOrderAcrossRegions) {
  Graph g("Net");
  Value* x = g.add_input(InputKind::Input, "x", f32({2}));
  Value* w = g.add_input(InputKind::Parameter, "w", f32({2}));
  Node* n = g.add_node(op("add"), no_attrs(), {x, w}, {f32({2})});
  Graph* region = g.add_region(n);
  Value* r = region->add_input(InputKind::Input, "", f32({2}));
  Node* inner = region->add_node(op("relu"), no_attrs(), {r}, {f32({2})});
  Value* after = g.add_node(op("relu"), no_attrs(), {n->outputs[0]}, {f32({2})})->outputs[0];
  EXPECT_EQ(x->id, 0);
  EXPECT_EQ(w->id, 1);
  EXPECT_EQ(n->outputs[0]->id, 2);
  EXPECT_EQ(r->id, 3);
  EXPECT_EQ(inner->outputs[0]->id, 4);
  EXPECT_EQ(after->id, 5);
  EXPECT_EQ(region->parent(), &g);
  EXPECT_EQ(g.parent(), nullptr);
  EXPECT_EQ(g.node_count(), 3u);
  EXPECT_EQ(g.nodes().size(), 2u);
}

TEST(IrGraph, AddNodeCreatesOutputsWithTheirProducer) {
  Graph g;
  Value* x = g.add_input(InputKind::Input, "x", f32({4}));
  Node* n = g.add_node(op("dropout"), no_attrs(), {x}, {f32({4}), {DType::Bool, {4}, kCPU}});
  ASSERT_EQ(n->outputs.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(n->outputs[i]->producer, n);
    EXPECT_EQ(n->outputs[i]->output_index, i);
  }
  EXPECT_EQ(n->outputs[1]->type.dtype, DType::Bool);
  EXPECT_EQ(x->producer, nullptr);
  EXPECT_EQ(n->op, &op("dropout"));
}

TEST(IrGraph, AddNodeCopiesTheAttributes) {
  Graph g;
  Value* x = g.add_input(InputKind::Input, "x", f32({2, 3}));
  ops::ReduceAttrs a;
  a.dims = {1};
  Node* n = g.add_node(op("sum"), a, {x}, {f32({2})});
  a.dims = {0};
  EXPECT_EQ(n->attrs->str(), "{dims=[1], keepdim=false}");
}

TEST(IrGraph, ExplicitIdsMoveTheCounterPastThem) {
  Graph g;
  Value* v = g.make_value(f32({1}), 7);
  EXPECT_EQ(v->id, 7);
  Graph* region = g.add_region(g.add_node(op("relu"), no_attrs(), {v}, {f32({1})}));
  region->make_value(f32({1}), 20);
  EXPECT_EQ(g.add_input(InputKind::Input, "y", f32({1}))->id, 21);
  EXPECT_EQ(g.next_value_id(), 22);
}

TEST(IrGraph, OutputsKeepTheirNames) {
  Graph g;
  Value* x = g.add_input(InputKind::Buffer, "bn.running_mean", f32({3}));
  g.add_output(x, "buffer:bn.running_mean");
  g.add_output(x);
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0].name, "buffer:bn.running_mean");
  EXPECT_EQ(g.outputs()[1].name, "");
  EXPECT_EQ(g.inputs()[0].kind, InputKind::Buffer);
}

TEST(IrGraph, TypeStrPrintsSymbolsAndNonCpuDevices) {
  int64_t s0 = symbol_value(0);
  EXPECT_EQ(type_str(f32({s0, 784})), "float32[s0, 784]");
  EXPECT_EQ(type_str({DType::Int64, {}, kCPU}), "int64[]");
  EXPECT_EQ(type_str({DType::Bool, {s0 * 4, 2}, Device("cuda:1")}), "bool[s0*4, 2]@cuda:1");
  EXPECT_TRUE(f32({2}) == f32({2}));
  EXPECT_FALSE(f32({2}) == (Type{DType::Float32, {2}, kCUDA}));
}

TEST(IrGraph, LocationStrIsEmptyWhenUnknown) {
  EXPECT_EQ(location_str({}), "");
  EXPECT_EQ(location_str({"tests/x.cpp", 42, ""}), "tests/x.cpp:42");
  EXPECT_EQ(location_str({"x.cpp", 3, "Net::forward"}), "x.cpp:3 (Net::forward)");
  EXPECT_FALSE(Location{}.known());
}

TEST(IrGraph, InputKindNames) {
  EXPECT_STREQ(input_kind_name(InputKind::Input), "input");
  EXPECT_STREQ(input_kind_name(InputKind::Parameter), "param");
  EXPECT_STREQ(input_kind_name(InputKind::Buffer), "buffer");
  EXPECT_STREQ(input_kind_name(InputKind::Constant), "const");
}

}  // namespace
}  // namespace kiln::ir

namespace kiln::ir {
namespace {

TEST(Location, ADeferredLocationResolvesOnceOnFirstReadOfAnyCopy) {
  int calls = 0;
  Location loc = Location::deferred([&] {
    ++calls;
    return Location("model.cpp", 12, "Net::forward");
  });
  Location copy = loc;
  EXPECT_TRUE(copy.is_pending());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(location_str(copy), "model.cpp:12 (Net::forward)");
  EXPECT_FALSE(loc.is_pending());
  EXPECT_EQ(loc.line(), 12);
  EXPECT_EQ(loc, Location("model.cpp", 12, "Net::forward"));
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(Location::deferred([] { return Location(); }).known());
}

}  // namespace
}  // namespace kiln::ir
