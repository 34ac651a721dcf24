// Runs a pipeline of passes given as text, with verification, dumps and timing.
//
//   PassManager pm("canonicalize,dce,cse,fuse{max-ops=16}");
//   PassReport report = pm.run(graph);
//
// The default pipeline is one function (default_pipeline()), so the order of every stage
// is visible in one place.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/passes/pass.h"

namespace kiln::passes {

// "canonicalize,decompose,dce,cse,fuse": what compile() runs before a backend.
std::string default_pipeline();

struct PipelineOptions {
  // Run ir::verify after every pass; a failure names the pass that broke the graph. Tests
  // turn it on; compile() turns it on under KILN_VERIFY_PASSES=1.
  bool verify_each = false;
  // Print the graph after the named pass ("fuse"), after every pass ("all"), or never ("").
  std::string print_after;
  // Where printed graphs go: receives the pass name and the printed graph. Unset, they go
  // to stderr as "// after <pass>\n<ir>": passes/ sits below the frontend's logger, so a
  // caller that wants them in a log channel (compile() under KILN_LOG=passes) sets a sink.
  std::function<void(std::string_view pass, const std::string& ir_text)> print_sink;
  PassContext context;
};

struct PassTiming {
  std::string name;
  double ms = 0;
  bool changed = false;
  size_t nodes_before = 0, nodes_after = 0;  // top-level nodes
  std::string summary;
};

struct PassReport {
  std::vector<PassTiming> passes;
  double total_ms = 0;
  // "canonicalize 0.02 ms (12 -> 10 nodes), dce 0.01 ms, ..." for logs and explain.
  std::string str() const;
};

class PassManager {
 public:
  // Parses the pipeline: comma-separated pass ids, each optionally followed by
  // {key=value,...}. Throws kiln::Error naming an unknown pass (and listing the known ones)
  // or a malformed option, with the column.
  explicit PassManager(std::string_view pipeline, PipelineOptions options = {});
  PassReport run(ir::Graph& g) const;
  // The pipeline as normalized text (parses back to the same pipeline).
  std::string pipeline() const;

 private:
  struct Stage {
    const PassInfo* info;
    PassOptions options;
  };
  std::vector<Stage> stages_;
  PipelineOptions options_;
};

}  // namespace kiln::passes
