// libFuzzer's entry point for the artifact target (tests/fuzz/artifact_target.cpp).
#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kiln::fuzz::fuzz_artifact(data, size);
}
