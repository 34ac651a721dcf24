// Loop emission: the function of each kernel (exec::FusedKernelFn's signature), its loop nests over
// the iteration dims, the loads of the inputs and the stores of the outputs, with the ops' scalar
// bodies (codegen_common's scalar_builder.h) in the innermost loop; for large outputs also the streaming
// nest of explicit vectors and non-temporal stores, chosen per call. A stage of its own
// because it is about memory (offsets, broadcasting, alignment, which loop LLVM vectorizes),
// not about what the ops compute. Row kernels' loops are in row_emission.cpp.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernel_emission.h"
#include "kiln/error.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/DialectRegistry.h"

namespace kiln::cpu::codegen::detail {

void register_loop_dialects(mlir::DialectRegistry& registry) {
  registry.insert<mlir::arith::ArithDialect, mlir::func::FuncDialect, mlir::scf::SCFDialect,
                  mlir::LLVM::LLVMDialect>();
}

void emit_kernel(mlir::ModuleOp module, const exec::FusedKernelSpec& spec, bool streaming_stores) {
  KernelEmitter(module, spec, streaming_stores).emit();
}

void KernelEmitter::emit() {
  const ir::Graph& region = *spec_.region;
  sb_.set_context(spec_.name, nullptr);
  mlir::Location loc = sb_.loc();
  mlir::Type i64 = b_.getI64Type();
  ptr_ = mlir::LLVM::LLVMPointerType::get(b_.getContext());
  b_.setInsertionPointToEnd(module_.getBody());
  auto fn = b_.create<mlir::func::FuncOp>(loc, spec_.name,
                                          b_.getFunctionType({ptr_, ptr_, i64, i64}, {}));
  mlir::Block* entry = fn.addEntryBlock();
  entry_ = entry;
  b_.setInsertionPointToStart(entry);
  b_.create<mlir::func::ReturnOp>(loc);
  b_.setInsertionPointToStart(entry);

  n_in_ = region.inputs().size();
  const size_t n_out = region.outputs().size();
  const size_t rank = spec_.dims.size();
  for (size_t k = 0; k < n_in_ + n_out; ++k)
    buffers_.push_back(load(ptr_, ptr_, entry->getArgument(0), index(static_cast<int64_t>(k))));
  for (size_t d = 0; d < rank; ++d)
    dims_.push_back(spec_.dims[d] >= 0
                        ? index(spec_.dims[d])
                        : load(i64, i64, entry->getArgument(1), index(static_cast<int64_t>(d))));
  begin_ = entry->getArgument(2);
  end_ = entry->getArgument(3);
  for (size_t i = 0; i < n_in_; ++i) input_index_[region.inputs()[i].value] = i;

  // strides_[k][d]: buffer k's element stride along dim d (null where it broadcasts): the
  // product of the sizes of the dims inside d that it does not broadcast along.
  strides_.assign(n_in_ + n_out, std::vector<mlir::Value>(rank));
  for (size_t k = 0; k < n_in_ + n_out; ++k) {
    mlir::Value running;  // null: 1
    for (size_t d = rank; d-- > 0;) {
      if (k < n_in_ && spec_.broadcast[k][d]) continue;
      if (k >= n_in_ && d + 1 == rank && spec_.output_per_row[k - n_in_]) continue;
      strides_[k][d] = running ? running : index(1);
      running = running ? muli(running, dims_[d]) : dims_[d];
    }
  }

  if (spec_.rows) {
    emit_rows();
    return;
  }
  mlir::Value streaming = streaming_condition();
  if (!streaming) {
    emit_nest(/*streaming=*/false);
    return;
  }
  auto branch = b_.create<mlir::scf::IfOp>(loc, streaming, /*withElseRegion=*/true);
  b_.setInsertionPoint(branch.thenBlock()->getTerminator());
  emit_nest(/*streaming=*/true);
  b_.setInsertionPoint(branch.elseBlock()->getTerminator());
  emit_nest(/*streaming=*/false);
}

// Null when the kernel never streams (the target cannot fence, or static dims with outputs
// below min_bytes); else whether this call does: its outputs reach that size and every
// output buffer starts on a cache line. Sets lanes_.
mlir::Value KernelEmitter::streaming_condition(int64_t min_bytes) {
  if (!streaming_stores_) return {};
  int64_t bytes = 0, widest = 1;  // of all outputs, per iteration index
  for (const auto& out : spec_.region->outputs()) {
    bytes += itemsize(out.value->type.dtype);
    widest = std::max<int64_t>(widest, itemsize(out.value->type.dtype));
  }
  lanes_ = kStreamingLineBytes / widest;
  const int64_t min_indices = (min_bytes + bytes - 1) / bytes;
  bool all_static = true;
  int64_t indices = 1;
  for (int64_t size : spec_.dims) {
    if (size < 0)
      all_static = false;
    else  // saturates at min_indices: no overflow
      indices = std::min(indices * std::min(size, min_indices), min_indices);
  }
  if (all_static && indices < min_indices) return {};
  mlir::Location loc = sb_.loc();
  mlir::Value cond;
  for (size_t k = n_in_; k < buffers_.size(); ++k) {
    mlir::Value address = b_.create<mlir::LLVM::PtrToIntOp>(loc, b_.getI64Type(), buffers_[k]);
    mlir::Value aligned = equal(andi(address, index(kStreamingLineBytes - 1)), index(0));
    cond = cond ? andi(cond, aligned) : aligned;
  }
  if (!all_static) {
    mlir::Value total = dims_[0];
    for (size_t d = 1; d < dims_.size(); ++d) total = muli(total, dims_[d]);
    mlir::Value large = b_.create<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::sge, total,
                                                       index(min_indices));
    cond = andi(cond, large);
  }
  return cond;
}

