// libFuzzer's entry point for the ir_parse target (tests/fuzz/ir_parse_target.cpp).
#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kiln::fuzz::fuzz_ir_parse(data, size);
}
