// Kernel emission for the GPU: each kernel's gpu.func (or, emulated, func.func) and its
// parameters, the elementwise kernels' grid-stride loops (scalar, and 128-bit vectors for
// aligned one-dim kernels), and what every kernel uses (thread and block ids, offsets from a
// flat index, loads and stores). Row kernels' loops are in row_emission.cpp.
//
// Offsets are int64: a tensor may have more than 2^31 elements. Static dims are constants, so
// LLVM turns the divisions of a flat index into multiplications; where every buffer is dense
// over the same dims (the common case: exec::fused_kernel_spec merges those into one dim), a
// flat index is an offset and there is no division at all.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernel_emission.h"
#include "kiln/error.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/DialectRegistry.h"

namespace kiln::cuda::codegen::detail {

void register_emission_dialects(mlir::DialectRegistry& registry) {
  registry.insert<mlir::arith::ArithDialect, mlir::func::FuncDialect, mlir::gpu::GPUDialect,
                  mlir::scf::SCFDialect, mlir::LLVM::LLVMDialect>();
}

void emit_kernel(mlir::ModuleOp module, mlir::Block* gpu_module_body,
                 const cpu::exec::FusedKernelSpec& spec) {
  KernelEmitter(module, gpu_module_body, spec).emit();
}

void emit_emulated_kernel(mlir::ModuleOp module, const cpu::exec::FusedKernelSpec& spec) {
  KernelEmitter(module, nullptr, spec).emit();
}

void KernelEmitter::emit() {
  const ir::Graph& region = *spec_.region;
  sb_.set_context(spec_.name, nullptr);
  ptr_ = mlir::LLVM::LLVMPointerType::get(b_.getContext());
  n_in_ = region.inputs().size();
  const size_t n_out = region.outputs().size();
  const size_t rank = spec_.dims.size();
  std::vector<mlir::Type> params(n_in_ + n_out, ptr_);
  params.insert(params.end(), rank, b_.getI64Type());

  entry_ = emit_function(params);

  for (size_t k = 0; k < n_in_ + n_out; ++k) buffers_.push_back(entry_->getArgument(k));
  for (size_t d = 0; d < rank; ++d)
    dims_.push_back(spec_.dims[d] >= 0 ? index(spec_.dims[d]) : entry_->getArgument(n_in_ + n_out + d));
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
  if (spec_.rows)
    emit_rows();
  else
    emit_elementwise();
}

mlir::Block* KernelEmitter::emit_function(const std::vector<mlir::Type>& params) {
  mlir::Location loc = sb_.loc();
  mlir::Block* entry = nullptr;
  if (emulated()) {
    std::vector<mlir::Type> with_grid = params;
    with_grid.insert(with_grid.end(), 2, b_.getI64Type());  // this block, the grid's blocks
    b_.setInsertionPointToEnd(module_.getBody());
    auto fn = b_.create<mlir::func::FuncOp>(loc, spec_.name, b_.getFunctionType(with_grid, {}));
    entry = fn.addEntryBlock();
    b_.setInsertionPointToStart(entry);
    b_.create<mlir::func::ReturnOp>(loc);
  } else {
    b_.setInsertionPoint(gpu_module_body_->getTerminator());
    auto fn = b_.create<mlir::gpu::GPUFuncOp>(loc, spec_.name, b_.getFunctionType(params, {}));
    fn->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
    entry = &fn.getBody().front();
    b_.setInsertionPointToStart(entry);
    b_.create<mlir::gpu::ReturnOp>(loc);
  }
  b_.setInsertionPointToStart(entry);
  return entry;
}

// for (i = global thread; i < every element; i += the grid's threads): the region at i. A
// kernel of one merged dim (every buffer dense or broadcast) also gets the vector loop, taken
// when every dense buffer is aligned to a whole vector: each thread reads and writes
// kVectorLanes consecutive elements at once (128-bit loads and stores for 4-byte types), which
// halves the instructions per byte a memory-bound kernel issues.
void KernelEmitter::emit_elementwise() {
  mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
  const mlir::Value n = product(0, dims_.size());
  if (dims_.size() != 1) {
    emit_scalar_loop(global_thread(), n);
    return;
  }
  auto branch = b_.create<mlir::scf::IfOp>(sb_.loc(), vectors_aligned(), /*withElseRegion=*/true);
  b_.setInsertionPoint(branch.thenBlock()->getTerminator());
  static_assert((kVectorLanes & (kVectorLanes - 1)) == 0, "a power of two: a shift divides");
  const mlir::Value vectors =
      b_.create<mlir::arith::ShRUIOp>(sb_.loc(), n, index(__builtin_ctzll(kVectorLanes)));
  const mlir::Value whole = muli(vectors, index(kVectorLanes));
  auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), global_thread(), vectors, grid_threads());
  b_.setInsertionPoint(loop.getBody()->getTerminator());
  emit_vector(muli(loop.getInductionVar(), index(kVectorLanes)));
  b_.setInsertionPointAfter(loop);
  emit_scalar_loop(addi(whole, global_thread()), n);  // the last n % kVectorLanes elements
  b_.setInsertionPoint(branch.elseBlock()->getTerminator());
  emit_scalar_loop(global_thread(), n);
  b_.restoreInsertionPoint(after);
}

