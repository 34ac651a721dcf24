// Row emission: the loops of a row kernel (exec::FusedKernelSpec::rows), which reduces the last
// iteration dim: per row, one explicitly vectorized loop per reduction (sum, amax, amin), the
// values that depend only on the row computed once, then one loop over the per-element
// outputs. A file of its own because reductions carry state across the loop (accumulators,
// NaN flags, a pairwise combine of lanes) where elementwise loops (loop_emission.cpp, which
// also has what both kinds share) carry none.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "kernel_emission.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace kiln::cpu::codegen::detail {
namespace {

// A row kernel streams from the size of the whole L3: its input, read once from memory per
// call, and its output together fit the L3 below that and stay cached for the next reader
// (layer_norm over [4096, 1024], 16 MiB each way, ran at 0.78x eager on two threads with
// streaming stores, against 1.7x on one).
constexpr int64_t kRowStreamingStoreBytes = int64_t{32} << 20;

// A row kernel's reduction loops keep this many bytes of accumulators (two 64-byte vectors:
// two independent chains of adds per step on AVX-512, four on AVX2).
constexpr int64_t kReductionBytes = 128;

}  // namespace

// A row kernel: one scf.for per dim of rows (dim 0 running [begin, end)), then emit_row.
void KernelEmitter::emit_rows() {
  const size_t last = dims_.size() - 1;
  row_streaming_ = row_streaming_condition();
  mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
  std::vector<mlir::Value> row(buffers_.size());
  for (size_t d = 0; d < last; ++d) {
    auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), d == 0 ? begin_ : index(0),
                                            d == 0 ? end_ : dims_[d], index(1));
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    row = advance(std::move(row), d, loop.getInductionVar());
  }
  emit_row(row);
  b_.restoreInsertionPoint(after);
  if (row_streaming_) {  // see emit_nest
    auto fence = b_.create<mlir::scf::IfOp>(sb_.loc(), row_streaming_, false);
    b_.setInsertionPoint(fence.thenBlock()->getTerminator());
    b_.create<mlir::LLVM::CallIntrinsicOp>(sb_.loc(), mlir::TypeRange{}, "llvm.x86.sse.sfence",
                                           mlir::ValueRange{});
    b_.restoreInsertionPoint(after);
  }
}

// Whether this call writes the per-element outputs with streaming stores (null: never):
// when they are large (kRowStreamingStoreBytes) and aligned and every row starts on a whole
// vector (the last dim a multiple of lanes_), so each vector store is aligned.
mlir::Value KernelEmitter::row_streaming_condition() {
  mlir::Value cond = streaming_condition(kRowStreamingStoreBytes);
  if (!cond) return {};
  const int64_t c = spec_.dims.back();
  if (c >= 0 && c % lanes_ != 0) return {};
  mlir::Value whole_rows = equal(andi(dims_.back(), index(lanes_ - 1)), index(0));
  return andi(cond, whole_rows);
}

// One row, from `row` (the buffers' offsets at its first element). Values that depend only
// on the row (inputs broadcast along the last dim, reductions, ops of those) are computed
// once, in order; each reduction loops over the row computing its operand on the way (so
// an operand two reductions share is computed twice: cheaper than a round trip through
// memory for rows that stay in cache); a last loop computes and stores the per-element
// outputs.
void KernelEmitter::emit_row(const std::vector<mlir::Value>& row) {
  const ir::Graph& region = *spec_.region;
  const size_t last = dims_.size() - 1;
  ValueMap per_row;
  for (size_t i = 0; i < n_in_; ++i)
    if (!strides_[i][last]) per_row[region.inputs()[i].value] = load_input(i, row, 1);
  for (const auto& node : region.nodes()) {
    sb_.set_context(spec_.name, node.get());
    if (std::optional<ScalarOp> kind = row_reduction_kind(*node)) {
      per_row[node->outputs[0]] = emit_reduction(*node, *kind, row, per_row);
      continue;
    }
    bool row_only = true;
    for (const ir::Value* in : node->inputs) row_only &= !in || per_row.count(in) > 0;
    if (row_only) per_row[node->outputs[0]] = apply(*node, per_row);
  }
  sb_.set_context(spec_.name, nullptr);
  bool per_element = false;
  for (size_t o = 0; o < region.outputs().size(); ++o) {
    if (spec_.output_per_row[o])
      store_output(o, lookup(per_row, region.outputs()[o].value), row);
    else
      per_element = true;
  }
  if (!per_element) return;
  // Whole vectors of the widest output's cache line, then the rest one by one.
  int64_t widest = 1;
  for (const auto& out : region.outputs())
    widest = std::max<int64_t>(widest, itemsize(out.value->type.dtype));
  const int64_t lanes = kStreamingLineBytes / widest;
  mlir::Value whole = andi(dims_[last], index(-lanes));
  if (!row_streaming_) {
    emit_row_outputs(row, per_row, index(0), whole, lanes, false);
    emit_row_outputs(row, per_row, whole, dims_[last], 1, false);
    return;
  }
  auto branch = b_.create<mlir::scf::IfOp>(sb_.loc(), row_streaming_, true);
  mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
  b_.setInsertionPoint(branch.thenBlock()->getTerminator());
  emit_row_outputs(row, per_row, index(0), dims_[last], lanes, true);
  b_.setInsertionPoint(branch.elseBlock()->getTerminator());
  emit_row_outputs(row, per_row, index(0), whole, lanes, false);
  emit_row_outputs(row, per_row, whole, dims_[last], 1, false);
  b_.restoreInsertionPoint(after);
}

