// The verifier: a valid graph passes, and each invariant it checks has a test whose error
// names the node and the problem.
#include <gtest/gtest.h>

#include "ir/ir_test_util.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln::ir {
namespace {

using testing::f32;
using testing::op;

const int64_t s0 = symbol_value(0);

// x [s0, 784] @ w [784, 256] -> relu -> + b: valid, with symbolic batch.
struct Mlp {
  Graph g{"Mlp"};
  Value* x = g.add_input(InputKind::Input, "x", f32({s0, 784}));
  Value* w = g.add_input(InputKind::Parameter, "fc.weight", f32({784, 256}));
  Value* b = g.add_input(InputKind::Parameter, "fc.bias", f32({256}));
  Node* mm = g.add_node(op("matmul"), no_attrs(), {x, w}, {f32({s0, 256})});
  Node* relu = g.add_node(op("relu"), no_attrs(), {mm->outputs[0]}, {f32({s0, 256})});
  Node* add = g.add_node(op("add"), no_attrs(), {relu->outputs[0], b}, {f32({s0, 256})});
  Mlp() {
    relu->module_path = "fc.act";
    relu->loc = {"model.cpp", 12, "Net::forward"};
    g.add_output(add->outputs[0], "out");
  }
};

TEST(IrVerify, AcceptsAValidGraph) {
  Mlp m;
  verify(m.g);
  verify(*parse_graph(print_graph(m.g)));
}

TEST(IrVerify, AcceptsAttributesAndAbsentOptionalInputs) {
  Graph g;
  Value* x = g.add_input(InputKind::Input, "x", f32({s0, 3, 8, 8}));
  Value* w = g.add_input(InputKind::Parameter, "w", f32({4, 3, 3, 3}));
  ops::Conv2dAttrs conv;
  conv.padding = {1, 1};
  Node* c = g.add_node(op("conv2d"), conv, {x, w, nullptr}, {f32({s0, 4, 8, 8})});
  ops::ReduceAttrs sum;
  sum.dims = {2, 3};
  Node* s = g.add_node(op("sum"), sum, {c->outputs[0]}, {f32({s0, 4})});
  g.add_output(s->outputs[0]);
  verify(g);
  verify(*parse_graph(print_graph(g)));
}

TEST(IrVerify, NamesTheNodeItsModuleAndLocation) {
  Mlp m;
  m.relu->outputs[0]->type = f32({s0, 257});
  expect_error([&] { verify(m.g); },
               {"[ir verify] relu %4 in module 'fc.act' at model.cpp:12 (Net::forward): "
                "output 0 (%4) has type float32[s0, 257] but relu infers float32[s0, 256] from "
                "(float32[s0, 256])",
                "Fix: the pass that rewrote this node must update its output types"});
}

TEST(IrVerify, ValueUsedBeforeItsDefinition) {
  Mlp m;
  m.relu->inputs[0] = m.add->outputs[0];
  expect_error([&] { verify(m.g); },
               {"relu %4 in module 'fc.act'", "uses %5 before its definition"});
}

TEST(IrVerify, ValueOfAnotherGraph) {
  Mlp m;
  Graph other;
  m.relu->inputs[0] = other.add_input(InputKind::Input, "z", f32({s0, 256}));
  expect_error([&] { verify(m.g); },
               {"relu %4", "uses %0 before its definition (or a value of another graph)"});
}

TEST(IrVerify, RegionsAreIsolated) {
  Graph g;
  Value* x = g.add_input(InputKind::Input, "x", f32({2}));
  Node* host = g.add_node(op("add"), no_attrs(), {x, x}, {f32({2})});
  Graph* region = g.add_region(host);
  Node* inner = region->add_node(op("relu"), no_attrs(), {x}, {f32({2})});
  region->add_output(inner->outputs[0]);
  g.add_output(host->outputs[0]);
  expect_error(
      [&] { verify(g); },
      {"[ir verify] region 0 of add %1 in the root module: relu %2 in the root module: uses %0, "
       "which is defined outside its region",
       "Fix: pass the value in as a region input"});
}

TEST(IrVerify, OnlyControlFlowOpsOwnRegions) {
  Graph g;
  Value* x = g.add_input(InputKind::Input, "x", f32({2}));
  Node* host = g.add_node(op("add"), no_attrs(), {x, x}, {f32({2})});
  Graph* region = g.add_region(host);
  Value* r = region->add_input(InputKind::Input, "", f32({2}));
  region->add_output(region->add_node(op("relu"), no_attrs(), {r}, {f32({2})})->outputs[0]);
  expect_error([&] { verify(g); },
               {"add %1", "the node has 1 region(s) but add is neither a control-flow op nor a fusion group"});
}

TEST(IrVerify, YieldMustUseRegionValues) {
  Graph g;
  Value* x = g.add_input(InputKind::Input, "x", f32({2}));
  Node* host = g.add_node(op("add"), no_attrs(), {x, x}, {f32({2})});
  g.add_region(host)->add_output(x);
  expect_error([&] { verify(g); },
               {"region 0 of add %1", "yield uses %0, which is not defined in this region"});
}

TEST(IrVerify, InputCount) {
  Mlp m;
  m.add->inputs.pop_back();
  expect_error([&] { verify(m.g); },
               {"add %5 in the root module", "expected 2 inputs (a, b), found 1",
                "null for an absent optional input"});
}

TEST(IrVerify, VariadicInputCount) {
  Graph g;
  g.add_node(op("cat"), *op("cat").attrs_prototype, {}, {f32({2})});
  expect_error([&] { verify(g); }, {"cat %0", "expected at least 1 input(s), found 0"});
}

TEST(IrVerify, AbsentRequiredInput) {
  Mlp m;
  m.relu->inputs[0] = nullptr;
  expect_error([&] { verify(m.g); }, {"relu %4", "the op rejects the input types (_)",
                                      "input 0 (x) is an undefined tensor"});
}

TEST(IrVerify, AttributeType) {
  Mlp m;
  m.relu->attrs = std::make_unique<ops::ReduceAttrs>();
  expect_error([&] { verify(m.g); }, {"relu %4", "expected attributes of type kiln::NoAttrs",
                                      "found kiln::ops::ReduceAttrs"});
  m.relu->attrs = nullptr;
  expect_error([&] { verify(m.g); },
               {"relu %4", "the node has no attributes; expected kiln::NoAttrs"});
}

TEST(IrVerify, NodeWithoutOp) {
  Mlp m;
  m.relu->op = nullptr;
  expect_error([&] { verify(m.g); }, {"<no op> %4", "the node has no op"});
}

TEST(IrVerify, OutputCount) {
  Mlp m;
  m.relu->outputs.push_back(m.g.make_value(f32({2}), 50));
  m.relu->outputs[1]->producer = m.relu;
  m.relu->outputs[1]->output_index = 1;
  expect_error([&] { verify(m.g); }, {"relu %4, %50", "the node has 2 outputs but relu infers 1"});
}

TEST(IrVerify, InferRejectsTheInputTypes) {
  Mlp m;
  m.w->type = f32({783, 256});
  expect_error([&] { verify(m.g); },
               {"matmul %3", "the op rejects the input types (float32[s0, 784], float32[783, 256])",
                "[matmul] inner dims differ"});
}

TEST(IrVerify, OutputsRecordTheirProducer) {
  Mlp m;
  m.relu->outputs[0]->output_index = 1;
  expect_error([&] { verify(m.g); },
               {"relu %4", "output 0 (%4) does not record this node as its producer"});
  m.relu->outputs[0]->output_index = 0;
  m.relu->outputs[0] = nullptr;
  expect_error([&] { verify(m.g); }, {"relu %<null>", "output 0 is null"});
}

TEST(IrVerify, ValueDefinedTwice) {
  Mlp m;
  m.g.mutable_inputs().push_back({InputKind::Input, "again", m.x, Tensor()});
  expect_error([&] { verify(m.g); }, {"graph input 'again': value %0 is defined twice"});
}

TEST(IrVerify, GraphInputNamesAreUnique) {
  Mlp m;
  m.g.add_input(InputKind::Buffer, "fc.weight", f32({1}));
  expect_error([&] { verify(m.g); }, {"two graph inputs are named 'fc.weight'"});
}

TEST(IrVerify, GraphInputsHaveValues) {
  Mlp m;
  m.g.mutable_inputs().push_back({InputKind::Input, "y", nullptr, Tensor()});
  expect_error([&] { verify(m.g); }, {"the graph input 'y' has no value"});
}

TEST(IrVerify, ConstantsMatchTheirType) {
  Graph g;
  g.add_input(InputKind::Constant, "c", f32({3}), Tensor::from_vector<float>({1, 2}));
  expect_error([&] { verify(g); },
               {"constant 'c' %0 holds a float32[2] tensor but its value has type float32[3]"});
  // Host data for a GPU value is allowed (the executor places it); the dtype and shape still
  // must match.
  Graph gpu;
  Type on_gpu = f32({2});
  on_gpu.device = kCUDA;
  gpu.add_input(InputKind::Constant, "c", on_gpu, Tensor::from_vector<float>({1, 2}));
  verify(gpu);
  Type wrong = f32({3});
  wrong.device = kCUDA;
  gpu.add_input(InputKind::Constant, "d", wrong, Tensor::from_vector<float>({1, 2}));
  expect_error([&] { verify(gpu); },
               {"constant 'd' %1 holds a float32[2] tensor but its value has type "
                "float32[3]@cuda:0"});
}

TEST(IrVerify, ReturnUsesDefinedValues) {
  Mlp m;
  Graph other;
  m.g.add_output(other.add_input(InputKind::Input, "z", f32({1})));
  expect_error([&] { verify(m.g); }, {"return uses %0, which is not defined in this graph"});
  m.g.mutable_outputs().back().value = nullptr;
  expect_error([&] { verify(m.g); }, {"return has a null value"});
}

}  // namespace
}  // namespace kiln::ir
