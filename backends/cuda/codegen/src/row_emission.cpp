// Row emission for the GPU: the loops of a row kernel (exec::FusedKernelSpec::rows), which
// reduces the last iteration dim. Each block takes rows in a grid-stride loop; for each row its
// threads stride along the row, each accumulating its own elements, and a block-wide
// gpu.all_reduce (warp shuffles, then one value per warp through shared memory) gives every
// thread the row's result. Values that depend only on the row are then computed by every
// thread (no second round trip through shared memory), per-row outputs stored by thread 0, and
// the per-element outputs by the same strided loop.
//
// A file of its own because reductions carry state across the loop and need the block to
// cooperate, where elementwise kernels (kernel_emission.cpp) need neither.
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "kernel_emission.h"
#include "kiln/codegen_common/spec_check.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace kiln::cuda::codegen::detail {

// for (row = block; row < rows; row += blocks): emit_row. Every thread of a block runs the
// same rows, so the block-wide reductions inside are reached by all of them.
void KernelEmitter::emit_rows() {
  const size_t last = dims_.size() - 1;
  mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
  auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), block_in_grid(), product(0, last), grid_size());
  b_.setInsertionPoint(loop.getBody()->getTerminator());
  emit_row(offsets_at(loop.getInductionVar(), last));
  b_.restoreInsertionPoint(after);
}

// One row, from `row` (the buffers' offsets at its first element): the inputs broadcast along
// the row and every value computed from them and from reductions, in region order; the
// per-row outputs; then the per-element ones.
void KernelEmitter::emit_row(const std::vector<mlir::Value>& row) {
  const ir::Graph& region = *spec_.region;
  const size_t last = dims_.size() - 1;
  ValueMap per_row;
  for (size_t i = 0; i < n_in_; ++i)
    if (!strides_[i][last]) per_row[region.inputs()[i].value] = load_input(i, row);
  for (const auto& node : region.nodes()) {
    if (std::optional<ScalarOp> kind = codegen_common::row_reduction_kind(*node)) {
      sb_.set_context(spec_.name, node.get());
      per_row[node->outputs[0]] = emit_reduction(*node, *kind, row, per_row);
      sb_.set_context(spec_.name, nullptr);
      continue;
    }
    bool row_only = true;
    for (const ir::Value* in : node->inputs) row_only &= !in || per_row.count(in) > 0;
    if (row_only) per_row[node->outputs[0]] = sb_.apply(spec_.name, *node, per_row);
  }

  bool per_element = false;
  mlir::Value first_thread;
  for (size_t o = 0; o < region.outputs().size(); ++o) {
    if (!spec_.output_per_row[o]) {
      per_element = true;
      continue;
    }
    if (!first_thread)
      first_thread = b_.create<mlir::arith::CmpIOp>(sb_.loc(), mlir::arith::CmpIPredicate::eq,
                                                    thread_in_block(), index(0));
    auto store = b_.create<mlir::scf::IfOp>(sb_.loc(), first_thread, /*withElseRegion=*/false);
    mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
    b_.setInsertionPoint(store.thenBlock()->getTerminator());
    store_output(o, per_row.at(region.outputs()[o].value), row);
    b_.restoreInsertionPoint(after);
  }
  if (!per_element) return;
  row_loop(row, {}, [&](const std::vector<mlir::Value>& offsets, const std::vector<mlir::Value>&) {
    RowPoint point{per_row, offsets, {}};
    for (size_t o = 0; o < region.outputs().size(); ++o)
      if (!spec_.output_per_row[o])
        store_output(o, evaluate(region.outputs()[o].value, point), offsets);
    return std::vector<mlir::Value>{};
  });
}