// The per-element outputs of a row at indices [lo, hi) of the last dim, `lanes` at a time,
// with streaming stores (aligned whole vectors only) or plain ones.
void KernelEmitter::emit_row_outputs(const std::vector<mlir::Value>& row, const ValueMap& per_row,
                                     mlir::Value lo, mlir::Value hi, int64_t lanes,
                                     bool streaming) {
  const ir::Graph& region = *spec_.region;
  mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
  auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), lo, hi, index(lanes));
  b_.setInsertionPoint(loop.getBody()->getTerminator());
  sb_.set_lanes(lanes);
  RowPoint point{per_row, advance(row, dims_.size() - 1, loop.getInductionVar()), lanes};
  for (size_t o = 0; o < region.outputs().size(); ++o)
    if (!spec_.output_per_row[o])
      store_output(o, evaluate(region.outputs()[o].value, point), point.offsets, streaming);
  sb_.set_lanes(1);
  b_.restoreInsertionPoint(after);
}

// The reduction of `node`'s operand along the row, with explicit vectors (LLVM does not
// vectorize a NaN-propagating max reduction by itself): a loop of `lanes`-wide accumulators
// over the row's whole vectors (wider than one register, so the steps form independent
// chains), the lanes combined pairwise, then a scalar loop over the rest. A sum starts at
// -0.0 (a row of -0.0 sums to -0.0 as eagerly) and may be reassociated: equal to eager's
// within rounding, not bitwise.
//
// max and min keep a plain compare-and-select accumulator, which x86 does in one
// instruction but which skips NaN, plus a flag for "saw a NaN" that makes the result NaN at
// the end, as eager's amax/amin are. (LLVM's NaN-propagating maximum also orders -0 below
// +0, which costs several instructions per step; eager does not order them either.)
ScalarValue KernelEmitter::emit_reduction(const ir::Node& node, ScalarOp kind,
                                          const std::vector<mlir::Value>& row,
                                          const ValueMap& per_row) {
  mlir::Location loc = sb_.loc();
  const size_t last = dims_.size() - 1;
  const DType t = node.outputs[0]->type.dtype;
  const int64_t lanes = kReductionBytes / itemsize(t);
  const bool extreme = kind != ScalarOp::Add;
  const double inf = std::numeric_limits<double>::infinity();
  const double identity = kind == ScalarOp::Add ? -0.0 : kind == ScalarOp::Max ? -inf : inf;
  auto initial = [&] {
    std::vector<mlir::Value> acc{sb_.value(sb_.constant(identity, t))};
    if (extreme) acc.push_back(sb_.value(sb_.constant(0, DType::Bool)));
    return acc;
  };
  // One loop over [lo, hi) by `step`, carrying `init`; its results.
  auto loop = [&](mlir::Value lo, mlir::Value hi, int64_t step, std::vector<mlir::Value> init) {
    auto op = b_.create<mlir::scf::ForOp>(loc, lo, hi, index(step), init);
    mlir::Block* body = op.getBody();
    if (!body->empty() && mlir::isa<mlir::scf::YieldOp>(body->back())) body->back().erase();
    mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
    b_.setInsertionPointToEnd(body);
    RowPoint point{per_row, advance(row, last, op.getInductionVar()), step};
    mlir::Value x = sb_.value(evaluate(node.inputs[0], point));
    std::vector<mlir::Value> acc(op.getRegionIterArgs().begin(), op.getRegionIterArgs().end());
    b_.create<mlir::scf::YieldOp>(loc, combine(kind, acc, x, x));
    b_.restoreInsertionPoint(after);
    return std::vector<mlir::Value>(op.getResults().begin(), op.getResults().end());
  };

  mlir::Value whole = andi(dims_[last], index(-lanes));
  sb_.set_lanes(lanes);
  std::vector<mlir::Value> acc = loop(index(0), whole, lanes, initial());
  sb_.set_lanes(1);
  for (int64_t width = lanes / 2; width >= 1; width /= 2) {  // halves until one lane is left
    llvm::SmallVector<int32_t> low, high;
    for (int32_t k = 0; k < width; ++k) low.push_back(k), high.push_back(k + width);
    std::vector<mlir::Value> a, b;
    for (mlir::Value v : acc) {
      a.push_back(b_.create<mlir::LLVM::ShuffleVectorOp>(loc, v, v, low));
      b.push_back(b_.create<mlir::LLVM::ShuffleVectorOp>(loc, v, v, high));
    }
    acc = combine(kind, a, b[0], extreme ? b[1] : b[0]);
  }
  for (mlir::Value& v : acc) v = b_.create<mlir::LLVM::ExtractElementOp>(loc, v, index(0));
  acc = loop(whole, dims_[last], 1, acc);
  if (!extreme) return sb_.wrap(acc[0], t);
  mlir::Value nan = sb_.value(sb_.constant(std::numeric_limits<double>::quiet_NaN(), t));
  return sb_.wrap(b_.create<mlir::arith::SelectOp>(loc, acc[1], nan, acc[0]), t);
}