// for (i = start; i < end; i += the grid's threads): the region at flat index i.
void KernelEmitter::emit_scalar_loop(mlir::Value start, mlir::Value end) {
  const ir::Graph& region = *spec_.region;
  mlir::OpBuilder::InsertPoint after = b_.saveInsertionPoint();
  auto loop = b_.create<mlir::scf::ForOp>(sb_.loc(), start, end, grid_threads());
  b_.setInsertionPoint(loop.getBody()->getTerminator());
  std::vector<mlir::Value> offsets = offsets_at(loop.getInductionVar(), dims_.size());
  ValueMap values;
  for (size_t i = 0; i < n_in_; ++i) values[region.inputs()[i].value] = load_input(i, offsets);
  for (const auto& node : region.nodes()) values[node->outputs[0]] = sb_.apply(spec_.name, *node, values);
  for (size_t o = 0; o < region.outputs().size(); ++o)
    store_output(o, values.at(region.outputs()[o].value), offsets);
  b_.restoreInsertionPoint(after);
}

// Whether every buffer that is not broadcast starts on a whole vector of its elements (the
// allocator's blocks do; a view at an odd offset does not).
mlir::Value KernelEmitter::vectors_aligned() {
  mlir::Value all;
  for (size_t k = 0; k < buffers_.size(); ++k) {
    if (!strides_[k][0]) continue;
    const int64_t bytes = kVectorLanes * itemsize(buffer_dtype(k));
    mlir::Value address = b_.create<mlir::LLVM::PtrToIntOp>(sb_.loc(), b_.getI64Type(), buffers_[k]);
    mlir::Value low = b_.create<mlir::arith::AndIOp>(sb_.loc(), address, index(bytes - 1));
    mlir::Value aligned = b_.create<mlir::arith::CmpIOp>(sb_.loc(), mlir::arith::CmpIPredicate::eq,
                                                         low, index(0));
    all = all ? b_.create<mlir::arith::AndIOp>(sb_.loc(), all, aligned).getResult() : aligned;
  }
  return all ? all : b_.create<mlir::arith::ConstantOp>(sb_.loc(), b_.getBoolAttr(true)).getResult();
}

