// A graph-to-graph transformation and the registry of every pass kiln has.
//
// One pass per file (passes/src/<id>.cpp), named by its id, tested by
// tests/passes/<id>_test.cpp with IR text in and checked IR text out. A pass id with
// dashes ("plan-memory") lives in plan_memory.cpp. Passes ask the op table (lowering class,
// scalar_body, side_effects, random), never keep their own op lists.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/passes/fusion_rules.h"

namespace kiln::passes {

// A pass's options from the pipeline text: "fuse{max-ops=16,max-inputs=8}" gives
// {"max-ops": "16", "max-inputs": "8"}.
class PassOptions {
 public:
  PassOptions() = default;
  explicit PassOptions(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  // The option's value, or `fallback` when absent; throws kiln::Error naming the pass and
  // option when the text is not an integer.
  int64_t get_int(std::string_view pass, std::string_view key, int64_t fallback) const;
  bool get_bool(std::string_view pass, std::string_view key, bool fallback) const;
  // Throws kiln::Error naming an option the pass does not know, listing the ones it does.
  void check_known(std::string_view pass, const std::vector<std::string_view>& known) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

// What a pass may read beyond the graph.
struct PassContext {
  // Parameter and buffer inputs may be treated as constants (CompileOptions.freeze, export):
  // canonicalize folds through those whose GraphInput::constant holds their data. The
  // executor then must pass the same values every call.
  bool parameters_frozen = false;
  // The backend's answer to "may this op join a generated kernel" (fuse asks it). Null: the
  // pipeline runs for no backend in particular, and fuse makes no groups.
  const FusionRules* fusion = nullptr;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // Rewrites `g` in place; returns whether anything changed. Must leave a graph that
  // ir::verify accepts and that computes the same outputs from the same inputs.
  virtual bool run(ir::Graph& g, const PassContext& context) = 0;
  // A one-line summary of the last run for explain ("removed 3 nodes"); may be empty.
  virtual std::string summary() const { return ""; }
};

struct PassInfo {
  std::string_view name;
  std::string_view description;  // one line, for `kiln explain --passes` and errors
  std::unique_ptr<Pass> (*create)(const PassOptions& options);
};

// Every registered pass, in the order of the default pipeline where it appears there.
const std::vector<PassInfo>& registered_passes();
const PassInfo* find_pass(std::string_view name);
// Adds a pass after the built-in ones (tests, experiments); `info.name` and
// `info.description` must outlive the program (string literals). Throws kiln::Error when the
// name is taken. Not thread-safe: register before any pipeline is parsed.
void register_pass(const PassInfo& info);

}  // namespace kiln::passes
