// fluxion/dtype.hpp — element types of tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace fluxion {

// f16 (IEEE binary16) and bf16 (bfloat16): storage types. Every backend computes with them in f32
// inside each kernel and rounds each result once; a device without a kernel for one raises
// DTypeError (fx::supports says so).
enum class DType : std::uint8_t { f32, f64, i32, i64, u8, boolean, f16, bf16 };

// Defined here, inline, so that the core and the self-contained backend plugins share one copy.
constexpr std::size_t itemsize(DType t) {
    switch (t) {
        case DType::f64: case DType::i64: return 8;
        case DType::f32: case DType::i32: return 4;
        case DType::f16: case DType::bf16: return 2;
        case DType::u8: case DType::boolean: return 1;
    }
    return 0;
}

// "f32", "i64", "bool", ...
constexpr const char* name(DType t) {
    switch (t) {
        case DType::f32: return "f32";
        case DType::f64: return "f64";
        case DType::i32: return "i32";
        case DType::i64: return "i64";
        case DType::u8: return "u8";
        case DType::boolean: return "bool";
        case DType::f16: return "f16";
        case DType::bf16: return "bf16";
    }
    return "?";
}

constexpr bool is_floating(DType t) {
    return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
constexpr bool is_integral(DType t) { return !is_floating(t); }  // integers and bool

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
