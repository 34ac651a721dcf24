// Checkpoints over safetensors: the "kiln" metadata entry (format version, kiln version,
// contents, config), model / optimizer / training files, and the checks that name the right
// loader when a file holds something else.
#include "kiln/serialize/checkpoint.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "kiln/sha256.h"
#include "kiln/version.h"

namespace kiln {

namespace {

constexpr const char* kKilnKey = "kiln";
constexpr const char* kFormatKey = "format";
constexpr std::string_view kModelPrefix = "model.";
constexpr std::string_view kOptimizerPrefix = "optimizer.";

// Values of "contents".
constexpr const char* kModel = "model";
constexpr const char* kTensors = "tensors";
constexpr const char* kOptimizer = "optimizer";
constexpr const char* kTraining = "training";

// The digest a checkpoint stores per tensor: SHA-256 of "dtype[shape]\n" and the tensor's
// bytes in row-major order, so a flipped bit, a relabelled dtype or a reshaped header all
// fail to match.
std::string tensor_digest(const Tensor& t) {
  const Tensor dense = t.contiguous();
  Sha256 h;
  const std::string type = dense.type_str() + "\n";
  h.update(type.data(), type.size());
  h.update(dense.raw_data(), dense.nbytes());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : h.digest()) hex += {kHex[b >> 4], kHex[b & 15]};
  return hex;
}

// The digests of `tensors` by name, or null when one of them cannot be saved (undefined,
// symbolic, not on the CPU): save_safetensors then refuses it with its own message.
json::Value tensor_digests(const NamedTensors& tensors) {
  json::Value out = json::Object{};
  for (const auto& [name, t] : tensors) {
    if (!t.defined() || t.is_symbolic() || !t.device().is_cpu()) return {};
    out[name] = tensor_digest(t);
  }
  return out;
}

std::map<std::string, std::string> make_metadata(const char* op, const char* contents,
                                                 const std::string& optimizer,
                                                 const json::Value& config,
                                                 const std::map<std::string, std::string>& extra,
                                                 const NamedTensors& tensors) {
  for (const auto& [key, value] : extra)
    KILN_CHECK(key != kKilnKey && key != kFormatKey, "[", op, "] the metadata key \"", key,
               "\" is reserved by the checkpoint format. Fix: use another key (e.g. \"my_", key,
               "\"), or put the value into the config.");
  json::Value info = json::Object{};
  info["format_version"] = kCheckpointFormatVersion;
  info["kiln_version"] = kVersion;
  info["contents"] = contents;
  if (!optimizer.empty()) info["optimizer"] = optimizer;
  info["config"] = config;
  info["sha256"] = tensor_digests(tensors);
  std::map<std::string, std::string> meta = extra;
  try {
    meta[kKilnKey] = json::dump(info);
  } catch (const Error& e) {
    KILN_FAIL("[", op, "] the config cannot be stored as JSON: ", e.what(),
              " Fix: keep the config to finite numbers, UTF-8 strings, arrays and objects.");
  }
  meta[kFormatKey] = "pt";  // what PyTorch tools (transformers, safetensors.torch) look for
  return meta;
}

void write(const char* op, const std::string& path, const NamedTensors& tensors,
           const char* contents, const std::string& optimizer, const json::Value& config,
           const std::map<std::string, std::string>& extra) {
  // save_safetensors checks every tensor (undefined, symbolic) before creating any file.
  save_safetensors(path, tensors, make_metadata(op, contents, optimizer, config, extra, tensors));
}

NamedTensors optimizer_entries(const optim::Optimizer& optimizer, std::string_view prefix) {
  NamedTensors out;
  for (auto& [key, t] : optimizer.state_dict()) out.emplace_back(std::string(prefix) + key, t);
  return out;
}

// "a JSON string", "nothing" (absent) ... for messages about a metadata field.
std::string describe(const json::Value* v) {
  if (!v) return "nothing (the field is absent)";
  std::string text = json::dump(*v);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(json::kind_name(v->kind())) + " " + text;
}

void parse_info(const std::string& path, const std::string& text, CheckpointInfo& info) {
  const std::string where = "[load_checkpoint] '" + path + "': ";
  const char* fix =
      " Fix: the file is damaged or was written by another tool; re-save it with kiln::save, "
      "or remove the \"kiln\" metadata entry to read it as plain safetensors.";
  json::Value v;
  try {
    v = json::parse(text);
  } catch (const json::ParseError& e) {
    KILN_FAIL(where, "the \"kiln\" metadata entry is not valid JSON (", e.what(), ").", fix);
  }
  KILN_CHECK(v.is_object(), where,
             "expected the \"kiln\" metadata entry to be a JSON object, got JSON ",
             json::kind_name(v.kind()), ".", fix);
  const json::Value* format = v.find("format_version");
  KILN_CHECK(format && format->is_int() && format->as_int() >= 1, where,
             "expected \"format_version\" in the \"kiln\" metadata entry to be an integer >= 1, "
             "got ",
             describe(format), ".", fix);
  const json::Value* version = v.find("kiln_version");
  if (format->as_int() > kCheckpointFormatVersion) {
    std::string writer = version && version->is_string() ? version->as_string() : "a newer kiln";
    KILN_FAIL(where, "the checkpoint has format version ", format->as_int(), " (written by kiln ",
              writer, "), but this kiln (", kVersion, ") reads format versions up to ",
              kCheckpointFormatVersion, ". Fix: read it with kiln ", writer,
              " or later, or re-save it from there in a format this version reads.");
  }
  KILN_CHECK(version && version->is_string(), where,
             "expected \"kiln_version\" in the \"kiln\" metadata entry to be a string, got ",
             describe(version), ".", fix);
  info.format_version = format->as_int();
  info.kiln_version = version->as_string();

  if (const json::Value* contents = v.find("contents")) {
    bool known = contents->is_string();
    if (known) {
      const std::string& c = contents->as_string();
      known = c == kModel || c == kTensors || c == kOptimizer || c == kTraining;
    }
    KILN_CHECK(known, where,
               "expected \"contents\" in the \"kiln\" metadata entry to be \"model\", "
               "\"tensors\", \"optimizer\" or \"training\", got ",
               describe(contents), ".", fix);
    info.contents = contents->as_string();
  }
  if (const json::Value* optimizer = v.find("optimizer")) {
    KILN_CHECK(optimizer->is_string(), where,
               "expected \"optimizer\" in the \"kiln\" metadata entry to be a string, got ",
               describe(optimizer), ".", fix);
    info.optimizer = optimizer->as_string();
  }
  if (const json::Value* config = v.find("config")) info.config = *config;
  if (const json::Value* digests = v.find("sha256"); digests && !digests->is_null()) {
    KILN_CHECK(digests->is_object(), where,
               "expected \"sha256\" in the \"kiln\" metadata entry to be an object of tensor "
               "digests, got ",
               describe(digests), ".", fix);
    for (const auto& [name, digest] : digests->as_object()) {
      KILN_CHECK(digest.is_string() && digest.as_string().size() == 64, where,
                 "expected a 64-digit hex digest for the tensor \"", name, "\", got ",
                 describe(&digest), ".", fix);
      info.tensor_sha256[name] = digest.as_string();
    }
  }
}

// A checkpoint that stores its tensors' digests (every kiln checkpoint since they were
// added) must match them: same names, same bytes, dtypes and shapes.
void verify_digests(const std::string& path, const Checkpoint& ck) {
  if (ck.tensor_sha256.empty()) return;  // written by PyTorch, another tool or an older kiln
  const std::string where = "[load_checkpoint] '" + path + "': ";
  const char* fix =
      " Fix: the file was damaged or edited after it was saved; restore it from a copy, or save "
      "it again.";
  for (const auto& [name, t] : ck.tensors) {
    auto it = ck.tensor_sha256.find(name);
    KILN_CHECK(it != ck.tensor_sha256.end(), where, "the tensor '", name,
               "' has no digest among those saved with the file.", fix);
    KILN_CHECK(tensor_digest(t) == it->second, where, "the tensor '", name, "' (", t.type_str(),
               ") does not match the digest saved with it.", fix);
  }
  for (const auto& [name, digest] : ck.tensor_sha256)
    KILN_CHECK(ck.find(name) != nullptr, where, "the tensor '", name,
               "' was saved (it has a digest) but is missing from the file.", fix);
}

// Rethrows an error of a load step with the file it came from.
[[noreturn]] void rethrow_for(const std::string& path, const Error& e) {
  throw Error("[kiln::load] loading '" + path + "': " + e.what());
}

// The entries whose key starts with `prefix`, with the prefix removed.
NamedTensors with_prefix(const NamedTensors& tensors, std::string_view prefix) {
  NamedTensors out;
  for (const auto& [key, t] : tensors)
    if (key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0)
      out.emplace_back(key.substr(prefix.size()), t);
  return out;
}

optim::OptimizerStateDict to_optimizer_state(const NamedTensors& tensors) {
  optim::OptimizerStateDict out;
  for (const auto& [key, t] : tensors) out[key] = t;
  return out;
}

void check_optimizer_type(const Checkpoint& ck, const std::string& path,
                          const optim::Optimizer& optimizer) {
  KILN_CHECK(ck.optimizer.empty() || ck.optimizer == optimizer.name(), "[kiln::load] '", path,
             "' holds the state of the optimizer ", ck.optimizer,
             ", but it is being loaded into the optimizer ", optimizer.name(), ". Fix: build the ",
             ck.optimizer, " over the same parameter groups to resume, or start the ",
             optimizer.name(), " fresh (load only the model).");
}

}  // namespace

