// PassManager: runs the parsed pipeline with optional verification after each pass, graph
// dumps and per-pass timing; and default_pipeline(), the one place the compile order lives.
#include "kiln/passes/pass_manager.h"

#include <chrono>
#include <cstdio>
#include <iostream>

#include "kiln/error.h"
#include "pipeline_parse.h"

namespace kiln::passes {

std::string default_pipeline() {
  return "canonicalize,decompose,dce,cse,fuse";
}

namespace {

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", ms);
  return buf;
}

}  // namespace

std::string PassReport::str() const {
  std::string out;
  for (const PassTiming& t : passes) {
    if (!out.empty()) out += ", ";
    out += t.name + " " + format_ms(t.ms) + " ms";
    if (t.nodes_before != t.nodes_after)
      out += " (" + std::to_string(t.nodes_before) + " -> " + std::to_string(t.nodes_after) +
             " nodes)";
  }
  return out;
}

PassManager::PassManager(std::string_view pipeline, PipelineOptions options)
    : options_(std::move(options)) {
  for (PipelineStage& s : parse_pipeline(pipeline)) {
    // Creating the pass checks its options now, not in the middle of a compile.
    s.info->create(s.options);
    stages_.push_back({s.info, std::move(s.options)});
  }
  const std::string& after = options_.print_after;
  KILN_CHECK(after.empty() || after == "all" || find_pass(after),
             "[passes] print_after expected \"all\", \"\" or a pass name, found '", after,
             "'. Fix: name a registered pass (see registered_passes()).");
}

std::string PassManager::pipeline() const {
  std::string out;
  for (const Stage& s : stages_) {
    if (!out.empty()) out += ',';
    out += s.info->name;
    if (s.options.values().empty()) continue;
    out += '{';
    bool first = true;
    for (const auto& [key, value] : s.options.values()) {
      out += (first ? "" : ",") + key + '=' + value;
      first = false;
    }
    out += '}';
  }
  return out;
}

PassReport PassManager::run(ir::Graph& g) const {
  using Clock = std::chrono::steady_clock;
  PassReport report;
  if (options_.verify_each && !stages_.empty()) {
    try {
      ir::verify(g);
    } catch (const Error& e) {
      KILN_FAIL("[passes] expected a valid graph before pass '", stages_.front().info->name,
                "', found: ", e.what());
    }
  }
  for (const Stage& s : stages_) {
    std::unique_ptr<Pass> pass = s.info->create(s.options);
    PassTiming t;
    t.name = s.info->name;
    t.nodes_before = g.nodes().size();
    auto start = Clock::now();
    t.changed = pass->run(g, options_.context);
    t.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    t.nodes_after = g.nodes().size();
    t.summary = pass->summary();
    report.total_ms += t.ms;
    report.passes.push_back(std::move(t));
    if (options_.verify_each) {
      try {
        ir::verify(g);
      } catch (const Error& e) {
        KILN_FAIL("[passes] pass '", s.info->name, "' left an invalid graph: ", e.what());
      }
    }
    if (options_.print_after == "all" || options_.print_after == s.info->name) {
      std::string text = ir::print_graph(g);
      if (options_.print_sink) {
        options_.print_sink(s.info->name, text);
      } else {
        std::cerr << "// after " << s.info->name << "\n" << text << std::flush;
      }
    }
  }
  return report;
}

}  // namespace kiln::passes
