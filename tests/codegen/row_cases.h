// Row groups (fusion groups of kind "row") both code generators' tests compile, as the
// decompose and fuse passes write them: softmax, layer_norm with its statistics, reductions
// over a 3-D iteration space, log_softmax over rows of one element.
#pragma once

#include <string>

namespace kiln::cpu::codegen::testing {

// softmax(x) over the last dim of dtype[rows, cols] (sizes may be symbolic: "s0").
inline std::string softmax_ir(const std::string& rows, const std::string& cols,
                              const std::string& dtype = "float32") {
  const std::string full = dtype + "[" + rows + ", " + cols + "]";
  const std::string per_row = dtype + "[" + rows + ", 1]";
  return "graph g {\n  input %0 \"x\": " + full + "\n  %1: " + full +
         " = fused(%0) {kind=\"row\"} {\n    region (%2: " + full + ") {\n      %3: " + per_row +
         " = amax(%2) {dims=[1], keepdim=true}\n      %4: " + full +
         " = sub(%2, %3) {}\n      %5: " + full + " = exp(%4) {}\n      %6: " + per_row +
         " = sum(%5) {dims=[1], keepdim=true}\n      %7: " + full +
         " = div(%5, %6) {}\n      yield %7\n    }\n  }\n  return %1\n}";
}

// layer_norm of float32[33, 96] with weight, bias, the element count and eps as inputs; its
// outputs: y, the mean and the reciprocal standard deviation (per row).
inline constexpr const char* kLayerNormRows = R"(graph g {
  input %0 "x": float32[33, 96]
  input %1 "w": float32[96]
  input %2 "b": float32[96]
  input %3 "n": float32[]
  input %4 "eps": float32[]
  %5, %6, %7: float32[33, 96], float32[33, 1], float32[33, 1] = fused(%0, %1, %2, %3, %4) {kind="row"} {
    region (%8: float32[33, 96], %9: float32[96], %10: float32[96], %11: float32[], %12: float32[]) {
      %13: float32[33, 1] = sum(%8) {dims=[1], keepdim=true}
      %14: float32[33, 1] = div(%13, %11) {}
      %15: float32[33, 96] = sub(%8, %14) {}
      %16: float32[33, 96] = mul(%15, %15) {}
      %17: float32[33, 1] = sum(%16) {dims=[1], keepdim=true}
      %18: float32[33, 1] = div(%17, %11) {}
      %19: float32[33, 1] = add(%18, %12) {}
      %20: float32[33, 1] = rsqrt(%19) {}
      %21: float32[33, 96] = mul(%15, %20) {}
      %22: float32[33, 96] = mul(%21, %9) {}
      %23: float32[33, 96] = add(%22, %10) {}
      yield %23, %14, %20
    }
  }
  return %5, %6, %7
})";

// sum(relu(x * w)) and amin(x) per row of a 3-D input whose weight broadcasts over the middle
// dim (so the rows are not one merged dim).
inline constexpr const char* kReductions3d = R"(graph g {
  input %0 "x": float32[3, 5, 1000]
  input %1 "w": float32[3, 1, 1000]
  %2, %3: float32[3, 5, 1], float32[3, 5, 1] = fused(%0, %1) {kind="row"} {
    region (%4: float32[3, 5, 1000], %5: float32[3, 1, 1000]) {
      %6: float32[3, 5, 1000] = mul(%4, %5) {}
      %7: float32[3, 5, 1000] = relu(%6) {}
      %8: float32[3, 5, 1] = sum(%7) {dims=[2], keepdim=true}
      %9: float32[3, 5, 1] = amin(%4) {dims=[2], keepdim=true}
      yield %8, %9
    }
  }
  return %2, %3
})";

// log_softmax over a last dim of size 1: every value is per row.
inline constexpr const char* kLogSoftmaxRowsOfOne = R"(graph g {
  input %0 "x": float32[7, 1]
  %1: float32[7, 1] = fused(%0) {kind="row"} {
    region (%2: float32[7, 1]) {
      %3: float32[7, 1] = amax(%2) {dims=[1], keepdim=true}
      %4: float32[7, 1] = sub(%2, %3) {}
      %5: float32[7, 1] = exp(%4) {}
      %6: float32[7, 1] = sum(%5) {dims=[1], keepdim=true}
      %7: float32[7, 1] = log(%6) {}
      %8: float32[7, 1] = sub(%4, %7) {}
      yield %8
    }
  }
  return %1
})";

}  // namespace kiln::cpu::codegen::testing
