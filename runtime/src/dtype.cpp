// dtype names, sizes and promotion.
#include "kiln/dtype.h"

namespace kiln {

namespace {
DType g_default_dtype = DType::Float32;

int category(DType t) {
  if (t == DType::Bool) return 0;
  if (is_integral(t)) return 1;
  return 2;
}
}  // namespace

size_t itemsize(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (dtype_name(static_cast<DType>(i)) == name) return static_cast<DType>(i);
  return std::nullopt;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  return a > b ? a : b;
}

DType default_dtype() { return g_default_dtype; }
void set_default_dtype(DType t) { g_default_dtype = t; }

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace kiln