// One scf.for per dim, dim 0 running [begin, end); in the streaming nest the innermost dim is
// emit_streaming_row's. Offsets accumulate per level (null: 0), so the innermost loop only
// adds its induction variable.
void KernelEmitter::emit_nest(bool streaming) {
  const size_t rank = dims_.size();
  mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
  std::vector<mlir::Value> offsets(buffers_.size());
  for (size_t d = 0; d < rank; ++d) {
    mlir::Value lb = d == 0 ? begin_ : index(0);
    mlir::Value ub = d == 0 ? end_ : dims_[d];
    if (streaming && d + 1 == rank) {
      emit_streaming_row(offsets, lb, ub);
      break;
    }
    auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), lb, ub, index(1));
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    offsets = advance(std::move(offsets), d, loop.getInductionVar());
  }
  if (!streaming) emit_body(offsets, 1);
  b_.restoreInsertionPoint(after);
  // Streaming stores are weakly ordered: a later plain store (a worker signalling the thread
  // pool that it is done) may become visible before them. Fence them before other threads
  // read the outputs.
  if (streaming)
    b_.create<mlir::LLVM::CallIntrinsicOp>(sb_.loc(), mlir::TypeRange{}, "llvm.x86.sse.sfence",
                                           mlir::ValueRange{});
}

// The innermost dim [lo, hi) of the streaming nest, from `row` (the offsets at its index 0).
// The outputs share their offsets: from the first index j0 where the offset is a multiple of
// lanes_, each vector of lanes_ elements fills whole aligned lines of every output. The
// indices before j0 and after the last whole vector run as scalars in one loop.
void KernelEmitter::emit_streaming_row(const std::vector<mlir::Value>& row, mlir::Value lo,
                                       mlir::Value hi) {
  mlir::Location loc = sb_.loc();
  const size_t d = dims_.size() - 1;
  mlir::Value out_row = row[n_in_] ? row[n_in_] : index(0);
  mlir::Value misaligned = andi(addi(out_row, lo), index(lanes_ - 1));
  mlir::Value head = andi(subi(index(lanes_), misaligned), index(lanes_ - 1));
  mlir::Value j0 = b_.create<mlir::arith::MinSIOp>(loc, addi(lo, head), hi);
  mlir::Value j1 = addi(j0, andi(subi(hi, j0), index(-lanes_)));
  mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
  auto vectors = b_.create<mlir::scf::ForOp>(loc, j0, j1, index(lanes_));
  b_.setInsertionPoint(vectors.getBody()->getTerminator());
  emit_body(advance(row, d, vectors.getInductionVar()), lanes_);
  b_.restoreInsertionPoint(after);

  mlir::Value before = subi(j0, lo);
  auto edges = b_.create<mlir::scf::ForOp>(loc, index(0), addi(before, subi(hi, j1)), index(1));
  b_.setInsertionPoint(edges.getBody()->getTerminator());
  mlir::Value k = edges.getInductionVar();
  mlir::Value in_head =
      b_.create<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::slt, k, before);
  mlir::Value j =
      addi(k, b_.create<mlir::arith::SelectOp>(loc, in_head, lo, subi(j1, before)).getResult());
  emit_body(advance(row, d, j), 1);
  b_.restoreInsertionPoint(after);
}