// Elements [base, base + kVectorLanes) of a one-dim kernel: each dense input loaded as one
// vector, each broadcast one once; the region computed lane by lane on scalars (the NVPTX back
// end has no vector arithmetic to use, and the ops' bodies stay the scalar ones); each output
// stored as one vector.
void KernelEmitter::emit_vector(mlir::Value base) {
  const ir::Graph& region = *spec_.region;
  mlir::Location loc = sb_.loc();
  std::vector<mlir::Value> loaded(n_in_);
  std::vector<ScalarValue> broadcast(n_in_);
  for (size_t i = 0; i < n_in_; ++i) {
    if (!strides_[i][0]) {
      broadcast[i] = load_input(i, std::vector<mlir::Value>(buffers_.size()));
      continue;
    }
    mlir::Type memory = sb_.memory_type(buffer_dtype(i));
    mlir::Type vector = mlir::VectorType::get({kVectorLanes}, memory);
    loaded[i] = b_.create<mlir::LLVM::LoadOp>(
        loc, vector, address(memory, buffers_[i], base),
        static_cast<unsigned>(kVectorLanes * itemsize(buffer_dtype(i))));
  }
  std::vector<std::vector<mlir::Value>> results(region.outputs().size());
  for (int64_t lane = 0; lane < kVectorLanes; ++lane) {
    ValueMap values;
    for (size_t i = 0; i < n_in_; ++i) {
      if (!strides_[i][0]) {
        values[region.inputs()[i].value] = broadcast[i];
        continue;
      }
      mlir::Value x = b_.create<mlir::LLVM::ExtractElementOp>(loc, loaded[i], index(lane));
      if (buffer_dtype(i) == DType::Bool)
        x = b_.create<mlir::arith::TruncIOp>(loc, b_.getI1Type(), x);
      values[region.inputs()[i].value] = sb_.wrap(x, buffer_dtype(i));
    }
    for (const auto& node : region.nodes())
      values[node->outputs[0]] = sb_.apply(spec_.name, *node, values);
    for (size_t o = 0; o < region.outputs().size(); ++o) {
      mlir::Value x = sb_.value(values.at(region.outputs()[o].value));
      if (buffer_dtype(n_in_ + o) == DType::Bool)
        x = b_.create<mlir::arith::ExtUIOp>(loc, b_.getI8Type(), x);
      results[o].push_back(x);
    }
  }
  for (size_t o = 0; o < results.size(); ++o) {
    const DType t = buffer_dtype(n_in_ + o);
    mlir::Type memory = sb_.memory_type(t);
    mlir::Value v = b_.create<mlir::LLVM::PoisonOp>(loc, mlir::VectorType::get({kVectorLanes}, memory));
    for (int64_t lane = 0; lane < kVectorLanes; ++lane)
      v = b_.create<mlir::LLVM::InsertElementOp>(loc, v, results[o][static_cast<size_t>(lane)],
                                                 index(lane));
    b_.create<mlir::LLVM::StoreOp>(loc, v, address(memory, buffers_[n_in_ + o], base),
                                   static_cast<unsigned>(kVectorLanes * itemsize(t)));
  }
}

DType KernelEmitter::buffer_dtype(size_t k) const {
  return k < n_in_ ? spec_.region->inputs()[k].value->type.dtype
                   : spec_.region->outputs()[k - n_in_].value->type.dtype;
}

mlir::Value KernelEmitter::global_thread() {
  return addi(muli(block_in_grid(), block_size()), thread_in_block());
}
mlir::Value KernelEmitter::grid_threads() { return muli(grid_size(), block_size()); }

// The ids as int64 (the gpu dialect's are `index`, 64 bits wide after the NVVM conversion).
// Emulated: thread 0 of a one-thread block, the block and the grid's size from the last two
// parameters.
mlir::Value KernelEmitter::thread_in_block() {
  if (emulated()) return index(0);
  mlir::Value id = b_.create<mlir::gpu::ThreadIdOp>(sb_.loc(), mlir::gpu::Dimension::x);
  return b_.create<mlir::arith::IndexCastOp>(sb_.loc(), b_.getI64Type(), id);
}
mlir::Value KernelEmitter::block_size() {
  if (emulated()) return index(1);
  mlir::Value v = b_.create<mlir::gpu::BlockDimOp>(sb_.loc(), mlir::gpu::Dimension::x);
  return b_.create<mlir::arith::IndexCastOp>(sb_.loc(), b_.getI64Type(), v);
}
mlir::Value KernelEmitter::block_in_grid() {
  if (emulated()) return entry_->getArgument(entry_->getNumArguments() - 2);
  mlir::Value v = b_.create<mlir::gpu::BlockIdOp>(sb_.loc(), mlir::gpu::Dimension::x);
  return b_.create<mlir::arith::IndexCastOp>(sb_.loc(), b_.getI64Type(), v);
}
mlir::Value KernelEmitter::grid_size() {
  if (emulated()) return entry_->getArgument(entry_->getNumArguments() - 1);
  mlir::Value v = b_.create<mlir::gpu::GridDimOp>(sb_.loc(), mlir::gpu::Dimension::x);
  return b_.create<mlir::arith::IndexCastOp>(sb_.loc(), b_.getI64Type(), v);
}

