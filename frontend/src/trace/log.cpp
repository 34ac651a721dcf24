// The log channels: parsed once from KILN_LOG, overridable by set_log_channels.
#include "kiln/log.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "kiln/error.h"

namespace kiln {

namespace {

constexpr LogChannel kChannels[] = {LogChannel::Recompiles, LogChannel::GraphBreaks,
                                    LogChannel::Guards, LogChannel::Graphs, LogChannel::Passes};

unsigned parse_spec(std::string_view spec) {
  unsigned mask = 0;
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view name = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (name.empty()) continue;
    if (name == "all") {
      mask = ~0u;
      continue;
    }
    bool known = false;
    for (LogChannel c : kChannels) {
      if (name == log_channel_name(c)) {
        mask |= 1u << static_cast<unsigned>(c);
        known = true;
      }
    }
    KILN_CHECK(known, "[KILN_LOG] unknown channel '", name,
               "'. Fix: use a comma list of recompiles, graph_breaks, guards, graphs, passes (or all).");
  }
  return mask;
}

std::atomic<unsigned>& channel_mask() {
  static std::atomic<unsigned> mask{[] {
    const char* env = std::getenv("KILN_LOG");
    if (!env) return 0u;
    try {
      return parse_spec(env);
    } catch (const Error& e) {
      std::cerr << e.what() << "\n";
      return 0u;
    }
  }()};
  return mask;
}

struct SinkSlot {
  std::mutex mutex;
  LogSink sink;
};
SinkSlot& sink_slot() {
  static SinkSlot slot;
  return slot;
}

void emit(std::string_view channel, std::string_view line) {
  SinkSlot& slot = sink_slot();
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (slot.sink) {
    slot.sink(channel, line);
    return;
  }
  std::cerr << "[kiln " << channel << "] " << line << "\n";
}

}  // namespace

const char* log_channel_name(LogChannel channel) {
  switch (channel) {
    case LogChannel::Recompiles:
      return "recompiles";
    case LogChannel::GraphBreaks:
      return "graph_breaks";
    case LogChannel::Guards:
      return "guards";
    case LogChannel::Graphs:
      return "graphs";
    case LogChannel::Passes:
      return "passes";
  }
  return "?";
}

bool log_enabled(LogChannel channel) {
  return (channel_mask().load(std::memory_order_relaxed) >> static_cast<unsigned>(channel)) & 1u;
}

void log_line(LogChannel channel, std::string_view line) {
  if (!log_enabled(channel)) return;
  emit(log_channel_name(channel), line);
}

void log_warning(std::string_view line) {
  emit("warning", line);
}

void set_log_channels(std::string_view spec) {
  channel_mask().store(parse_spec(spec));
}

void set_log_sink(LogSink sink) {
  SinkSlot& slot = sink_slot();
  std::lock_guard<std::mutex> lock(slot.mutex);
  slot.sink = std::move(sink);
}

}  // namespace kiln
