// The fusion group both codegen test files time and cache: relu(x * a + b) * c - d over a
// dynamic length, with scalar a, b, c, d (five ops, one kernel named "fused_0").
#pragma once

namespace kiln::cpu::codegen::testing {

inline constexpr const char* kFiveOpKernel = R"(graph g {
  input %0 "x": float32[s0]
  input %1 "a": float32[]
  input %2 "b": float32[]
  input %3 "c": float32[]
  input %4 "d": float32[]
  %5: float32[s0] = fused(%0, %1, %2, %3, %4) {kind="elementwise"} {
    region (%6: float32[s0], %7: float32[], %8: float32[], %9: float32[], %10: float32[]) {
      %11: float32[s0] = mul(%6, %7) {}
      %12: float32[s0] = add(%11, %8) {}
      %13: float32[s0] = relu(%12) {}
      %14: float32[s0] = mul(%13, %9) {}
      %15: float32[s0] = sub(%14, %10) {}
      yield %15
    }
  }
  return %5
})";

}  // namespace kiln::cpu::codegen::testing
