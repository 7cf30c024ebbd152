// fluxion/dtype.hpp — element types of tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace fluxion {

// f16 and bf16 are reserved: tensors of these types can be stored and cast, kernels follow.
enum class DType : std::uint8_t { f32, f64, i32, i64, u8, boolean, f16, bf16 };

std::size_t itemsize(DType t);
const char* name(DType t);                 // "f32", "i64", "bool", ...
bool is_floating(DType t);
bool is_integral(DType t);                 // integers and bool

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

// The type an op on `a` and `b` computes in (NumPy-style promotion).
DType promote(DType a, DType b);

}  // namespace fluxion
