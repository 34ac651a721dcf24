// The subcommands' option parser. Each command declares its options once (CommandSpec); the
// parser, `kiln CMD --help` and the top-level usage are all generated from that declaration,
// so a flag cannot be accepted without being documented, or documented without being checked.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kiln/error.h"

namespace kiln::cli {

struct OptionSpec {
  enum class Kind { Flag, Text, Integer, Number };
  std::string name;         // without dashes: "epochs"
  Kind kind = Kind::Text;
  std::string placeholder;  // "N", "FILE"; empty for a flag
  std::string help;         // one line for `--help`
  // Integers and numbers: the accepted closed range. Numbers must also be finite.
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;  // (min, max] instead of [min, max]
  std::string short_name;   // "o" for -o (optional)
  std::vector<std::string> choices;  // Text: the accepted values, when they are a fixed set
  // Said after a range error: what to do instead ("Omit it to use every image.").
  std::string range_note;
};

// A name no longer accepted by this command, and what to write instead.
struct RetiredOption {
  std::string name;
  std::string instead;
};

struct CommandSpec {
  std::string name;        // "train"
  std::string positional;  // "DIR" for `kiln run DIR`; empty when none
  std::string summary;     // one line for `kiln --help`
  std::string details;     // a paragraph for `kiln CMD --help`
  std::vector<OptionSpec> options;
  std::vector<RetiredOption> retired;
  // Groups of options of which at most one may be given, with the reason.
  struct Exclusive {
    std::vector<std::string> names;
    std::string why;
  };
  std::vector<Exclusive> exclusive;
};

// Every command, in the order `kiln --help` lists them (defined in command_specs.cpp).
const std::vector<CommandSpec>& command_specs();
// The spec of `name`; an unknown name is an error with a did-you-mean suggestion.
const CommandSpec& command_spec(const std::string& name);
// "usage: kiln train --model NAME [options]\n..." with every option and its help.
std::string command_help(const CommandSpec& spec);
// The top-level usage: every command with its one-line summary, and the models.
std::string usage();

class Args {
 public:
  // Parses `--name value`, `--name=value`, flags and short names against `spec`. Unknown,
  // repeated, retired and mutually exclusive options, missing values, malformed numbers and
  // numbers outside their range are errors that name the option and the fix.
  Args(const CommandSpec& spec, const std::vector<std::string>& args);

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string str(const std::string& name, const std::string& fallback) const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  double number(const std::string& name, double fallback) const;

 private:
  const OptionSpec& option(const std::string& name) const;
  const CommandSpec& spec_;
  std::map<std::string, std::string> values_;
};

// " Did you mean 'X'?" (kiln::closest_match) or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& prefix = "");

// The message of a kiln::Error as the CLI shows it: without the trailing kiln source
// location (" [frontend/src/...:42]"), unless KILN_LOG is set (then whole).
std::string cli_message(const std::string& what);

}  // namespace kiln::cli
