// The compiled CPU backend's executor: a schedule planned once per graph, whose steps call
// generated kernels and eager kernels directly, with no shape inference, dispatch or
// autograd bookkeeping per call. Intermediate values live in shared buffers assigned by
// liveness (memory_plan.h), allocated once and reused by every call (re-planned only when
// a symbolic size changes); only the results handed back to the caller, and the values
// they view, are fresh each call.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/cpu/exec/kernel_spec.h"
#include "kiln/cpu/exec/memory_plan.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/symbol_binding.h"

namespace kiln::cpu::gemm {
struct ConvOutput;  // kiln/cpu/gemm/conv2d.h (kiln_cpu_gemm, private to this library)
}

namespace kiln::cpu::exec {

// A generated kernel and how its iteration dims follow from its node's output shape.
struct FusedKernel {
  FusedKernelFn fn = nullptr;
  Shape iteration;  // fused_iteration_shape of the node (symbolic sizes as in the IR)
  std::vector<std::vector<int>> dim_groups;  // iteration dims merged into each kernel dim
};

// The fusion groups (`fused` nodes) of `graph` that become generated kernels, regions
// included, in the order their kernels are numbered: the i-th is generated as
// fused_kernel_name(i) ("fused_0", ...). The JIT and an exported model's kernel library use
// the same numbering. "gemm" groups (a GPU GEMM and its epilogue, kiln/cuda/exec/
// gemm_epilogue.h) run as library calls and are left out.
std::vector<const ir::Node*> fused_nodes(const ir::Graph& graph);
std::string fused_kernel_name(size_t index);
// The FusedKernel of every fusion group of `graph`, its function found by `lookup(name)`.
std::unordered_map<const ir::Node*, FusedKernel> bind_fused_kernels(
    const ir::Graph& graph, const std::function<FusedKernelFn(const std::string&)>& lookup);

// A fusion group ready to run: operands made dense where needed, results allocated unless
// `results` already hold buffers of the right shape, and the iteration dims' sizes.
struct FusedLaunch {
  FusedKernelFn fn = nullptr;
  SmallVector<Tensor, 8> dense;  // keeps the operands (or their dense copies) alive
  SmallVector<void*, 12> buffers;
  SmallVector<int64_t, 6> dims;
  int64_t total = 0;                           // result elements
  void run(int64_t begin, int64_t end) const;  // the part [begin, end) of iteration dim 0
};
FusedLaunch prepare_fused_kernel(const FusedKernel& kernel, const ir::Node& node,
                                 std::span<const Tensor> operands, std::span<const int64_t> symbols,
                                 std::span<Tensor> results, bool reuse_results);

// The same over result tensors given as they are (dense, of the group's types but for dim
// 0, which may hold fewer rows: the launch then covers only the rows the caller runs).
FusedLaunch prepare_fused_kernel_into(const FusedKernel& kernel, std::span<const Tensor> operands,
                                      std::span<const int64_t> symbols,
                                      std::span<const Tensor> results);

// Runs one fusion group: prepare_fused_kernel, then the kernel split across threads.
void run_fused_kernel(const FusedKernel& kernel, const ir::Node& node,
                      std::span<const Tensor> operands, std::span<const int64_t> symbols,
                      std::span<Tensor> results, bool reuse_results);

class Plan {
 public:
  // Null when the graph holds control flow (its regions run on the reference executor's
  // node loop instead).
  static std::unique_ptr<Plan> build(
      const ir::Graph& graph, const std::unordered_map<const ir::Node*, FusedKernel>& kernels);
  ~Plan();

  std::vector<Tensor> run(std::span<const Tensor> inputs);
  void set_replay_recorded_random(bool replay) { replay_recorded_random_ = replay; }
  // The buffer sharing of the latest call's sizes (made when the plan is built for a graph
  // without symbolic sizes).
  const MemoryPlan& memory() const { return memory_; }
  bool symbolic_sizes() const { return !symbol_sources_.empty(); }
  // Matmuls and convolutions whose epilogue (the fusion group reading their result) runs
  // block by block with them.
  int epilogues() const;
  // Matmuls by a weight of the model's state that run through kiln's packed GEMM (in the
  // shape classes where that measured faster: PackedMatmul::applies) and convolutions that
  // run through the direct convolution (PackedConv::applies), their weight packed once and
  // again only when it changes, and the times a weight was packed so far.
  int packed_weights() const;
  // Runs of per-image steps (convolutions with their epilogues, poolings) that run block of
  // images by block, their intermediate results in buffers of one block per thread.
  int image_chains() const;
  int64_t weight_packs() const;

 private:
  struct Step;
  explicit Plan(const ir::Graph& graph);

