// Helpers the subcommands share.
#include "args.h"
#include "commands.h"
#include "kiln/models/registry.h"

namespace kiln::cli {

std::string model_names() {
  std::string out;
  for (const auto& info : models::model_catalog()) out += (out.empty() ? "" : ", ") + info.name;
  return out;
}

json::Value parse_config_option(const Args& args) {
  if (!args.has("config")) return {};
  const std::string text = args.str("config", "");
  try {
    return json::parse(text);
  } catch (const json::ParseError& e) {
    KILN_FAIL("--config expects a JSON object such as '{\"d_hidden\": 512}', got '", text,
              "': ", e.what());
  }
}

}  // namespace kiln::cli
