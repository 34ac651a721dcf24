// dropout: zeroes elements with probability p and scales the rest by 1 / (1 - p). The keep
// mask is a second (bool) output that the vjp reuses, so backward drops the same elements.
#pragma once

#include <cstdint>

#include "kiln/op.h"
#include "kiln/ops/factory.h"

namespace kiln::ops {

struct DropoutAttrs : AttrsOf<DropoutAttrs> {
  double p = 0.5;
  // The Philox stream: element i reads word i % 4 of block philox(seed, offset + i / 4).
  // The frontend reserves the blocks from a Generator, so a call's mask depends only on
  // these attrs (never on the thread count), and replaying attrs replays the mask.
  uint64_t seed = 0;
  uint64_t offset = 0;
  GeneratorRef generator;  // where seed/offset came from (a compiled graph draws anew)
  template <class V>
  void fields(V& v) {
    v("p", p), v("seed", seed), v("offset", offset), v("generator", generator);
  }
};
// dropout(x) -> (out, mask): mask[i] = keep element i (u_i >= p for a uniform u_i in [0, 1)).
extern OpDef dropout;

// Philox blocks one dropout call of `numel` elements draws (four 32-bit words per block).
inline uint64_t dropout_blocks(int64_t numel) {
  return static_cast<uint64_t>((numel + 3) / 4);
}

}  // namespace kiln::ops