// The region's nodes at `offsets` (null: 0), on scalars (lanes 1) or on vectors of `lanes`
// consecutive elements of the innermost dim, whose output stores are streaming stores of
// whole aligned lines (emit_streaming_row makes them so).
void KernelEmitter::emit_body(const std::vector<mlir::Value>& offsets, int64_t lanes) {
  const ir::Graph& region = *spec_.region;
  auto offset = [&](size_t k) { return offsets[k] ? offsets[k] : index(0); };
  sb_.set_lanes(lanes);
  ValueMap values;
  for (size_t i = 0; i < n_in_; ++i)
    values[region.inputs()[i].value] = load_input(i, offsets, lanes);
  for (const auto& node : region.nodes()) {
    sb_.set_context(spec_.name, node.get());
    values[node->outputs[0]] = apply(*node, values);
  }
  sb_.set_context(spec_.name, nullptr);
  for (size_t o = 0; o < region.outputs().size(); ++o) {
    const ir::Value* v = region.outputs()[o].value;
    DType t = v->type.dtype;
    mlir::Value x = sb_.value(lookup(values, v));
    if (t == DType::Bool)
      x = b_.create<mlir::arith::ExtUIOp>(sb_.loc(), sb_.shaped(b_.getI8Type()), x);
    mlir::Value at = address(memory_type(t), buffers_[n_in_ + o], offset(n_in_ + o));
    if (lanes == 1)
      b_.create<mlir::LLVM::StoreOp>(sb_.loc(), x, at);
    else
      b_.create<mlir::LLVM::StoreOp>(sb_.loc(), x, at, static_cast<unsigned>(lanes * itemsize(t)),
                                     /*isVolatile=*/false, /*isNonTemporal=*/true);
  }
  sb_.set_lanes(1);
}

// Region input i at `offsets`: one element, or `lanes` consecutive ones along the innermost
// dim (the same element in every lane where the input broadcasts along it).
ScalarValue KernelEmitter::load_input(size_t i, const std::vector<mlir::Value>& offsets,
                                      int64_t lanes) {
  const size_t inner = dims_.size() - 1;
  DType t = spec_.region->inputs()[i].value->type.dtype;
  bool per_lane = lanes > 1 && strides_[i][inner];
  mlir::Type memory = memory_type(t);
  mlir::Value x = load(per_lane ? sb_.shaped(memory) : memory, memory, buffers_[i],
                       offsets[i] ? offsets[i] : index(0), static_cast<unsigned>(itemsize(t)));
  if (t == DType::Bool)
    x = b_.create<mlir::arith::TruncIOp>(sb_.loc(),
                                         per_lane ? sb_.shaped(b_.getI1Type()) : b_.getI1Type(), x);
  if (lanes > 1 && !per_lane) x = splat(x, lanes);
  return sb_.wrap(x, t);
}

// Stores `value` (one element, or a vector of consecutive ones) of region output o at
// `offsets`; a streaming store needs the address aligned to the vector's size.
void KernelEmitter::store_output(size_t o, ScalarValue value,
                                 const std::vector<mlir::Value>& offsets, bool streaming) {
  DType t = spec_.region->outputs()[o].value->type.dtype;
  mlir::Value x = sb_.value(value);
  if (t == DType::Bool)
    x = b_.create<mlir::arith::ExtUIOp>(sb_.loc(), sb_.shaped(b_.getI8Type()), x);
  mlir::Value offset = offsets[n_in_ + o] ? offsets[n_in_ + o] : index(0);
  const int64_t lanes = streaming ? mlir::cast<mlir::VectorType>(x.getType()).getNumElements() : 1;
  b_.create<mlir::LLVM::StoreOp>(sb_.loc(), x, address(memory_type(t), buffers_[n_in_ + o], offset),
                                 static_cast<unsigned>(lanes * itemsize(t)),
                                 /*isVolatile=*/false, /*isNonTemporal=*/streaming);
}

