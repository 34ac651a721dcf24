// The subcommands' option parser.
#include "args.h"

#include <algorithm>
#include <stdexcept>

namespace kiln::cli {

namespace {

std::string listing(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "--" : ", --") + n;
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// `parse` (std::stoll, std::stod) must consume all of `text`: "3x" and "" are errors.
template <class Parse>
auto parse_whole(const std::string& name, const std::string& text, const char* expected,
                 Parse parse) {
  size_t used = 0;
  decltype(parse(text, &used)) value{};
  try {
    value = parse(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  KILN_CHECK(used == text.size() && used > 0, "--", name, " expects ", expected, ", got '", text,
             "'.");
  return value;
}

}  // namespace

Args::Args(std::string command, const std::vector<std::string>& args,
           std::vector<std::string> known, std::vector<std::string> flags)
    : command_(std::move(command)) {
  std::vector<std::string> all = known;
  all.insert(all.end(), flags.begin(), flags.end());
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string name = a.rfind("--", 0) == 0 ? a.substr(2) : "";
    KILN_CHECK(!name.empty() && contains(all, name), "unknown option '", a,
               "'. Options: ", listing(all), ".");
    if (contains(flags, name)) {
      values_[name] = "1";
      continue;
    }
    KILN_CHECK(i + 1 < args.size(), "", a, " needs a value.");
    values_[name] = args[++i];
  }
}

std::string Args::str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Args::integer(const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  return parse_whole(name, it->second, "an integer",
                     [](const std::string& text, size_t* used) { return std::stoll(text, used); });
}

double Args::number(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  return parse_whole(name, it->second, "a number",
                     [](const std::string& text, size_t* used) { return std::stod(text, used); });
}

int64_t Args::positive(const std::string& name, int64_t fallback) const {
  int64_t v = integer(name, fallback);
  KILN_CHECK(v > 0, "--", name, " must be positive, got ", v, ".");
  return v;
}

}  // namespace kiln::cli
