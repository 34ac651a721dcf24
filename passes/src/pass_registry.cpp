// The registry of every pass kiln has: its id, a one-line description and its factory.
#include <deque>

#include "kiln/error.h"
#include "pass_factories.h"

namespace kiln::passes {

namespace {

struct Registry {
  // A deque, so that find_pass's pointers (which PassManager keeps) survive registrations.
  std::deque<PassInfo> stable;
  std::vector<PassInfo> listing;  // a copy of `stable`, for registered_passes()
};

Registry& registry() {
  // In default-pipeline order, so listings read in the order the compiler runs them.
  static Registry r = [] {
    Registry out;
    out.stable = {
        {"canonicalize",
         "folds constants and removes identities (x*1, x+0, no-op casts and views, view chains)",
         create_canonicalize_pass},
        {"decompose",
         "splits softmax, log_softmax and layer_norm over the last dim into row reductions and "
         "elementwise ops, and eval batch_norm into a scale and shift, for fusion",
         create_decompose_pass},
        {"dce", "removes nodes whose results are never used (keeps random and side-effect ops)",
         create_dce_pass},
        {"cse", "merges nodes that compute the same op on the same values", create_cse_pass},
        {"fuse",
         "groups elementwise ops, and reductions over the last dim with the ops around them, "
         "into fused kernels",
         create_fuse_pass},
        // Not in the default pipeline: binds symbolic sizes (specialize{s0=64}).
        {"specialize", "binds symbolic sizes to numbers (specialize{s0=64}): a static graph",
         create_specialize_pass},
    };
    out.listing.assign(out.stable.begin(), out.stable.end());
    return out;
  }();
  return r;
}

}  // namespace

const std::vector<PassInfo>& registered_passes() {
  return registry().listing;
}

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& info : registry().stable)
    if (info.name == name) return &info;
  return nullptr;
}

void register_pass(const PassInfo& info) {
  KILN_CHECK(info.create && !info.name.empty(),
             "[passes] register_pass expected a name and a factory, found name '", info.name, "'",
             info.create ? "" : " and no factory", ". Fix: fill in PassInfo.");
  KILN_CHECK(!find_pass(info.name), "[passes] register_pass expected a new pass name, found '",
             info.name, "', which is already registered. Fix: pick another name.");
  registry().stable.push_back(info);
  registry().listing.push_back(info);
}

}  // namespace kiln::passes
