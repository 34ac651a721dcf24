// Scalar bodies (kiln/scalar_body.h) as CUDA C: each value becomes a local variable of a
// device function, computed as the op's definition says. The eager CUDA kernels compile this
// text with NVRTC at run time; the MLIR builder (backends/codegen_common) is the compiled
// path's equivalent, and both follow the same rules: integers wrap, float max/min propagate
// NaN, comparisons are false on NaN except ne, casts truncate toward zero.
//
// float16 and bfloat16 are storage dtypes: their values are computed as float (the kernel
// converts on load and store), so only cast meets them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/scalar_body.h"

namespace kiln::cuda {

class CudaCBuilder final : public ScalarBuilder {
 public:
  // The C type a value of `dtype` is computed in: float, double, int, long long, bool (float
  // for float16 and bfloat16).
  static const char* compute_type(DType dtype);

  // A value the caller defines (a function parameter named `name`).
  ScalarValue parameter(const std::string& name, DType dtype);
  // The statements so far, one per line, each defining a value.
  const std::string& statements() const { return statements_; }
  // The C expression naming `v` (a variable or a parameter).
  const std::string& name(ScalarValue v) const { return entry(v).first; }

  DType dtype(ScalarValue v) const override { return entry(v).second; }
  ScalarValue constant(double value, DType dtype) override;
  ScalarValue unary(ScalarOp op, ScalarValue a) override;
  ScalarValue binary(ScalarOp op, ScalarValue a, ScalarValue b) override;
  ScalarValue select(ScalarValue cond, ScalarValue a, ScalarValue b) override;
  ScalarValue cast(ScalarValue a, DType to) override;

 private:
  ScalarValue define(DType dtype, const std::string& expression);
  const std::pair<std::string, DType>& entry(ScalarValue v) const;
  [[noreturn]] void unsupported(ScalarOp op, DType dtype) const;

  std::vector<std::pair<std::string, DType>> values_;  // the C name of each value, its dtype
  std::string statements_;
};

}  // namespace kiln::cuda
