// libFuzzer's entry point for the safetensors target (tests/fuzz/safetensors_target.cpp).
#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kiln::fuzz::fuzz_safetensors(data, size);
}
