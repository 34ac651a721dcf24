// The table-driven op test harness. Each test file registers OpCases for the ops it
// covers; op_table_test.cpp runs every case on every dtype, on contiguous and
// non-contiguous inputs, against a naive double-precision reference, and gradchecks the
// differentiable ones in float64 by central finite differences. A table op without a
// case fails the suite.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/dispatch.h"
#include "kiln/kiln.h"

namespace kiln::testing {

// A reference tensor: row-major doubles.
struct Ref {
  Shape shape;
  std::vector<double> v;
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
};
Ref to_ref(const Tensor& t);

// Elementwise maps with NumPy broadcasting.
Ref ref_map(const Ref& a, const std::function<double(double)>& f);
Ref ref_map2(const Ref& a, const Ref& b, const std::function<double(double, double)>& f);
Ref ref_map3(const Ref& a, const Ref& b, const Ref& c, const std::function<double(double, double, double)>& f);
// Reduces `dims` (all when empty): f receives the reduced values in row-major order.
Ref ref_reduce(const Ref& a, IntList dims, bool keepdim, const std::function<double(const std::vector<double>&)>& f);
// Element at a multi-index.
double ref_at(const Ref& a, IntList index);
Shape ref_strides(IntList shape);

// How a test input is filled.
enum class Gen {
  Uniform,   // [-2, 2]
  Positive,  // [0.5, 3]
  Unit,      // (-0.9, 0.9)
  Int,       // integers in [-5, 5]
  Index,     // integers in [0, high)
  Bool,      // true/false
  NonZero,   // [-2, -0.5] U [0.5, 2]
};

struct Input {
  Shape shape;
  Gen gen = Gen::Uniform;
  std::optional<DType> dtype;  // fixed dtype (indices, masks); else the case's dtype
  int64_t high = 0;            // for Gen::Index
  bool grad = true;            // gradchecked when floating
};

struct OpCase {
  std::string op;     // the table op this case covers
  std::string label;  // unique within the op
  std::vector<std::vector<Input>> runs;
  std::vector<DType> dtypes = {kFloat32, kFloat64};
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  std::function<Ref(const std::vector<Ref>&)> ref;  // null: fn is checked by gradcheck only
  bool gradcheck = true;
  bool noncontiguous = true;
  double f32_tol = 1e-5;  // relative and absolute
  double f64_tol = 1e-10;
  // For ops whose output dtype differs (comparisons): compare as this dtype.
  std::optional<DType> output_dtype;
};

std::vector<OpCase>& registry();

// Usage at namespace scope: static Register r({OpCase{...}, ...});
struct Register {
  explicit Register(std::vector<OpCase> cases);
};

// Standard input sets.
std::vector<std::vector<Input>> unary_runs(Gen gen = Gen::Uniform);
std::vector<std::vector<Input>> binary_runs(Gen a = Gen::Uniform, Gen b = Gen::Uniform);

// Builds one input (seeded).
Tensor make_input(const Input& in, DType dtype, bool noncontiguous, uint64_t seed);

}  // namespace kiln::testing
