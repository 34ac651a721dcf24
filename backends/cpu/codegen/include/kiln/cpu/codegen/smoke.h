// The MLIR/LLVM toolchain smoke test: build, lower, JIT and run axpy, with timings.
// A plain C++ interface: no MLIR or LLVM type crosses it, so only jit_smoke.cpp pays the
// MLIR/LLVM header cost.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace kiln::cpu::codegen {

// The lowering pipeline the smoke test runs by default (MLIR pass-pipeline syntax, anchored
// on builtin.module): scf/arith/memref/func to the LLVM dialect.
std::string default_smoke_pipeline();

struct SmokeOptions {
  // A full anchored pipeline, e.g. "builtin.module(canonicalize, ...)"; empty = the default.
  std::string pipeline;
  // Keep the MLIR text before and after lowering in SmokeResult (for dumps and tests).
  bool keep_ir = false;
};

// Wall-clock milliseconds of each stage.
struct SmokeTimings {
  double context_ms = 0;  // MLIRContext + dialect loading
  double build_ms = 0;    // building and verifying the module with the builder API
  double lower_ms = 0;    // parsing and running the pass pipeline
  double jit_ms = 0;      // translation to LLVM IR, LLVM -O3 and machine-code generation
  double run_ms = 0;      // one call of the JIT-compiled function
};

struct SmokeResult {
  std::vector<float> y;  // a * x + y, computed by the JIT-compiled code
  SmokeTimings timings;
  std::string input_ir;    // MLIR before lowering (only with keep_ir)
  std::string lowered_ir;  // LLVM-dialect MLIR after lowering (only with keep_ir)
};

// Builds `func.func @axpy(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>)` (y[i] = a*x[i] +
// y[i] with scf.for/memref/arith), lowers it with `options.pipeline`, JIT-compiles it for the
// host CPU and runs it on copies of `x` and `y`. Throws kiln::Error with the MLIR/LLVM
// diagnostics on any failure (bad pipeline, failed lowering, JIT errors) or when the sizes
// of `x` and `y` differ.
SmokeResult run_jit_smoke(float a, std::span<const float> x, std::span<const float> y,
                          const SmokeOptions& options = {});

}  // namespace kiln::cpu::codegen
