// Factories: ops with no tensor inputs that create tensors (LoweringClass::Layout, or
// Random for the ones that draw from a generator).
#pragma once

#include <functional>
#include <ostream>

#include "kiln/generator.h"
#include "kiln/op.h"

namespace kiln::ops {

struct FullAttrs : AttrsOf<FullAttrs> {
  Shape shape;
  double value = 0;
  DType dtype = DType::Float32;
  Device device;
  template <class V> void fields(V& v) { v("shape", shape), v("value", value), v("dtype", dtype), v("device", device); }
};
extern OpDef full;

struct ArangeAttrs : AttrsOf<ArangeAttrs> {
  double start = 0, end = 0, step = 1;
  DType dtype = DType::Int64;
  Device device;
  template <class V> void fields(V& v) { v("start", start), v("end", end), v("step", step), v("dtype", dtype), v("device", device); }
};
extern OpDef arange;

struct LinspaceAttrs : AttrsOf<LinspaceAttrs> {
  double start = 0, end = 0;
  int64_t steps = 0;
  DType dtype = DType::Float32;
  Device device;
  template <class V>
  void fields(V& v) {
    v("start", start), v("end", end), v("steps", steps), v("dtype", dtype), v("device", device);
  }
};
// linspace: `steps` evenly spaced values from start to end inclusive (PyTorch's rounding:
// the first half counts up from start, the second half down from end).
extern OpDef linspace;

struct EyeAttrs : AttrsOf<EyeAttrs> {
  int64_t n = 0, m = 0;
  DType dtype = DType::Float32;
  Device device;
  template <class V>
  void fields(V& v) {
    v("n", n), v("m", m), v("dtype", dtype), v("device", device);
  }
};
// eye: an [n, m] matrix with ones on the diagonal.
extern OpDef eye;

// ---- random ops (LoweringClass::Random) ----
//
// Each kernel reserves ceil(numel / per_block) Philox blocks from the generator and fills
// element i from block (offset + i / per_block), so the numbers do not depend on the
// thread count. The streams (kept stable; tests pin their first values):
//   rand     float32: 4 per block, word i%4 -> 24-bit float in [0, 1)
//            float64: 2 per block, words (2j, 2j+1) -> 53-bit double in [0, 1)
//   randn    2 per block (any dtype): u1 = 1 - double(w0, w1), u2 = double(w2, w3),
//            r = sqrt(-2 ln u1); element 2j: r cos(2 pi u2), element 2j+1: r sin(2 pi u2)
//   randint  2 per block: low + ((w[2j] << 32 | w[2j+1]) mod (high - low))
//   bernoulli float32 p: 4 per block as rand; float64 p: 2 per block as rand; 1 when u < p

// Which generator a random op draws from (null: kiln::default_generator()). It is looked
// up when the kernel runs, so a compiled graph draws fresh numbers on every call.
struct GeneratorRef {
  Generator* generator = nullptr;
  Generator& get() const { return generator ? *generator : default_generator(); }
  friend bool operator==(const GeneratorRef&, const GeneratorRef&) = default;
};
std::ostream& operator<<(std::ostream& os,
                         const GeneratorRef& g);  // "default" or "generator@0x..."
// Reads the printed form back; an address names a generator of this process only.
void parse_attr(std::string_view field, std::string_view text, GeneratorRef& g);

}  // namespace kiln::ops

// Attribute hashing (attrs.h) hashes each field with std::hash.
template <>
struct std::hash<kiln::ops::GeneratorRef> {
  size_t operator()(const kiln::ops::GeneratorRef& g) const {
    return std::hash<const void*>()(g.generator);
  }
};

namespace kiln::ops {

struct RandomAttrs : AttrsOf<RandomAttrs> {
  Shape shape;
  DType dtype = DType::Float32;
  Device device;
  GeneratorRef generator;
  template <class V>
  void fields(V& v) {
    v("shape", shape), v("dtype", dtype), v("device", device), v("generator", generator);
  }
};
// rand: uniform on [0, 1); randn: standard normal (Box-Muller). Floating dtypes only.
extern OpDef rand, randn;

struct RandintAttrs : AttrsOf<RandintAttrs> {
  int64_t low = 0, high = 1;
  Shape shape;
  DType dtype = DType::Int64;
  Device device;
  GeneratorRef generator;
  template <class V>
  void fields(V& v) {
    v("low", low), v("high", high), v("shape", shape), v("dtype", dtype), v("device", device),
        v("generator", generator);
  }
};
// randint: uniform integers in [low, high).
extern OpDef randint;

struct BernoulliAttrs : AttrsOf<BernoulliAttrs> {
  GeneratorRef generator;
  template <class V>
  void fields(V& v) {
    v("generator", generator);
  }
};
// bernoulli(p): 1 with probability p[i], else 0, in p's (floating) dtype. Every p must lie
// in [0, 1].
extern OpDef bernoulli;

}  // namespace kiln::ops
