// Element types and PyTorch's type-promotion rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

#include "kiln/half.h"

namespace kiln {

// Order matters: promotion within a category picks the later entry.
enum class DType : uint8_t { Bool, Int32, Int64, Float16, BFloat16, Float32, Float64 };
inline constexpr int kNumDTypes = 7;

inline constexpr DType kBool = DType::Bool;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;

size_t itemsize(DType t);
std::string_view dtype_name(DType t);  // "float32"
// The inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> dtype_from_name(std::string_view name);
inline bool is_floating(DType t) { return t >= DType::Float16; }
inline bool is_integral(DType t, bool include_bool = false) {
  return t == DType::Int32 || t == DType::Int64 || (include_bool && t == DType::Bool);
}
// Types kernels compute in; float16/bfloat16 are storage-only (cast to float32 first).
inline bool is_compute_type(DType t) { return t != DType::Float16 && t != DType::BFloat16; }

// The smallest type both a and b convert to without losing their category
// (bool < integer < floating). float16 with bfloat16 gives float32, as in PyTorch.
DType promote_types(DType a, DType b);

// The dtype factories and float scalars use when none is given (float32).
DType default_dtype();
void set_default_dtype(DType t);

std::ostream& operator<<(std::ostream& os, DType t);

template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<Half>() { return DType::Float16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

// Calls fn(T{}) with the C++ type of `t`. Used by kernels and element accessors.
template <class Fn>
decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::Bool: return fn(bool{});
    case DType::Int32: return fn(int32_t{});
    case DType::Int64: return fn(int64_t{});
    case DType::Float16: return fn(Half{});
    case DType::BFloat16: return fn(BFloat16{});
    case DType::Float32: return fn(float{});
    case DType::Float64: break;
  }
  return fn(double{});
}

}  // namespace kiln
