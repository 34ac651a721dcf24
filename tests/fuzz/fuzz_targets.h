// The fuzz targets: each feeds arbitrary bytes to one of kiln's readers. libFuzzer calls them
// (entry/fuzz_<target>.cpp) and so does the corpus replay test in the regular build.
//
// A kiln::Error from the reader is the expected refusal of a bad input and is caught.
// Anything else is a finding: a crash, a sanitizer report, an exception of another type
// escaping the target, or a broken invariant (FuzzFinding) such as a round trip that does
// not reproduce what it read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kiln/error.h"

namespace kiln::fuzz {

int fuzz_safetensors(const uint8_t* data, size_t size);  // load, write, load again
int fuzz_json(const uint8_t* data, size_t size);         // parse, dump, parse again
int fuzz_ir_parse(const uint8_t* data, size_t size);     // parse, verify, print, parse, print
int fuzz_manifest(const uint8_t* data, size_t size);     // artifact manifest.json
int fuzz_artifact(const uint8_t* data, size_t size);     // graph signature, records
int fuzz_idx(const uint8_t* data, size_t size);          // IDX file, plain or gzip

struct FuzzTarget {
  std::string_view name;  // the corpus folder and the binary (fuzz_<name>)
  int (*run)(const uint8_t*, size_t);
};
inline constexpr FuzzTarget kFuzzTargets[] = {
    {"safetensors", fuzz_safetensors}, {"json", fuzz_json}, {"ir_parse", fuzz_ir_parse},
    {"manifest", fuzz_manifest},       {"artifact", fuzz_artifact}, {"idx", fuzz_idx},
};

// A broken invariant: deliberately not a kiln::Error, so that no target catches it.
class FuzzFinding : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Throws FuzzFinding with the parts concatenated when `cond` is false.
#define KILN_FUZZ_EXPECT(cond, ...)                                                      \
  do {                                                                                   \
    if (!(cond))                                                                         \
      throw ::kiln::fuzz::FuzzFinding(::kiln::detail::str_cat(                           \
          "[fuzz] ", __FILE__, ":", __LINE__, ": expected ", #cond, ": ", __VA_ARGS__)); \
  } while (0)

// Runs f, turning a kiln::Error (which the step must not throw) into a FuzzFinding.
template <class Fn>
auto must_succeed(const char* step, Fn&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw FuzzFinding(std::string("[fuzz] ") + step + " refused what kiln itself accepted: " +
                      e.what());
  }
}

}  // namespace kiln::fuzz