const Tensor* Checkpoint::find(const std::string& name) const {
  for (const auto& [key, t] : tensors)
    if (key == name) return &t;
  return nullptr;
}

void save(const nn::Module& model, const std::string& path, const json::Value& config,
          const std::map<std::string, std::string>& extra_metadata) {
  write("kiln::save", path, model.state_dict(), kModel, "", config, extra_metadata);
}

void save(const NamedTensors& state, const std::string& path, const json::Value& config,
          const std::map<std::string, std::string>& extra_metadata) {
  write("kiln::save", path, state, kTensors, "", config, extra_metadata);
}

void save(const optim::Optimizer& optimizer, const std::string& path) {
  write("kiln::save", path, optimizer_entries(optimizer, ""), kOptimizer, optimizer.name(), {}, {});
}

void save_training(const std::string& path, const nn::Module& model,
                   const optim::Optimizer& optimizer, const json::Value& config,
                   const std::map<std::string, std::string>& extra_metadata) {
  NamedTensors tensors;
  for (auto& [key, t] : model.state_dict())
    tensors.emplace_back(std::string(kModelPrefix) + key, t);
  for (auto& entry : optimizer_entries(optimizer, kOptimizerPrefix))
    tensors.push_back(std::move(entry));
  write("kiln::save_training", path, tensors, kTraining, optimizer.name(), config, extra_metadata);
}

