// structural_hash: equal for graphs that differ only in value numbers, module paths,
// locations and names; different for different ops, attributes, types, wiring, inputs,
// outputs and constant data.
#include <gtest/gtest.h>

#include <functional>

#include "ir/ir_test_util.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbols.h"
#include "kiln/ops/reduction.h"

namespace kiln::ir {
namespace {

using testing::f32;
using testing::op;

// x, y -> add -> sum(dims) -> out; `tweak` changes one thing before the graph is built.
struct Spec {
  int skip_ids = 0;  // values numbered from here (renumbering)
  std::string path, file = "a.cpp", name = "G";
  Shape x_shape{2, 3};
  int64_t dim = 1;
  bool swap_inputs = false;
  InputKind y_kind = InputKind::Input;
  std::string y_name = "y", out_name = "out";
  float constant = 1;
  const char* unary = "relu";
};

std::unique_ptr<Graph> build(const Spec& s) {
  auto g = std::make_unique<Graph>(s.name);
  for (int i = 0; i < s.skip_ids; ++i) g->next_value_id();
  Value* x = g->add_input(InputKind::Input, "x", f32(s.x_shape));
  Value* y = g->add_input(s.y_kind, s.y_name, f32({2, 3}));
  g->add_input(InputKind::Constant, "c", f32({1}), Tensor::from_vector<float>({s.constant}));
  Node* add = g->add_node(op("add"), no_attrs(),
                          s.swap_inputs ? std::vector{y, x} : std::vector{x, y}, {f32({2, 3})});
  add->module_path = s.path;
  add->loc = {s.file, 3, ""};
  Node* u = g->add_node(op(s.unary), no_attrs(), {add->outputs[0]}, {f32({2, 3})});
  ops::ReduceAttrs a;
  a.dims = {s.dim};
  Node* sum = g->add_node(op("sum"), a, {u->outputs[0]}, {f32({2})});
  g->add_output(sum->outputs[0], s.out_name);
  return g;
}

uint64_t hash_of(const std::function<void(Spec&)>& tweak) {
  Spec s;
  tweak(s);
  return structural_hash(*build(s));
}

TEST(IrHash, IgnoresNumberingPathsLocationsAndTheGraphName) {
  uint64_t base = hash_of([](Spec&) {});
  EXPECT_EQ(base, hash_of([](Spec&) {}));
  EXPECT_EQ(base, hash_of([](Spec& s) { s.skip_ids = 17; }));
  EXPECT_EQ(base, hash_of([](Spec& s) { s.path = "blocks.0"; }));
  EXPECT_EQ(base, hash_of([](Spec& s) { s.file = "elsewhere.cpp"; }));
  EXPECT_EQ(base, hash_of([](Spec& s) { s.name = "Other"; }));
  EXPECT_EQ(base, structural_hash(*parse_graph(print_graph(*build(Spec{})))));
}

TEST(IrHash, DependsOnTheStructure) {
  uint64_t base = hash_of([](Spec&) {});
  EXPECT_NE(base, hash_of([](Spec& s) { s.dim = 0; }));                         // attributes
  EXPECT_NE(base, hash_of([](Spec& s) { s.x_shape = {symbol_value(0), 3}; }));  // types
  EXPECT_NE(base, hash_of([](Spec& s) { s.swap_inputs = true; }));              // wiring
  EXPECT_NE(base, hash_of([](Spec& s) { s.unary = "neg"; }));                   // ops
  EXPECT_NE(base, hash_of([](Spec& s) { s.y_kind = InputKind::Parameter; }));   // input kinds
  EXPECT_NE(base, hash_of([](Spec& s) { s.y_name = "z"; }));                    // input names
  EXPECT_NE(base, hash_of([](Spec& s) { s.out_name = ""; }));                   // output names
  EXPECT_NE(base, hash_of([](Spec& s) { s.constant = 2; }));                    // constant data
}

TEST(IrHash, IsTheSameInEveryProcess) {
  // FNV-1a of the canonical text: no pointers or std::hash, so a cache keyed by it can be
  // shared between processes. The literal changes only when the text form changes.
  EXPECT_EQ(hash_of([](Spec&) {}), 0x8fd70e59203ab3c9ull);
}

}  // namespace
}  // namespace kiln::ir
