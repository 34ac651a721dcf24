// A pool of runners (a plan, or a node loop with native fusion groups) per graph.
#include "kiln/cpu/exec/graph_runner.h"

#include "kiln/error.h"
#include "kiln/interp/interp.h"

namespace kiln::cpu::exec {

struct GraphRunner::Runner {
  std::unique_ptr<Plan> plan;                     // planned graphs
  std::unique_ptr<interp::Executable> node_loop;  // graphs with control flow
};

GraphRunner::GraphRunner(std::shared_ptr<const ir::Graph> graph, Kernels kernels,
                         size_t caller_inputs)
    : graph_(std::move(graph)), kernels_(std::move(kernels)), caller_inputs_(caller_inputs) {
  auto first = std::make_unique<Runner>();
  first->plan = Plan::build(*graph_, kernels_);
  first_plan_ = first->plan.get();
  if (!first_plan_) first = make_runner();
  idle_.push_back(first.get());
  runners_.push_back(std::move(first));
}

GraphRunner::~GraphRunner() = default;

std::unique_ptr<GraphRunner::Runner> GraphRunner::make_runner() const {
  auto r = std::make_unique<Runner>();
  if (first_plan_) {  // a graph the plan can run: every runner is a plan
    r->plan = Plan::build(*graph_, kernels_);
    r->plan->set_replay_recorded_random(replay_recorded_random_);
    return r;
  }
  r->node_loop = std::make_unique<interp::Executable>(graph_);
  r->node_loop->set_replay_recorded_random(replay_recorded_random_);
  const Kernels* kernels = &kernels_;
  r->node_loop->set_fused_runner([kernels](const ir::Node& node, std::span<const Tensor> operands,
                                           std::span<const int64_t> symbols,
                                           std::span<Tensor> results) {
    run_fused_kernel(kernels->at(&node), node, operands, symbols, results, false);
  });
  return r;
}

GraphRunner::Runner* GraphRunner::borrow() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!idle_.empty()) {
    Runner* r = idle_.back();
    idle_.pop_back();
    return r;
  }
  runners_.push_back(make_runner());
  return runners_.back().get();
}

void GraphRunner::give_back(Runner* runner) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(runner);
}

std::vector<Tensor> GraphRunner::run(std::span<const Tensor> inputs) {
  size_t total = graph_->inputs().size();
  KILN_CHECK(inputs.size() == total || (caller_inputs_ && inputs.size() == caller_inputs_),
             "[cpu] graph ", graph_->name(), " expected ", caller_inputs_ ? caller_inputs_ : total,
             " inputs, got ", inputs.size(), ".");
  Runner* runner = borrow();
  struct GiveBack {
    GraphRunner* self;
    Runner* runner;
    ~GiveBack() { self->give_back(runner); }
  } give_back{this, runner};
  if (runner->plan) return runner->plan->run(inputs);
  // The node loop wants every input slot; the graph holds the data of those left undefined.
  std::vector<Tensor> all(inputs.begin(), inputs.end());
  all.resize(graph_->inputs().size());
  return runner->node_loop->run(all);
}

int64_t GraphRunner::weight_packs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t packs = 0;
  for (const auto& r : runners_)
    if (r->plan) packs += r->plan->weight_packs();
  return packs;
}

void GraphRunner::set_replay_recorded_random(bool replay) {
  std::lock_guard<std::mutex> lock(mutex_);
  replay_recorded_random_ = replay;
  for (const auto& r : runners_) {
    if (r->plan) r->plan->set_replay_recorded_random(replay);
    if (r->node_loop) r->node_loop->set_replay_recorded_random(replay);
  }
}

}  // namespace kiln::cpu::exec