// One step of a reduction: `acc` combined with `x`. A sum's adds may be reassociated. max
// and min take x where it compares greater (less), so never a NaN, and or "x is NaN" into
// acc[1] (`x_nan`: x itself, or when combining two accumulators the other's flag).
std::vector<mlir::Value> KernelEmitter::combine(ScalarOp kind, const std::vector<mlir::Value>& acc,
                                                mlir::Value x, mlir::Value x_nan) {
  mlir::Location loc = sb_.loc();
  if (kind == ScalarOp::Add)
    return {b_.create<mlir::arith::AddFOp>(loc, acc[0], x, mlir::arith::FastMathFlags::reassoc)};
  auto predicate =
      kind == ScalarOp::Max ? mlir::arith::CmpFPredicate::OGT : mlir::arith::CmpFPredicate::OLT;
  mlir::Value better = b_.create<mlir::arith::CmpFOp>(loc, predicate, x, acc[0]);
  mlir::Value value = b_.create<mlir::arith::SelectOp>(loc, better, x, acc[0]);
  mlir::Value is_nan = x_nan;
  if (mlir::isa<mlir::FloatType>(mlir::getElementTypeOrSelf(x_nan.getType())))
    is_nan = b_.create<mlir::arith::CmpFOp>(loc, mlir::arith::CmpFPredicate::UNO, x_nan, x_nan);
  return {value, b_.create<mlir::arith::OrIOp>(loc, acc[1], is_nan)};
}

// `v` at `point`: a per-row value (in every lane), or loaded, or computed from its operands.
ScalarValue KernelEmitter::evaluate(const ir::Value* v, RowPoint& point) {
  if (auto it = point.computed.find(v); it != point.computed.end()) return it->second;
  ScalarValue r;
  if (auto it = point.per_row.find(v); it != point.per_row.end()) {
    r = point.lanes == 1
            ? it->second
            : sb_.wrap(splat(sb_.value(it->second), point.lanes), sb_.dtype(it->second));
  } else if (auto in = input_index_.find(v); in != input_index_.end()) {
    r = load_input(in->second, point.offsets, point.lanes);
  } else {
    const ir::Node& node = *v->producer;
    for (const ir::Value* operand : node.inputs)
      if (operand) evaluate(operand, point);
    sb_.set_context(spec_.name, &node);
    r = apply(node, point.computed);
    sb_.set_context(spec_.name, nullptr);
  }
  point.computed[v] = r;
  return r;
}

}  // namespace kiln::cpu::codegen::detail