// `offsets` moved to index `iv` of dim d.
std::vector<mlir::Value> KernelEmitter::advance(std::vector<mlir::Value> offsets, size_t d,
                                                mlir::Value iv) {
  for (size_t k = 0; k < offsets.size(); ++k) {
    if (!strides_[k][d]) continue;
    mlir::Value step = d + 1 == dims_.size() ? iv : muli(iv, strides_[k][d]);
    offsets[k] = offsets[k] ? addi(offsets[k], step) : step;
  }
  return offsets;
}

ScalarValue KernelEmitter::lookup(const ValueMap& values, const ir::Value* v) {
  auto it = values.find(v);
  KILN_CHECK(it != values.end(), "[codegen] kernel '", spec_.name, "': expected value %", v->id,
             " to be defined earlier in the region, found no definition. Fix: the "
             "region must be in definition order (ir::verify checks it).");
  return it->second;
}

// An i64 constant, made once per function at its entry (where it dominates every use).
mlir::Value KernelEmitter::index(int64_t v) {
  auto [it, fresh] = constants_.try_emplace(v);
  if (fresh) {
    mlir::OpBuilder at_entry = mlir::OpBuilder::atBlockBegin(entry_);
    it->second = at_entry.create<mlir::arith::ConstantOp>(sb_.loc(), b_.getI64IntegerAttr(v));
  }
  return it->second;
}
mlir::Value KernelEmitter::addi(mlir::Value a, mlir::Value b) {
  return b_.create<mlir::arith::AddIOp>(sb_.loc(), a, b);
}
mlir::Value KernelEmitter::subi(mlir::Value a, mlir::Value b) {
  return b_.create<mlir::arith::SubIOp>(sb_.loc(), a, b);
}
mlir::Value KernelEmitter::muli(mlir::Value a, mlir::Value b) {
  return b_.create<mlir::arith::MulIOp>(sb_.loc(), a, b);
}
mlir::Value KernelEmitter::andi(mlir::Value a, mlir::Value b) {
  return b_.create<mlir::arith::AndIOp>(sb_.loc(), a, b);
}
mlir::Value KernelEmitter::equal(mlir::Value a, mlir::Value b) {
  return b_.create<mlir::arith::CmpIOp>(sb_.loc(), mlir::arith::CmpIPredicate::eq, a, b);
}

mlir::Value KernelEmitter::address(mlir::Type element, mlir::Value base, mlir::Value offset) {
  return b_.create<mlir::LLVM::GEPOp>(sb_.loc(), ptr_, element, base,
                                      llvm::ArrayRef<mlir::LLVM::GEPArg>{offset},
                                      /*inbounds=*/true);
}
// alignment 0: the type's own (right for scalars; vectors pass their element's).
mlir::Value KernelEmitter::load(mlir::Type result, mlir::Type element, mlir::Value base,
                                mlir::Value offset, unsigned alignment) {
  return b_.create<mlir::LLVM::LoadOp>(sb_.loc(), result, address(element, base, offset),
                                       alignment);
}

// `x` in every lane of a vector.
mlir::Value KernelEmitter::splat(mlir::Value x, int64_t lanes) {
  mlir::Location loc = sb_.loc();
  mlir::Value v = b_.create<mlir::LLVM::PoisonOp>(loc, mlir::VectorType::get({lanes}, x.getType()));
  v = b_.create<mlir::LLVM::InsertElementOp>(loc, v, x, index(0));
  return b_.create<mlir::LLVM::ShuffleVectorOp>(loc, v, v, llvm::SmallVector<int32_t>(lanes, 0));
}

}  // namespace kiln::cpu::codegen::detail
