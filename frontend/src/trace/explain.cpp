// Printing an ExplainReport: what compile() did with a module, in the order a user asks.
#include <sstream>

#include "kiln/compile.h"

namespace kiln {

size_t ExplainReport::graph_count() const {
  size_t n = 0;
  for (const ExplainEntry& e : entries) n += e.graph_break.empty();
  return n;
}

size_t ExplainReport::graph_break_count() const {
  return entries.size() - graph_count();
}

void ExplainReport::print(std::ostream& os) const {
  os << "compiled " << model << " (backend " << backend << "): " << graph_count() << " graph"
     << (graph_count() == 1 ? "" : "s") << ", " << graph_break_count() << " graph break"
     << (graph_break_count() == 1 ? "" : "s") << ", " << recompile_reasons.size() << " recompile"
     << (recompile_reasons.size() == 1 ? "" : "s") << ", " << calls << " call"
     << (calls == 1 ? "" : "s") << " (" << eager_calls << " eager)\n";
  for (size_t i = 0; i < entries.size(); ++i) {
    const ExplainEntry& e = entries[i];
    os << "\nentry " << i + 1 << ": ";
    if (e.graph_break.empty()) {
      os << e.ops << " ops, traced in " << e.trace_ms << " ms, " << e.calls << " calls\n";
    } else {
      os << "graph break: runs in " << e.segments << " segments per call, " << e.calls
         << " calls (segment cache: " << e.segment_misses << " compiled";
      if (e.native_segments) os << " (" << e.native_segments << " to native code)";
      os << ", " << e.segment_hits << " reused)\n  first break: " << e.graph_break << "\n";
      for (size_t b = 0; b < e.breaks.size();) {  // a loop's breaks repeat: count them
        size_t same = 1;
        while (b + same < e.breaks.size() && e.breaks[b + same] == e.breaks[b]) ++same;
        os << "  segment ends at " << e.breaks[b]
           << (same > 1 ? " (x" + std::to_string(same) + ")" : "") << "\n";
        b += same;
      }
    }
    if (!e.trace_ms_by_module.empty()) {
      os << "  trace time by module:";
      for (size_t m = 0; m < e.trace_ms_by_module.size() && m < 5; ++m) {
        const auto& [path, ms] = e.trace_ms_by_module[m];
        os << (m ? ", " : " ") << (path.empty() ? "<root>" : path) << " " << ms << " ms";
      }
      os << "\n";
    }
    os << "  guards:\n";
    for (const std::string& g : e.guards) os << "    " << g << "\n";
    if (!e.captured.empty()) {
      os << "  captured constants (not parameters or buffers: they do not follow to() and "
            "are not saved):\n";
      for (const std::string& c : e.captured) os << "    " << c << "\n";
    }
    if (!e.backend.empty()) os << "  backend: " << e.backend << "\n";
    if (!e.passes.empty()) os << "  passes: " << e.passes << "\n";
    if (!e.fusion_groups.empty()) {
      os << "  fusion groups (one generated kernel each):\n";
      for (const std::string& g : e.fusion_groups) os << "    " << g << "\n";
    }
    auto print_ir = [&](const char* title, const std::string& text) {
      if (text.empty()) return;
      os << "  " << title << ":\n";
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) os << "    " << line << "\n";
    };
    print_ir("graph", e.graph_text);
    print_ir("after passes", e.optimized_graph_text);
  }
  if (!recompile_reasons.empty()) {
    os << "\nrecompiles:\n";
    for (const std::string& r : recompile_reasons) os << "  " << r << "\n";
  }
}

std::string ExplainReport::str() const {
  std::ostringstream os;
  print(os);
  return os.str();
}

}  // namespace kiln