// Dims [0, ndims) from the innermost out: the index along dim d is linear % size, the rest
// linear / size (unsigned: indices are never negative, and unsigned division is cheaper).
// The outermost dim needs no remainder.
std::vector<mlir::Value> KernelEmitter::offsets_at(mlir::Value linear, size_t ndims) {
  std::vector<mlir::Value> offsets(buffers_.size());
  mlir::Value rest = linear;
  for (size_t d = ndims; d-- > 0;) {
    mlir::Value at = rest;
    if (d > 0) {
      at = b_.create<mlir::arith::RemUIOp>(sb_.loc(), rest, dims_[d]);
      rest = b_.create<mlir::arith::DivUIOp>(sb_.loc(), rest, dims_[d]);
    }
    offsets = advance(std::move(offsets), d, at);
  }
  return offsets;
}

std::vector<mlir::Value> KernelEmitter::advance(std::vector<mlir::Value> offsets, size_t d,
                                                mlir::Value iv) {
  for (size_t k = 0; k < offsets.size(); ++k) {
    if (!strides_[k][d]) continue;
    mlir::Value step = d + 1 == dims_.size() ? iv : muli(iv, strides_[k][d]);
    offsets[k] = offsets[k] ? addi(offsets[k], step) : step;
  }
  return offsets;
}

ScalarValue KernelEmitter::load_input(size_t i, const std::vector<mlir::Value>& offsets) {
  DType t = spec_.region->inputs()[i].value->type.dtype;
  mlir::Type memory = sb_.memory_type(t);
  mlir::Value at = address(memory, buffers_[i], offsets[i] ? offsets[i] : index(0));
  mlir::Value x = b_.create<mlir::LLVM::LoadOp>(sb_.loc(), memory, at);
  if (t == DType::Bool) x = b_.create<mlir::arith::TruncIOp>(sb_.loc(), b_.getI1Type(), x);
  return sb_.wrap(x, t);
}

void KernelEmitter::store_output(size_t o, ScalarValue value,
                                 const std::vector<mlir::Value>& offsets) {
  DType t = spec_.region->outputs()[o].value->type.dtype;
  mlir::Value x = sb_.value(value);
  if (t == DType::Bool) x = b_.create<mlir::arith::ExtUIOp>(sb_.loc(), b_.getI8Type(), x);
  mlir::Value offset = offsets[n_in_ + o] ? offsets[n_in_ + o] : index(0);
  b_.create<mlir::LLVM::StoreOp>(sb_.loc(), x,
                                 address(sb_.memory_type(t), buffers_[n_in_ + o], offset));
}

mlir::Value KernelEmitter::product(size_t first, size_t last) {
  mlir::Value p = index(1);
  for (size_t d = first; d < last; ++d) p = d == first ? dims_[d] : muli(p, dims_[d]);
  return p;
}

// An i64 constant, made once per kernel at its entry (where it dominates every use).
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
mlir::Value KernelEmitter::muli(mlir::Value a, mlir::Value b) {
  return b_.create<mlir::arith::MulIOp>(sb_.loc(), a, b);
}
mlir::Value KernelEmitter::address(mlir::Type element, mlir::Value base, mlir::Value offset) {
  return b_.create<mlir::LLVM::GEPOp>(sb_.loc(), ptr_, element, base,
                                      llvm::ArrayRef<mlir::LLVM::GEPArg>{offset},
                                      /*inbounds=*/true);
}

}  // namespace kiln::cuda::codegen::detail