std::vector<mlir::Value> KernelEmitter::row_loop(const std::vector<mlir::Value>& row,
                                                 const std::vector<mlir::Value>& init,
                                                 const RowBody& body) {
  const size_t last = dims_.size() - 1;
  auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), thread_in_block(), dims_[last], block_size(),
                                          init);
  mlir::Block* block = loop.getBody();
  if (!block->empty() && mlir::isa<mlir::scf::YieldOp>(block->back())) block->back().erase();
  mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
  b_.setInsertionPointToEnd(block);
  std::vector<mlir::Value> carried(loop.getRegionIterArgs().begin(),
                                   loop.getRegionIterArgs().end());
  std::vector<mlir::Value> next = body(advance(row, last, loop.getInductionVar()), carried);
  b_.create<mlir::scf::YieldOp>(sb_.loc(), next);
  b_.restoreInsertionPoint(after);
  return std::vector<mlir::Value>(loop.getResults().begin(), loop.getResults().end());
}

// The reduction of `node`'s operand along the row: each thread's share, then the block's. A
// sum starts at -0.0 (a row of -0.0 sums to -0.0, as eagerly) and its order differs from the
// eager kernel's: equal within rounding, not bitwise. max and min propagate NaN, as eager
// amax/amin do.
ScalarValue KernelEmitter::emit_reduction(const ir::Node& node, ScalarOp kind,
                                          const std::vector<mlir::Value>& row,
                                          const ValueMap& per_row) {
  mlir::Location loc = sb_.loc();
  const DType t = node.outputs[0]->type.dtype;
  const double inf = std::numeric_limits<double>::infinity();
  const double identity = kind == ScalarOp::Add ? -0.0 : kind == ScalarOp::Max ? -inf : inf;
  mlir::Value start = sb_.value(sb_.constant(identity, t));
  std::vector<mlir::Value> own = row_loop(
      row, {start},
      [&](const std::vector<mlir::Value>& offsets, const std::vector<mlir::Value>& carried) {
        RowPoint point{per_row, offsets, {}};
        mlir::Value x = sb_.value(evaluate(node.inputs[0], point));
        mlir::Value acc = carried[0];
        mlir::Value next =
            kind == ScalarOp::Add   ? b_.create<mlir::arith::AddFOp>(loc, acc, x).getResult()
            : kind == ScalarOp::Max ? b_.create<mlir::arith::MaximumFOp>(loc, acc, x).getResult()
                                    : b_.create<mlir::arith::MinimumFOp>(loc, acc, x).getResult();
        return std::vector<mlir::Value>{next};
      });
  if (emulated()) return sb_.wrap(own[0], t);  // a one-thread block: its own value
  using mlir::gpu::AllReduceOperation;
  AllReduceOperation op = kind == ScalarOp::Add   ? AllReduceOperation::ADD
                          : kind == ScalarOp::Max ? AllReduceOperation::MAXIMUMF
                                                  : AllReduceOperation::MINIMUMF;
  mlir::Value total = b_.create<mlir::gpu::AllReduceOp>(
      loc, own[0], mlir::gpu::AllReduceOperationAttr::get(b_.getContext(), op), /*uniform=*/true);
  // The reduction's shared memory is written again by the next row's: no thread may get
  // there before every thread has read this row's result.
  b_.create<mlir::gpu::BarrierOp>(loc);
  return sb_.wrap(total, t);
}

// `v` at `point`: a per-row value, or loaded, or computed from its operands.
ScalarValue KernelEmitter::evaluate(const ir::Value* v, RowPoint& point) {
  if (auto it = point.computed.find(v); it != point.computed.end()) return it->second;
  ScalarValue r;
  if (auto it = point.per_row.find(v); it != point.per_row.end()) {
    r = it->second;
  } else if (auto in = input_index_.find(v); in != input_index_.end()) {
    r = load_input(in->second, point.offsets);
  } else {
    const ir::Node& node = *v->producer;
    for (const ir::Value* operand : node.inputs)
      if (operand) evaluate(operand, point);
    r = sb_.apply(spec_.name, node, point.computed);
  }
  point.computed[v] = r;
  return r;
}

}  // namespace kiln::cuda::codegen::detail
