// The subcommands' option parser, their `--help` text, and did-you-mean suggestions.
#include "args.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "commands.h"
#include "kiln/closest_match.h"

namespace kiln::cli {

namespace {

using Kind = OptionSpec::Kind;

bool is_numeric(Kind k) { return k == Kind::Integer || k == Kind::Number; }

// "--epochs N" / "--fullgraph" / "-o, --output DIR".
std::string option_label(const OptionSpec& o) {
  std::string out = o.short_name.empty() ? "" : "-" + o.short_name + ", ";
  out += "--" + o.name;
  if (o.kind != Kind::Flag) out += " " + o.placeholder;
  return out;
}

// Bounds as a user writes them: 1048576, not 1.04858e+06; 0.001 stays 0.001.
std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e18) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream os;
  os << v;
  return os.str();
}

// "an integer >= 1", "a number in (0, 10]": the range as the error and the help say it.
std::string range_text(const OptionSpec& o) {
  std::string what = o.kind == Kind::Integer ? "an integer" : "a number";
  const bool low = std::isfinite(o.min), high = std::isfinite(o.max);
  if (o.min_exclusive && high)
    return what + " in (" + number_text(o.min) + ", " + number_text(o.max) + "]";
  if (o.min_exclusive && !high) return what + " > " + number_text(o.min);
  if (low && high) return what + " in [" + number_text(o.min) + ", " + number_text(o.max) + "]";
  if (low) return what + " >= " + number_text(o.min);
  if (high) return what + " <= " + number_text(o.max);
  return what;
}

std::vector<std::string> option_names(const CommandSpec& spec) {
  std::vector<std::string> names;
  for (const OptionSpec& o : spec.options) names.push_back("--" + o.name);
  return names;
}

// `parse` (std::stoll, std::stod) must consume all of `text`: "3x" and "" are errors.
template <class Parse>
auto parse_whole(const OptionSpec& o, const std::string& text, Parse parse) {
  size_t used = 0;
  decltype(parse(text, &used)) value{};
  try {
    value = parse(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  KILN_CHECK(used == text.size() && used > 0, "--", o.name, " expects ", range_text(o), ", got '",
             text, "'.", o.kind == Kind::Integer && text.find_first_of(".eE") != std::string::npos
                             ? " Write it without a fraction or exponent."
                             : "");
  return value;
}

// Parses `text` for option `o` and checks its range; the value as a double.
double checked_value(const OptionSpec& o, const std::string& text) {
  double v = 0;
  if (o.kind == Kind::Integer) {
    v = static_cast<double>(parse_whole(
        o, text, [](const std::string& t, size_t* used) { return std::stoll(t, used); }));
  } else {
    v = parse_whole(o, text, [](const std::string& t, size_t* used) { return std::stod(t, used); });
    KILN_CHECK(std::isfinite(v), "--", o.name, " expects a finite number, got '", text, "'.");
  }
  const bool ok = (o.min_exclusive ? v > o.min : v >= o.min) && v <= o.max;
  if (!ok) {
    KILN_FAIL("--", o.name, " expects ", range_text(o), ", got ", text, ".",
              o.range_note.empty() ? "" : " " + o.range_note);
  }
  return v;
}

}  // namespace

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& prefix) {
  std::string match = closest_match(word, candidates);
  return match.empty() ? "" : " Did you mean '" + prefix + match + "'?";
}

std::string cli_message(const std::string& what) {
  const char* log = std::getenv("KILN_LOG");
  if (log && *log) return what;
  // kiln::Error ends with " [path/file.cpp:123]" (runtime/src/error.cpp).
  if (what.empty() || what.back() != ']') return what;
  size_t open = what.rfind(" [");
  if (open == std::string::npos) return what;
  std::string tail = what.substr(open + 2, what.size() - open - 3);
  size_t colon = tail.rfind(':');
  const bool located = colon != std::string::npos && colon + 1 < tail.size() &&
                       tail.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                       (tail.find(".cpp") != std::string::npos || tail.find(".h") != std::string::npos);
  return located ? what.substr(0, open) : what;
}

