// Helpers the subcommands share: the model name and its config checked in the CLI's terms,
// a checkpoint's sample shape, and the memory check of an example input before it exists.
#include <unistd.h>

#include <algorithm>

#include "args.h"
#include "commands.h"
#include "kiln/cuda/device.h"
#include "kiln/models/registry.h"
#include "kiln/nn/summary.h"
#include "kiln/serialize/checkpoint.h"

namespace kiln::cli {

namespace {

// Config keys that must match the images and labels the CLI feeds, with their values.
struct FixedKey {
  const char* key;
  int64_t value;
  const char* why;
};
constexpr FixedKey kImageKeys[] = {
    {"d_in", 784, "features per image (28 x 28 pixels)"},
    {"image_size", 28, "pixels per image side"},
    {"in_channels", 1, "channels per image (grayscale)"},
};
constexpr FixedKey kLabelKeys[] = {
    {"d_out", 10, "classes"},
    {"num_classes", 10, "classes"},
};

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

}  // namespace

std::string model_names() {
  std::string out;
  for (const auto& info : models::model_catalog()) out += (out.empty() ? "" : ", ") + info.name;
  return out;
}

std::string model_option(const Args& args) {
  KILN_CHECK(args.has("model"), "--model NAME is required. Models: ", model_names(), ".");
  const std::string name = args.str("model", "");
  const std::string canonical = models::canonical_model_name(name);
  if (!canonical.empty()) return canonical;
  const std::string close = models::suggest_model_name(name);
  KILN_FAIL("unknown model '", name, "'.", close.empty() ? "" : " Did you mean '" + close + "'?",
            " Models: ", model_names(), ".");
}

Device device_option(const Args& args) {
  const std::string spec = args.str("device", "cpu");
  Device device = kCPU;
  try {
    device = Device(spec);
  } catch (const Error&) {
    KILN_FAIL("--device expects cpu, cuda or cuda:N, got '", spec, "'.");
  }
  if (device.is_cpu()) return device;
  KILN_CHECK(cuda::is_available(), "--device ", spec, ": no CUDA device: ", cuda::unavailable_reason(),
             " Or run on the cpu (--device cpu, the default).");
  KILN_CHECK(device.index < cuda::device_count(), "--device ", spec, ": this machine has ",
             cuda::device_count(), " GPU(s), cuda:0 to cuda:", cuda::device_count() - 1, ".");
  return device;
}

json::Value resolved_config(const std::string& name, const Args& args, bool for_training) {
  const json::Value overrides = parse_config_option(args);
  if (overrides.is_object()) {
    const json::Value defaults = models::resolve_config(name);
    std::vector<std::string> keys;
    for (const auto& [key, value] : defaults.as_object()) keys.push_back(key);
    for (const auto& [key, value] : overrides.as_object()) {
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      std::string known;
      for (const std::string& k : keys) known += (known.empty() ? "" : ", ") + k;
      KILN_FAIL("--config: the ", name, " config has no key '", key, "'.",
                did_you_mean(key, keys), " Known keys: ", known, ".");
    }
  }
  const json::Value config = models::resolve_config(name, overrides);
  auto check = [&](const FixedKey& k, bool at_least) {
    const json::Value* v = config.find(k.key);
    if (!v || !v->is_int()) return;
    const int64_t found = v->as_int();
    if (at_least ? found >= k.value : found == k.value) return;
    // The catalog's defaults always fit, so the value came from --config.
    KILN_FAIL("the ", name, " config sets ", k.key, " = ", found, ", but `kiln` feeds ",
              at_least ? "Fashion-MNIST labels 0..9, so it needs at least "
                       : "Fashion-MNIST images [N, 1, 28, 28], so it needs ",
              k.value, " ", k.why, ". Fix: drop \"", k.key, "\" from --config (or set it to ",
              k.value, "); other data needs a program of your own (docs/modules.md).");
  };
  for (const FixedKey& k : kImageKeys) check(k, false);
  if (for_training)
    for (const FixedKey& k : kLabelKeys) check(k, true);
  return config;
}

// One sample's shape as the checkpoint records it (the config entry's "input_shape"); the
// Fashion-MNIST image shape for checkpoints written before it was recorded.
std::vector<int64_t> checkpoint_sample_shape(const std::string& path) {
  const json::Value& entry = load_checkpoint(path).config;
  const json::Value* shape = entry.is_object() ? entry.find("input_shape") : nullptr;
  if (!shape) return {1, 28, 28};
  std::vector<int64_t> out;
  bool ok = shape->is_array();
  if (ok) {
    for (const json::Value& d : shape->as_array()) {
      ok = ok && d.is_int() && d.as_int() > 0;
      if (ok) out.push_back(d.as_int());
    }
  }
  KILN_CHECK(ok,
             "expected the checkpoint's input_shape to be a list of positive sizes "
             "(one sample, e.g. [1, 28, 28]), found ",
             json::dump(*shape), " in '", path,
             "'. Fix: re-save the checkpoint with kiln::models::save_model or `kiln train "
             "--save`.");
  return out;
}

void check_example_fits(nn::Module& model, const std::vector<int64_t>& shape) {
  const IntList dims(shape.data(), shape.size());
  const int64_t budget = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) / 2 *
                         static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  auto refuse_above_budget = [&](int64_t bytes, const std::string& what) {
    KILN_CHECK(bytes <= budget, "the example input ", shape_str(dims), " needs at least ", bytes,
               " bytes for ", what, ", more than half of this machine's memory (", budget,
               " bytes). Fix: a smaller --batch, or a checkpoint whose input_shape is the "
               "sample size the model serves.");
  };
  refuse_above_budget(size_mul(numel(dims), 4, "the example input's bytes"), "the input itself");
  // Shape-only: every module's output shape, with nothing computed or allocated. A forward
  // that reads tensor values (a data-dependent loop) cannot run shape-only: then only the
  // input is checked here, and the real forward reports any other problem.
  nn::Summary table;
  try {
    table = nn::summary(model, {Shape(dims)});
  } catch (const GraphBreakError&) {
  } catch (const Error& e) {
    if (std::string(e.what()).find("shape-only pass") == std::string::npos) throw;
  }
  for (const nn::SummaryRow& row : table.rows) {
    for (const Shape& s : row.output_shapes) {
      refuse_above_budget(size_mul(numel(s), 4, "an activation's bytes"),
                          "the output " + shape_str(s) + " of " +
                              (row.path.empty() ? "the model" : row.path) + " (" + row.type + ")");
    }
  }
}

}  // namespace kiln::cli
