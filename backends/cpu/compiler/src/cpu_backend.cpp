// "cpu" in the backend registry: compiles graphs into CompiledGraph executables, and gives
// the fuse pass the code generator's fusion rules.
#include "kiln/cpu/compiler/cpu_backend.h"

#include <mutex>

#include "kiln/backends/backend.h"
#include "kiln/cpu/codegen/kernels.h"

namespace kiln::cpu::compiler {

namespace {

class CpuFusionRules final : public passes::FusionRules {
 public:
  std::string_view target() const override { return "cpu"; }
  bool can_fuse(const OpDef&, DType dtype, Device device) const override {
    return device.is_cpu() && codegen::supported_dtype(dtype);
  }
};

// The first value of `g` (an input or a node's result, regions included) that is not on
// the CPU, or null.
const ir::Value* first_off_cpu(const ir::Graph& g) {
  for (const ir::GraphInput& in : g.inputs())
    if (!in.value->type.device.is_cpu()) return in.value;
  for (const auto& node : g.nodes()) {
    for (const ir::Value* v : node->outputs)
      if (!v->type.device.is_cpu()) return v;
    for (const auto& region : node->regions)
      if (const ir::Value* v = first_off_cpu(*region)) return v;
  }
  return nullptr;
}

class CpuBackend final : public backends::Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::string_view summary() const override {
    return "native code: fusion groups through MLIR and LLVM, the rest through the eager "
           "kernels";
  }
  bool records_gradients() const override { return false; }
  std::optional<std::string> refusal(const ir::Graph& graph) const override {
    if (const ir::Value* v = first_off_cpu(graph))
      return "%" + std::to_string(v->id) + " is " + ir::type_str(v->type) +
             ", and it runs only cpu tensors";
    return std::nullopt;
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
    auto executable = std::make_unique<CompiledGraph>(*graph, options);
    if (request.replay_recorded_random) executable->set_replay_recorded_random(true);
    return executable;
  }
};

}  // namespace

const passes::FusionRules& fusion_rules() {
  static const CpuFusionRules rules;
  return rules;
}

void register_backend() {
  static std::once_flag once;
  std::call_once(once, [] { backends::register_backend(std::make_unique<CpuBackend>()); });
}

}  // namespace kiln::cpu::compiler
