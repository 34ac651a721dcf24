// Fuzz target: the JSON parser. A document it accepts must dump to compact JSON that parses
// back to an equal value and dumps to the same text.
#include "fuzz/fuzz_targets.h"
#include "kiln/serialize/json.h"

namespace kiln::fuzz {

int fuzz_json(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  json::Value value;
  try {
    // A small value limit as well, so its refusal path is exercised too.
    value = json::parse(text, {.max_depth = 64, .max_values = 4096});
  } catch (const Error&) {
    return 0;
  }
  std::string once = must_succeed("json::dump", [&] { return json::dump(value); });
  json::Value again = must_succeed("json::parse of dump()", [&] { return json::parse(once); });
  KILN_FUZZ_EXPECT(again == value, "parse(dump(v)) differs from v: ", once);
  KILN_FUZZ_EXPECT(json::dump(again) == once, "dump is not stable: ", once);
  return 0;
}

}  // namespace kiln::fuzz
