// Generated kernels on a GPU: a PTX module (kiln/cuda/codegen/ptx.h makes one for the fusion
// groups of a graph) loaded through the driver, and its kernels launched. This part needs no
// code generator, so kiln_rt and a build without LLVM/MLIR can run kernels made elsewhere.
//
// Every generated kernel takes the same parameters: the device pointers of its fusion group's
// inputs, then of its outputs (dense, row-major), then one int64 per iteration dim.
//
//   kiln::cuda::FusedKernelModule module(ptx, kernels);            // on GPU 0
//   module.launch("fused_0", {x, a, b, out}, {n});   // queued on the current stream
//   kiln::cuda::synchronize();
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::cuda {

enum class FusedKernelKind {
  // A grid-stride loop over the flat iteration space, one element per thread per step.
  Elementwise,
  // A grid-stride loop over rows, one block per row at a time; the block's threads stride
  // along the row and reduce it together.
  Rows,
};

// One kernel of a module and what launching it needs.
struct FusedKernelInfo {
  std::string name;  // the PTX entry's name
  FusedKernelKind kind = FusedKernelKind::Elementwise;
  size_t buffers = 0;  // pointer parameters: the group's inputs, then its outputs
  size_t dims = 0;     // int64 parameters after them: the iteration dims
};

// The grid of one launch: `block` threads per block, `grid` blocks.
struct LaunchGeometry {
  int64_t grid = 1;
  int64_t block = 1;
};

// How to launch `kernel` over iteration dims `dims` on a GPU with `multiprocessors` SMs:
// elementwise kernels run 256-thread blocks, enough of them to fill every SM several times
// (the grid-stride loop covers the rest); row kernels one block per row up to the same
// limit, with as many threads as the row has elements, rounded up to whole warps (32 to 1024).
// Throws kiln::Error for a wrong number of dims, a negative dim or no multiprocessors.
LaunchGeometry launch_geometry(const FusedKernelInfo& kernel, std::span<const int64_t> dims,
                               int multiprocessors);

// What this thread has queued on GPUs so far: kernel launches (the generated kernels and the
// eager ones, all through FusedKernelModule), library calls (cuBLASLt, cuDNN), CUDA graph launches
// (graph_capture.h) and copies and fills between buffers of a GPU. explain and `kiln bench`
// take the difference around a call: its launches per call.
struct LaunchCounts {
  uint64_t kernels = 0;
  uint64_t library_calls = 0;
  uint64_t graphs = 0;
  uint64_t copies = 0;
};
LaunchCounts launches_on_this_thread();
namespace detail {
void count_library_call();  // a GEMM's cuBLASLt call, a convolution's cuDNN call
void count_graph_launch();  // CapturedGraph::replay
void count_copy();          // copy_on_device_async, fill_words_async
}

// A PTX module loaded on one GPU. The driver compiles the PTX for that GPU when it is loaded.
class FusedKernelModule {
 public:
  // Throws kiln::Error naming why there is no GPU, or with the driver's compiler log when it
  // rejects the PTX (an architecture newer than the GPU's, say), or when a kernel in
  // `kernels` is not in the PTX.
  FusedKernelModule(const std::string& ptx, std::vector<FusedKernelInfo> kernels, int device = 0);
  ~FusedKernelModule();
  FusedKernelModule(const FusedKernelModule&) = delete;
  FusedKernelModule& operator=(const FusedKernelModule&) = delete;

  // The kernel named `name`; throws kiln::Error naming the kernels the module has.
  const FusedKernelInfo& kernel(const std::string& name) const;
  int device() const { return device_; }

  // Queues kernel `name` over `dims` on this thread's current stream of the module's GPU
  // (kiln/cuda/stream.h), with launch_geometry's grid. `buffers`: device pointers, inputs then outputs. Checks the counts, that no pointer
  // is null and every dim is known; returns before the kernel runs.
  void launch(const std::string& name, std::span<void* const> buffers,
              std::span<const int64_t> dims) const;
  // Queues kernel `name` with the caller's grid and parameters (`params[i]` points at the
  // kernel's i-th parameter): for kernels whose parameters are not buffers then dims, such as
  // the eager elementwise kernels (kiln/cuda/elementwise_kernels.h).
  void launch_with(const std::string& name, LaunchGeometry geometry, void** params) const;
  int multiprocessors() const { return multiprocessors_; }

 private:
  struct Loaded;
  std::unique_ptr<Loaded> loaded_;
  std::vector<FusedKernelInfo> kernels_;
  int device_ = 0;
  int multiprocessors_ = 0;
};

}  // namespace kiln::cuda
