// `kiln launch --nproc N [options] -- COMMAND [ARGS...]`: starts N copies of a command as the
// ranks of a data-parallel job (kiln::distributed::launch), like torchrun.
#include "kiln/distributed/launch.h"

#include <algorithm>
#include <iostream>

#include "args.h"
#include "commands.h"

namespace kiln::cli {

namespace {

// "ADDR:PORT", "ADDR" (a free port, single-node jobs) or "[IPV6]:PORT".
void parse_master(const std::string& text, distributed::LaunchOptions& options) {
  const std::string fix =
      " Fix: write --master ADDR:PORT, e.g. --master 10.0.0.1:29500 "
      "([::1]:29500 for an IPv6 address).";
  std::string addr = text, port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    KILN_CHECK(close != std::string::npos && (close + 1 == text.size() || text[close + 1] == ':'),
               "--master expects ADDR:PORT, got '", text, "'.", fix);
    addr = text.substr(1, close - 1);
    if (close + 1 < text.size()) port = text.substr(close + 2);
  } else if (size_t colon = text.rfind(':'); colon != std::string::npos) {
    KILN_CHECK(text.find(':') == colon, "--master expects ADDR:PORT, got '", text,
               "' (an IPv6 address goes in brackets).", fix);
    addr = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  KILN_CHECK(!addr.empty(), "--master expects ADDR:PORT, got '", text, "' (no address).", fix);
  options.master_addr = addr;
  if (port.empty() && text.back() != ':') return;
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  KILN_CHECK(digits && std::stoi(port) >= 1 && std::stoi(port) <= 65535,
             "--master expects a port in [1, 65535] after the ':', got '", port, "'.", fix);
  options.master_port = std::stoi(port);
}

}  // namespace

int run_launch(const std::vector<std::string>& raw) {
  // Everything after `--` is the ranks' command, with options of its own the parser must not
  // see.
  const auto dash = std::find(raw.begin(), raw.end(), "--");
  Args args(command_spec("launch"), std::vector<std::string>(raw.begin(), dash));
  KILN_CHECK(dash != raw.end() && dash + 1 != raw.end(),
             dash == raw.end() ? "expected `--` and the command to run after the options, got "
                                 "no `--`."
                               : "expected the command to run after `--`, got nothing.",
             " Fix: kiln launch --nproc 2 -- kiln train --model fashion_mlp");
  distributed::LaunchOptions options;
  options.command.assign(dash + 1, raw.end());
  if (!args.has("nproc")) {
    std::string command;
    for (const std::string& word : options.command) command += " " + word;
    KILN_FAIL(
        "expected --nproc N, the number of ranks to start on this machine, got none. Fix: "
        "e.g. kiln launch --nproc 2 --",
        command);
  }
  options.nproc_per_node = static_cast<int>(args.integer("nproc", 1));
  options.nnodes = static_cast<int>(args.integer("nnodes", 1));
  options.node_rank = static_cast<int>(args.integer("node-rank", 0));
  if (args.has("master")) parse_master(args.str("master", ""), options);
  options.prefix_output = !args.has("no-prefix");
  options.grace = std::chrono::milliseconds(args.integer("grace-ms", 5000));

  std::cout.flush();  // the launcher writes to descriptor 1 directly
  distributed::LaunchResult result;
  try {
    result = distributed::launch(options);
  } catch (const Error& e) {
    // The library names itself ("[launch] ..."); "kiln launch: " already does here.
    std::string what = e.what();
    if (what.rfind("[launch] ", 0) == 0) what.erase(0, 9);
    throw Error(what);
  }
  if (result.exit_code != 0) std::cerr << "kiln launch: " << result.message << "\n";
  return result.exit_code;
}

}  // namespace kiln::cli
