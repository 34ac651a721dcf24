// Checkpoints: a model's state dict, an optimizer's state, or both (to resume training), in
// one safetensors file that PyTorch reads with safetensors.torch.load_file.
//
//   kiln::save(*model, "model.safetensors", config);     // config: a json::Value
//   auto fresh = std::make_shared<Mlp>();
//   kiln::load(*fresh, "model.safetensors");             // strict: every key must match
//
//   kiln::save_training("ckpt.safetensors", *model, opt, config, {{"epoch", "3"}});
//   kiln::load_training("ckpt.safetensors", *model, opt);  // bit-exact resume
//
// The file's "__metadata__" holds "format": "pt" (what PyTorch tools look for) and "kiln":
// {"format_version": 1, "kiln_version": "0.1.0", "contents": "model", "config": {...}}
// (plus "optimizer": "Adam" for optimizer state). Files without the "kiln" entry (written by
// PyTorch) load too. Tied weights are stored under each of their paths (PyTorch's writer
// refuses shared tensors); loading copies into the one shared tensor, so they stay tied.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "kiln/nn/module.h"
#include "kiln/optim/optimizer.h"
#include "kiln/serialize/json.h"
#include "kiln/serialize/safetensors.h"

namespace kiln {

// The checkpoint format this kiln writes; it reads this and older ones.
inline constexpr int64_t kCheckpointFormatVersion = 1;

// What a checkpoint says about itself.
struct CheckpointInfo {
  int64_t format_version = 0;  // 0: no "kiln" entry (written by PyTorch or another tool)
  std::string kiln_version;    // the kiln that wrote it; "" when not kiln
  // "model" (save of a module), "tensors" (save of a NamedTensors), "optimizer",
  // "training" (model + optimizer); "" when not written by kiln.
  std::string contents;
  std::string optimizer;  // Optimizer::name() ("Adam") for optimizer and training files
  json::Value config;     // the config given to save(); null when none
  // The other "__metadata__" entries: the extra metadata given to save() and "format".
  std::map<std::string, std::string> metadata;
  // The SHA-256 of each tensor ("dtype[shape]\n" and its bytes) stored at save and verified
  // by load_checkpoint; empty for files written by other tools.
  std::map<std::string, std::string> tensor_sha256;
};

struct Checkpoint : CheckpointInfo {
  NamedTensors tensors;  // in the file's order
  // The tensor called `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
};

// Writes model.state_dict() with `config` (any JSON, e.g. the model's hyperparameters) and
// `extra_metadata` (string entries; "kiln" and "format" are reserved). Atomic: the file is
// either the old one or the complete new one. Everything is checked before the file system
// is touched: a model with uninitialized (symbolic) parameters throws and writes nothing.
void save(const nn::Module& model, const std::string& path, const json::Value& config = {},
          const std::map<std::string, std::string>& extra_metadata = {});
// The same for any named tensors (a state dict, or tensors of your own).
void save(const NamedTensors& state, const std::string& path, const json::Value& config = {},
          const std::map<std::string, std::string>& extra_metadata = {});

// Saving and loading through functions of your own (a socket, an archive, memory), as
// libtorch's writer and reader functions: `write(data, n)` is offered the bytes a file save
// would write, in order, and returns how many it took (1 to n; it is called again for the
// rest). `read(position, buffer, n)` copies up to n bytes from `position` of a checkpoint of
// `size` bytes into buffer and returns how many it copied (at least 1). Loading checks the
// bytes as a file load does; errors name the source "<reader>".
using CheckpointWriter = std::function<size_t(const void* data, size_t n)>;
using CheckpointReader = std::function<size_t(uint64_t position, void* buffer, size_t n)>;
void save(const nn::Module& model, const CheckpointWriter& write, const json::Value& config = {},
          const std::map<std::string, std::string>& extra_metadata = {});
nn::LoadStateDictResult load(nn::Module& model, const CheckpointReader& read, uint64_t size,
                             bool strict = true);

// Loads a model or tensors file into `model` with model.load_state_dict(tensors, strict):
// all checks first, then copies in place. Returns the missing and unexpected keys (empty
// when strict).
nn::LoadStateDictResult load(nn::Module& model, const std::string& path, bool strict = true);

// Reads any checkpoint (or plain safetensors file): its tensors and parsed metadata. A
// malformed "kiln" entry or a format newer than kCheckpointFormatVersion throws.
Checkpoint load_checkpoint(const std::string& path);

// An optimizer's state (Optimizer::state_dict()) alone. Loading needs an optimizer of the
// same type built over the same parameter groups.
void save(const optim::Optimizer& optimizer, const std::string& path);
void load(optim::Optimizer& optimizer, const std::string& path);

// Model and optimizer in one file, keys "model.<path>" and "optimizer.<key>". Resuming from
// it continues training bit-exactly. load_training is all-or-nothing: on any error neither
// the model nor the optimizer changes. Returns the file's info (config, extra metadata).
void save_training(const std::string& path, const nn::Module& model,
                   const optim::Optimizer& optimizer, const json::Value& config = {},
                   const std::map<std::string, std::string>& extra_metadata = {});
CheckpointInfo load_training(const std::string& path, nn::Module& model,
                             optim::Optimizer& optimizer);

}  // namespace kiln