  const ir::Graph& graph_;
  std::vector<ir::SymbolSource> symbol_sources_;
  std::vector<Step> steps_;
  // An intermediate whose buffer is shared by liveness.
  struct SharedValue {
    int id = 0;
    ValueLifetime lifetime;  // bytes filled in by plan_buffers
    const ir::Type* type = nullptr;
  };
  // Assigns the shared values' buffers for these sizes and makes their tensors.
  void plan_buffers(const ir::SymbolValues& symbols);
  // Whether steps[s] is a matmul of x [rows, ..., K] by a 2-D weight, or a conv2d through
  // the direct convolution, whose result only a fusion group iterating over its rows
  // (images) first reads (an epilogue): 1 when that group is the next step, 2 when the next
  // step is a view of a matmul's product in the group's shape, 0 when there is no epilogue.
  static int epilogue_distance(const std::vector<Step>& steps, size_t s,
                               const std::vector<int>& last_use);
  // Whether `next`, a fusion group, can run as `mm`'s epilogue, reading its product as
  // `read_shape`.
  static bool is_epilogue_pair(const Step& mm, const Step& next, const Shape& read_shape);
  // An epilogue group the convolution's store applies (gemm::ConvOutput): its operand
  // indices for the per-channel scale and shift (-1: none) and whether it ends in a ReLU.
  struct ChannelEpilogue {
    int scale = -1, shift = -1;
    bool relu = false;
  };
  // Whether `group` computes conv [* scale] [+ shift] [relu] of conv's result, in that
  // order, with [C, 1, 1] (or [1, C, 1, 1]) float32 operands and conv's type throughout.
  static std::optional<ChannelEpilogue> match_channel_epilogue(const Step& conv, const Step& group);
  // Whether this call's scale and shift operands of `group` are dense, as the store reads
  // them (a strided view: the steps run one by one).
  bool store_operands_dense(const Step& conv, const Step& group) const;
  // This call's bias (and, when the store applies `group`, scale, shift and ReLU) of a conv.
  gemm::ConvOutput conv_output(const Step& conv, const Step* group) const;
  // Runs one step through its generated or eager kernel.
  void run_step(Step& step, const ir::SymbolValues& symbols);
  // Runs the matmul and its epilogue block of rows by block of rows across the threads, so
  // the epilogue reads each block of the product while it is in cache: through the packed
  // GEMM, which hands over rows as they complete, or else one library GEMM call per block.
  // False when there is nothing to gain (the steps then run one after the other).
  bool run_with_epilogue(Step& mm, Step& epilogue, const ir::SymbolValues& symbols);
  // A matmul step through its packed weight, into `out` (its reusable buffer, or a new
  // tensor); false, with nothing run, when PackedMatmul does not apply to these operands.
  bool run_packed_matmul(Step& mm, const Tensor& x, const Tensor& w, Tensor& out,
                         const ir::SymbolValues& symbols);
  // A conv2d step through the direct convolution and its packed weight, into `out`, with
  // `epilogue` (may be null) on blocks of images as they complete; false, with nothing
  // run, when PackedConv does not apply to these operands.
  bool run_packed_conv(Step& conv, std::span<const Tensor> args, Tensor& out,
                       const ir::SymbolValues& symbols,
                       const std::function<void(int64_t, int64_t)>& epilogue);
  // The epilogue group's launch over this call's operands, into `results` (its reusable
  // buffers, or new tensors).
  FusedLaunch prepare_epilogue(const Step& epilogue, SmallVector<Tensor, 2>& results,
                               const ir::SymbolValues& symbols);
  // run_with_epilogue for a conv2d: its fusion group runs on blocks of images as the
  // direct convolution completes them.
  bool run_conv_with_epilogue(Step& conv, Step& epilogue, const ir::SymbolValues& symbols);

  // Image chains (plan.cpp): runs of per-image units whose intermediate results live in
  // buffers of one block of images per thread.
  struct Chain;
  struct ChainUnit;
  std::vector<Chain> chains_;
  std::vector<int> chain_of_value_;  // by value id: the chain holding it per block, or -1
  int64_t planned_threads_ = 0;      // the threads the chains' buffers were planned for
  // Whether step s starts a chain unit (a conv2d through the direct convolution, with its
  // epilogue; a pooling whose only read result is its values); fills `unit`.
  bool chain_unit_at(size_t s, ChainUnit& unit) const;
  void find_chains(const std::vector<bool>& escapes, const std::vector<int>& last_use);
  // Runs a chain block by block across the threads; false (nothing run) when a convolution
  // cannot take the direct path on this call's operands.
  bool run_chain(const Chain& chain, const ir::SymbolValues& symbols);

  std::vector<Tensor> slots_;   // by value id: this call's tensors
  std::vector<int> transient_;  // value ids cleared after each call (inputs, results, views)
  std::vector<SharedValue> shared_;
  std::vector<Tensor> shared_tensors_;  // by value id: the value's view of its shared buffer
  std::vector<Tensor> buffers_;         // the shared buffers
  MemoryPlan memory_;
  ir::SymbolValues planned_for_{};
  bool buffers_planned_ = false;
  bool replay_recorded_random_ = false;
};

}  // namespace kiln::cpu::exec