namespace {

// A checkpoint from its parsed safetensors; `path` names where it came from in errors.
Checkpoint checkpoint_of(SafetensorsFile file, const std::string& path) {
  Checkpoint ck;
  if (auto it = file.metadata.find(kKilnKey); it != file.metadata.end())
    parse_info(path, it->second, ck);
  for (auto& [key, value] : file.metadata)
    if (key != kKilnKey) ck.metadata.emplace(key, value);
  ck.tensors = std::move(file.tensors);
  verify_digests(path, ck);
  return ck;
}

nn::LoadStateDictResult load_model(nn::Module& model, Checkpoint ck, const std::string& path, bool strict);

}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  return checkpoint_of(load_safetensors(path), path);
}

void save(const nn::Module& model, const CheckpointWriter& write, const json::Value& config,
          const std::map<std::string, std::string>& extra_metadata) {
  KILN_CHECK(write != nullptr, "[kiln::save] got an empty writer function. Fix: pass a function that "
             "takes the bytes.");
  const NamedTensors state = model.state_dict();
  const std::vector<uint8_t> bytes =
      safetensors_bytes(state, make_metadata("kiln::save", kModel, "", config, extra_metadata, state));
  for (size_t done = 0; done < bytes.size();) {
    const size_t left = bytes.size() - done;
    const size_t n = write(bytes.data() + done, left);
    KILN_CHECK(n > 0 && n <= left, "[kiln::save] the writer took ", n, " of the ", left, " bytes left (of ",
               bytes.size(), "). Fix: return how many bytes it wrote, from 1 to the count offered, until every "
               "byte is written.");
    done += n;
  }
}

