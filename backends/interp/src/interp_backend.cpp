// "interp" in the backend registry: the reference executor behind the Backend interface.
// It runs any graph as traced (no passes), through the eager op table, so its runs record
// autograd: compile() falls back to it for calls that need gradients.
#include <mutex>

#include "kiln/backends/backend.h"
#include "kiln/interp/interp.h"

namespace kiln::interp {

namespace {

class InterpExecutable final : public backends::Executable {
 public:
  InterpExecutable(std::shared_ptr<const ir::Graph> graph, bool replay_recorded_random)
      : executable_(std::move(graph)) {
    executable_.set_replay_recorded_random(replay_recorded_random);
  }
  std::vector<Tensor> run(std::span<const Tensor> inputs) override {
    std::lock_guard<std::mutex> lock(mutex_);  // the node loop keeps per-run state
    return executable_.run(inputs);
  }
  bool runs_concurrently() const override { return false; }
  const ir::Graph& optimized_graph() const override { return executable_.graph(); }
  std::string summary() const override { return ""; }
  std::string pass_timings() const override { return ""; }

 private:
  std::mutex mutex_;
  interp::Executable executable_;
};

class InterpBackend final : public backends::Backend {
 public:
  std::string_view name() const override { return "interp"; }
  std::string_view summary() const override {
    return "the reference executor: each node through the eager op table";
  }
  bool records_gradients() const override { return true; }
  std::optional<std::string> refusal(const ir::Graph&) const override { return std::nullopt; }
  const passes::FusionRules* fusion_rules() const override { return nullptr; }
  std::unique_ptr<backends::Executable> compile(
      std::shared_ptr<const ir::Graph> graph,
      const backends::CompileRequest& request) const override {
    return std::make_unique<InterpExecutable>(std::move(graph), request.replay_recorded_random);
  }
};

}  // namespace

void register_backend() {
  static std::once_flag once;
  std::call_once(once, [] { backends::register_backend(std::make_unique<InterpBackend>()); });
}

}  // namespace kiln::interp
