// Module call frames: the thread's stack of modules being run (their paths feed every error
// message and, later, the tracer) and the call-time registration check.
#include <utility>

#include "kiln/nn/module.h"
#include "module_internal.h"

namespace kiln::nn {

namespace {

// One entry per frame: the root whose tree the frame's callees must belong to, and that
// tree's index (a snapshot; refreshed when a registration happened since).
struct RunInfo {
  const Module* root;
  std::shared_ptr<const detail::TreeIndex> index;
};

struct ThreadCalls {
  std::vector<CallFrame> frames;
  std::vector<RunInfo> runs;
};

ThreadCalls& thread_calls() {
  thread_local ThreadCalls calls;
  return calls;
}

std::string describe(const CallFrame& f) {
  return f.path.empty() ? "the root module (" + f.module->type_name() + ")"
                        : "module '" + f.path + "' (" + f.module->type_name() + ")";
}

[[noreturn]] void fail_unregistered(const CallFrame& caller, const RunInfo& run,
                                    const Module& callee) {
  std::string callee_type = callee.type_name();
  std::string caller_type = caller.module->type_name();
  KILN_FAIL("[Module] ", describe(caller), " called a ", callee_type,
            " that holds parameters or buffers but is not registered in the model being run (",
            run.root->type_name(),
            "): its parameters would not be trained, saved by "
            "state_dict() or moved by to(). Fix: create it once in ",
            caller_type,
            "'s constructor and register it with register_module(\"name\", layer), or keep it "
            "in a ModuleList/ModuleDict/Sequential member (not a std::vector); a layer created "
            "inside forward gets fresh weights on every call. A module deliberately not owned "
            "(e.g. a frozen teacher) can be allowed with kiln::nn::allow_unregistered_call(it).");
}

}  // namespace

void allow_unregistered_call(Module& module, bool allow) {
  module.set_unregistered_call_allowed(allow);
}

const std::vector<CallFrame>& call_stack() {
  return thread_calls().frames;
}

std::string call_context() {
  const auto& frames = thread_calls().frames;
  if (frames.empty()) return {};
  const CallFrame& f = frames.back();
  if (f.path.empty()) return " (in the root module, " + f.module->type_name() + ")";
  return " (in module " + f.path + ", " + f.module->type_name() + ")";
}

namespace detail {

CallScope::CallScope(Module& module) : module_(module) {
  ThreadCalls& tc = thread_calls();
  if (tc.frames.empty()) {  // called from user code: this module is the root of the run
    tc.runs.push_back({&module, module.tree_index()});
    tc.frames.push_back({&module, std::string()});
    return;
  }
  RunInfo run = tc.runs.back();
  const CallFrame& caller = tc.frames.back();
  auto it = run.index->paths.find(&module);
  if (it == run.index->paths.end() && run.index->epoch != registration_epoch().load()) {
    run.index = run.root->tree_index();  // registered during this run: look again
    tc.runs.back().index = run.index;
    it = run.index->paths.find(&module);
  }
  if (it != run.index->paths.end()) {
    tc.frames.push_back({&module, it->second});
    tc.runs.push_back(std::move(run));
  } else if (module.unregistered_call_allowed()) {
    // A deliberately unowned module runs as the root of its own tree.
    tc.runs.push_back({&module, module.tree_index()});
    tc.frames.push_back({&module, std::string()});
  } else if (!module.has_state()) {
    // Stateless (ReLU, a Sequential of activations): nothing to lose by not registering it.
    std::string path = caller.path.empty() ? "<unregistered>" : caller.path + ".<unregistered>";
    tc.frames.push_back({&module, std::move(path)});
    tc.runs.push_back(std::move(run));
  } else {
    fail_unregistered(caller, run, module);
  }
}

CallScope::~CallScope() {
  ThreadCalls& tc = thread_calls();
  tc.frames.pop_back();
  tc.runs.pop_back();
}

}  // namespace detail
}  // namespace kiln::nn