nn::LoadStateDictResult load(nn::Module& model, const CheckpointReader& read, uint64_t size, bool strict) {
  KILN_CHECK(read != nullptr, "[kiln::load] got an empty reader function. Fix: pass a function that fills "
             "the buffer it is given.");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  for (uint64_t at = 0; at < size;) {
    const size_t left = static_cast<size_t>(size - at);
    const size_t n = read(at, bytes.data() + at, left);
    KILN_CHECK(n > 0 && n <= left, "[kiln::load] the reader gave ", n, " bytes at position ", at, " of ", size,
               ". Fix: return how many bytes it read, from 1 to the count asked for, while the position is "
               "below the size passed to load.");
    at += n;
  }
  const std::string origin = "<reader>";
  return load_model(model, checkpoint_of(load_safetensors_bytes(bytes.data(), bytes.size(), origin), origin),
                    origin, strict);
}

nn::LoadStateDictResult load(nn::Module& model, const std::string& path, bool strict) {
  return load_model(model, load_checkpoint(path), path, strict);
}

namespace {

nn::LoadStateDictResult load_model(nn::Module& model, Checkpoint ck, const std::string& path, bool strict) {
  KILN_CHECK(ck.contents != kOptimizer, "[kiln::load] '", path,
             "' holds the state of the optimizer ", ck.optimizer,
             ", not a model. Fix: load it into the optimizer with "
             "kiln::load(optimizer, path), and the model from its own file.");
  // A training checkpoint holds the model under "model.": loading it alone (for evaluation
  // or fine-tuning with a new optimizer) is fine.
  NamedTensors state =
      ck.contents == kTraining ? with_prefix(ck.tensors, kModelPrefix) : std::move(ck.tensors);
  try {
    return model.load_state_dict(state, strict);
  } catch (const Error& e) {
    rethrow_for(path, e);
  }
}

}  // namespace

void load(optim::Optimizer& optimizer, const std::string& path) {
  Checkpoint ck = load_checkpoint(path);
  KILN_CHECK(ck.contents != kModel && ck.contents != kTensors, "[kiln::load] '", path,
             "' holds model tensors (contents \"", ck.contents,
             "\"), not optimizer state. Fix: load it into the model with kiln::load(model, "
             "path); optimizer state comes from kiln::save(optimizer, path) or "
             "kiln::save_training.");
  check_optimizer_type(ck, path, optimizer);
  NamedTensors state =
      ck.contents == kTraining ? with_prefix(ck.tensors, kOptimizerPrefix) : std::move(ck.tensors);
  try {
    optimizer.load_state_dict(to_optimizer_state(state));
  } catch (const Error& e) {
    rethrow_for(path, e);
  }
}

CheckpointInfo load_training(const std::string& path, nn::Module& model,
                             optim::Optimizer& optimizer) {
  Checkpoint ck = load_checkpoint(path);
  KILN_CHECK(ck.contents.empty() || ck.contents == kTraining, "[kiln::load_training] '", path,
             "' is not a training checkpoint: it holds ",
             ck.contents == kOptimizer ? "only optimizer state" : "only model tensors",
             " (contents \"", ck.contents, "\"). Fix: load it with kiln::load(",
             ck.contents == kOptimizer ? "optimizer" : "model",
             ", path); kiln::save_training writes model and optimizer together.");
  std::vector<std::string> stray;
  for (const auto& [key, t] : ck.tensors)
    if (key.compare(0, kModelPrefix.size(), kModelPrefix) != 0 &&
        key.compare(0, kOptimizerPrefix.size(), kOptimizerPrefix) != 0)
      stray.push_back(key);
  KILN_CHECK(stray.empty(), "[kiln::load_training] '", path, "' has ", stray.size(),
             " tensor(s) outside \"model.\" and \"optimizer.\" (the first is \"",
             stray.empty() ? "" : stray.front(),
             "\"). Fix: a training checkpoint comes from kiln::save_training; load a model file "
             "with kiln::load(model, path).");
  check_optimizer_type(ck, path, optimizer);

  // All-or-nothing: the optimizer's own load is, the model's is, and a failure of the model
  // after the optimizer loaded puts the optimizer's previous state back.
  optim::OptimizerStateDict previous = optimizer.state_dict();
  try {
    optimizer.load_state_dict(to_optimizer_state(with_prefix(ck.tensors, kOptimizerPrefix)));
  } catch (const Error& e) {
    rethrow_for(path, e);
  }
  try {
    model.load_state_dict(with_prefix(ck.tensors, kModelPrefix), /*strict=*/true);
  } catch (const Error& e) {
    optimizer.load_state_dict(previous);
    rethrow_for(path, e);
  }
  return std::move(static_cast<CheckpointInfo&>(ck));
}

}  // namespace kiln