Args::Args(const CommandSpec& spec, const std::vector<std::string>& args) : spec_(spec) {
  const std::string usage_hint = " See `kiln " + spec.name + " --help`.";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string name, value;
    bool inline_value = false;
    if (a.rfind("--", 0) == 0) {
      name = a.substr(2);
      if (size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
    } else if (a.size() >= 2 && a[0] == '-' && a[1] != '-') {
      for (const OptionSpec& o : spec.options)
        if (!o.short_name.empty() && a.substr(1) == o.short_name) name = o.name;
    }
    const OptionSpec* o = nullptr;
    for (const OptionSpec& candidate : spec.options)
      if (candidate.name == name) o = &candidate;
    if (!o) {
      for (const RetiredOption& r : spec.retired)
        KILN_CHECK(r.name != name, "no option --", name, " here: use ", r.instead, ".");
      KILN_FAIL("unknown option '", a, "'.",
                did_you_mean(name.empty() ? a : "--" + name, option_names(spec)),
                " Options: ", [&] {
                  std::string out;
                  for (const OptionSpec& s : spec.options)
                    out += (out.empty() ? "" : ", ") + option_label(s);
                  return out;
                }(), ".", usage_hint);
    }
    if (o->kind == Kind::Flag) {
      KILN_CHECK(!inline_value, "--", name, " takes no value, got '", a, "'. Fix: write --", name,
                 " alone.");
    } else if (!inline_value) {
      KILN_CHECK(i + 1 < args.size(), "", a, " needs a value (", option_label(*o), ").");
      value = args[++i];
    }
    auto previous = values_.find(name);
    KILN_CHECK(previous == values_.end(), "--", name, " is given twice",
               o->kind == Kind::Flag ? "" : " ('" + previous->second + "' and '" + value + "')",
               ". Fix: give it once.");
    if (is_numeric(o->kind)) checked_value(*o, value);
    if (!o->choices.empty() &&
        std::find(o->choices.begin(), o->choices.end(), value) == o->choices.end()) {
      std::string list;
      for (const std::string& c : o->choices) list += (list.empty() ? "" : ", ") + c;
      KILN_FAIL("--", name, " expects one of ", list, ", got '", value, "'.",
                did_you_mean(value, o->choices));
    }
    values_[name] = o->kind == Kind::Flag ? "1" : value;
  }
  for (const CommandSpec::Exclusive& group : spec.exclusive) {
    std::vector<std::string> given;
    for (const std::string& n : group.names)
      if (has(n)) given.push_back("--" + n);
    if (given.size() < 2) continue;
    std::string list;
    for (size_t k = 0; k < given.size(); ++k)
      list += (k == 0 ? "" : k + 1 == given.size() ? " and " : ", ") + given[k];
    KILN_FAIL(list, " cannot be combined: ", group.why, ".");
  }
}

const OptionSpec& Args::option(const std::string& name) const {
  for (const OptionSpec& o : spec_.options)
    if (o.name == name) return o;
  KILN_FAIL("kiln ", spec_.name, " reads an undeclared option --", name,
            ". Fix: declare it in command_specs.cpp.");
}

std::string Args::str(const std::string& name, const std::string& fallback) const {
  option(name);
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Args::integer(const std::string& name, int64_t fallback) const {
  option(name);
  auto it = values_.find(name);
  return it == values_.end() ? fallback : static_cast<int64_t>(std::stoll(it->second));
}

double Args::number(const std::string& name, double fallback) const {
  option(name);
  auto it = values_.find(name);
  return it == values_.end() ? fallback : std::stod(it->second);
}

std::string command_help(const CommandSpec& spec) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const OptionSpec& o : spec.options) rows.emplace_back(option_label(o), o.help);
  rows.emplace_back("-h, --help", "print this help");
  size_t width = 0;
  for (const auto& [label, help] : rows) width = std::max(width, label.size());
  std::ostringstream os;
  os << "usage: kiln " << spec.name << (spec.positional.empty() ? "" : " " + spec.positional)
     << " [options]\n\n"
     << spec.details << "\n\noptions:\n";
  for (auto [label, help] : rows) {
    label.resize(width, ' ');
    os << "  " << label << "  " << help << "\n";
  }
  return os.str();
}

std::string usage() {
  std::ostringstream os;
  os << "usage: kiln <command> [options]    (kiln <command> --help for its options)\n\n"
        "commands:\n";
  for (const CommandSpec& spec : command_specs()) {
    std::string label = spec.name;
    label.resize(9, ' ');
    os << "  " << label << spec.summary << "\n";
  }
  os << "\nmodels: " << model_names() << "\n";
  return os.str();
}

const CommandSpec& command_spec(const std::string& name) {
  std::vector<std::string> names;
  for (const CommandSpec& spec : command_specs()) {
    if (spec.name == name) return spec;
    names.push_back(spec.name);
  }
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  KILN_FAIL("unknown command '", name, "'.", did_you_mean(name, names), " Commands: ", list,
            ". See `kiln --help`.");
}

}  // namespace kiln::cli
