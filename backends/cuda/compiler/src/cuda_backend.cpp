// "cuda" in the backend registry: which graphs it runs, what the fuse pass may group for it,
// and how its PTX reaches the GPU.
#include <mutex>

#include "kiln/backends/backend.h"
#include "kiln/cuda/compiler/cuda_backend.h"
#include "kiln/cuda/fused_kernels.h"

namespace kiln::cuda::compiler {

namespace {

class CudaFusionRules final : public passes::FusionRules {
 public:
  std::string_view target() const override { return "cuda"; }
  // A CPU operand can only be a host scalar: refusal() turns away graphs with other CPU
  // values, and the compiler moves the scalar constants groups read to the GPU.
  bool can_fuse(const OpDef&, DType dtype, Device device) const override {
    return (device.is_cuda() || device.is_cpu()) && codegen::supported_dtype(dtype);
  }
};

std::string describe(const ir::Value& v) { return "%" + std::to_string(v.id) + " is " + ir::type_str(v.type); }

// Looks at every value of `g`, regions included: the first one on another GPU than `gpu`
// (set by the first GPU value seen) or on the CPU without being a 0-d graph input.
std::optional<std::string> first_refused(const ir::Graph& g, std::optional<Device>& gpu,
                                         bool top) {
  auto check = [&](const ir::Value& v, bool host_scalar_allowed) -> std::optional<std::string> {
    const Device d = v.type.device;
    if (d.is_cuda()) {
      if (!gpu) gpu = d;
      if (*gpu != d) return describe(v) + ", and another value is on " + gpu->str() +
                            ": a compiled graph runs on one GPU";
      return std::nullopt;
    }
    if (host_scalar_allowed && v.type.shape.empty()) return std::nullopt;
    return describe(v) + ", and it runs only GPU tensors (and 0-d host scalars fed to them)";
  };
  for (const ir::GraphInput& in : g.inputs())
    if (auto why = check(*in.value, /*host_scalar_allowed=*/true)) return why;
  for (const auto& node : g.nodes()) {
    for (const ir::Value* v : node->outputs)
      if (auto why = check(*v, /*host_scalar_allowed=*/false)) return why;
    for (const auto& region : node->regions)
      if (auto why = first_refused(*region, gpu, false)) return why;
  }
  if (top && !gpu) return std::string("no value is on a GPU");
  return std::nullopt;
}

class CudaBackend final : public backends::Backend {
 public:
  CudaBackend(std::string name, KernelLoader load) : name_(std::move(name)), load_(std::move(load)) {}
  std::string_view name() const override { return name_; }
  std::string_view summary() const override {
    return "GPU code: fusion groups through MLIR, NVVM and PTX, the rest through the eager CUDA "
           "kernels and cuBLASLt";
  }
  bool records_gradients() const override { return false; }
  std::optional<std::string> refusal(const ir::Graph& graph) const override {
    return compiler::refusal(graph);
  }
  const passes::FusionRules* fusion_rules() const override { return &compiler::fusion_rules(); }
  std::unique_ptr<backends::Executable> compile(
      std::shared_ptr<const ir::Graph> graph,
      const backends::CompileRequest& request) const override {
    CompilerOptions options;
    if (!request.pipeline.empty()) options.pipeline = request.pipeline;
    options.verify_passes = request.verify_passes;
    options.print_after = request.print_after;
    options.print_sink = request.print_sink;
    options.frozen_state = request.frozen_state;
    options.load = load_;
    auto executable = std::make_unique<CompiledGraph>(*graph, options);
    if (request.replay_recorded_random) executable->set_replay_recorded_random(true);
    return executable;
  }

 private:
  std::string name_;
  KernelLoader load_;
};

}  // namespace

const passes::FusionRules& fusion_rules() {
  static const CudaFusionRules rules;
  return rules;
}

std::optional<std::string> refusal(const ir::Graph& graph) {
  std::optional<Device> gpu;
  return first_refused(graph, gpu, true);
}

KernelLoader driver_loader() {
  return [](const codegen::PtxModule& module, std::span<const cpu::exec::FusedKernelSpec>,
            Device device) -> exec::FusedLauncher {
    auto loaded = std::make_shared<FusedKernelModule>(module.ptx, module.kernels, device.index);
    return [loaded](const std::string& name, std::span<void* const> buffers,
                    std::span<const int64_t> dims) { loaded->launch(name, buffers, dims); };
  };
}

std::unique_ptr<backends::Backend> make_backend(std::string name, KernelLoader load) {
  return std::make_unique<CudaBackend>(std::move(name), std::move(load));
}

void register_backend() {
  static std::once_flag once;
  std::call_once(once, [] { backends::register_backend(make_backend("cuda", driver_loader())); });
}

}  // namespace kiln::cuda::compiler
