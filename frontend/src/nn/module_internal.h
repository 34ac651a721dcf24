// Module internals shared by module.cpp and call_scope.cpp: the hook table, the tree index
// used by the registration check, and the registration epoch that invalidates it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn::detail {

struct HookTable {
  uint64_t next_id = 1;
  std::vector<std::pair<uint64_t, ForwardPreHook>> pre;
  std::vector<std::pair<uint64_t, ForwardHook>> post;
};

// The first path of every module reachable from a root, as of registration epoch `epoch`.
struct TreeIndex {
  uint64_t epoch = 0;
  std::unordered_map<const Module*, std::string> paths;
};

// Bumped by every change to any module's children, anywhere: a tree index built at an older
// epoch may be stale. Cheap to read; registration is rare compared to calls.
std::atomic<uint64_t>& registration_epoch();

}  // namespace kiln::nn::detail
