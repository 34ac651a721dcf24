// kiln's diagnostic logs. KILN_LOG=recompiles,graph_breaks,guards,graphs,passes (a comma
// list, or "all") turns channels on; each event is one line on stderr, or goes to a sink a
// program installs (tests capture lines this way). `passes` prints each compiled graph's
// pass timings and kernel counts, and the graph after every pass.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kiln {

enum class LogChannel { Recompiles, GraphBreaks, Guards, Graphs, Passes };
const char* log_channel_name(LogChannel channel);  // "recompiles", ...

bool log_enabled(LogChannel channel);
// Writes one line ("[kiln recompiles] ...") when the channel is on.
void log_line(LogChannel channel, std::string_view line);
// Replaces KILN_LOG's setting; throws kiln::Error naming an unknown channel.
void set_log_channels(std::string_view spec);

// Receives every enabled line instead of stderr, with its channel's name ("recompiles",
// or "warning"); an empty function restores stderr.
using LogSink = std::function<void(std::string_view channel, std::string_view line)>;
void set_log_sink(LogSink sink);

// Warnings (e.g. the compile cache limit) always print, through the sink when one is set.
void log_warning(std::string_view line);

}  // namespace kiln
