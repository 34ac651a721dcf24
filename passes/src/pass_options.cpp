// PassOptions: typed reads of a pass's "{key=value}" options, with errors that name the
// pass, the option and the text found.
#include <charconv>

#include "kiln/error.h"
#include "kiln/passes/pass.h"

namespace kiln::passes {

int64_t PassOptions::get_int(std::string_view pass, std::string_view key, int64_t fallback) const {
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  KILN_CHECK(!text.empty() && ec == std::errc() && ptr == end, "[passes] option '", key,
             "' of pass '", pass, "' expected an integer, found '", text, "'. Fix: write ", pass,
             "{", key, "=16}.");
  return value;
}

bool PassOptions::get_bool(std::string_view pass, std::string_view key, bool fallback) const {
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  KILN_FAIL("[passes] option '", key, "' of pass '", pass, "' expected true or false, found '",
            text, "'. Fix: write ", pass, "{", key, "=true}.");
}

void PassOptions::check_known(std::string_view pass,
                              const std::vector<std::string_view>& known) const {
  for (const auto& [key, value] : values_) {
    bool found = false;
    for (std::string_view k : known) found = found || k == key;
    if (found) continue;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    KILN_FAIL("[passes] pass '", pass, "' has no option '", key, "'; ",
              known.empty() ? "it takes no options" : "it knows: " + list,
              ". Fix: remove the option or correct its spelling.");
  }
}

}  // namespace kiln::passes
