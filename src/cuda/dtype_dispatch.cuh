// dtype_dispatch.cuh — maps a run-time DType to the C++ element type a kernel is instantiated for.
// Each dispatcher calls `f(T{})` with the matching type, or throws fluxion::DTypeError naming `op`.
// Few sets, so that few kernels are instantiated and the plugin compiles quickly.
//
// f16 (__half) and bf16 (__nv_bfloat16) are storage types only, as on the CPU (src/cpu/half.hpp):
// a kernel widens each operand to its compute type, float, computes as its f32 instantiation does,
// and rounds each result once with narrow(), to nearest even, NaN kept. Every other type is its own
// compute type, for which widen and narrow do nothing.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/dtype.hpp"

namespace fluxion::cuda {

template <class T> constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The type a kernel computes an element of type T in.
template <class T> using Compute = std::conditional_t<is_half_v<T>, float, T>;

__host__ __device__ inline float float_of_bits(std::uint32_t bits) {
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// Exact; an f16 NaN keeps its sign and payload, as src/cpu/half.hpp widens (the conversion
// instruction would return one canonical NaN).
template <class T> __host__ __device__ inline Compute<T> widen(T x) {
    if constexpr (std::is_same_v<T, __half>) {
        const std::uint32_t h = __half_as_ushort(x);
        if ((h & 0x7fffu) <= 0x7c00u) return __half2float(x);
        return float_of_bits(((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13));
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return float_of_bits(std::uint32_t(__bfloat16_as_ushort(x)) << 16);
    } else {
        return x;
    }
}

// Rounds to nearest even like the conversion instructions; a NaN keeps its sign and the top bits of
// its payload and is made quiet, as src/cpu/half.hpp rounds (the instructions would return one
// canonical NaN).
template <class T> __host__ __device__ inline T narrow(Compute<T> x) {
    if constexpr (!is_half_v<T>) {
        return x;
    } else if (x == x) {
        if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
        else return __float2bfloat16_rn(x);
    } else {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &x, sizeof bits);
        if constexpr (std::is_same_v<T, __half>)
            return __ushort_as_half(std::uint16_t(((bits >> 16) & 0x8000u) | 0x7e00u | ((bits >> 13) & 0x3ffu)));
        else return __ushort_as_bfloat16(std::uint16_t((bits >> 16) | 0x40u));
    }
}

// f32 and f64: kernels the core gives no other type (BatchNorm's, the LSTM cell's).
template <class F> void dispatch_f32_f64(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::f32: return f(float{});
        case DType::f64: return f(double{});
        default: throw_unsupported(op, t, "f32, f64");
    }
}

// f32, f64, f16, bf16: the types of the floating-point kernels.
template <class F> void dispatch_floating(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::f32: return f(float{});
        case DType::f64: return f(double{});
        case DType::f16: return f(__half{});
        case DType::bf16: return f(__nv_bfloat16{});
        default: throw_unsupported(op, t, "f32, f64, f16, bf16");
    }
}

// The floating-point types, i32, i64: unary ops that also take integers.
template <class F> void dispatch_signed(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::f32: return f(float{});
        case DType::f64: return f(double{});
        case DType::f16: return f(__half{});
        case DType::bf16: return f(__nv_bfloat16{});
        case DType::i32: return f(std::int32_t{});
        case DType::i64: return f(std::int64_t{});
        default: throw_unsupported(op, t, "f32, f64, f16, bf16, i32, i64");
    }
}

// The floating-point types, i32, i64, u8: types that add up (index_add).
template <class F> void dispatch_numeric(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::u8: return f(std::uint8_t{});
        case DType::boolean: throw_unsupported(op, t, "f32, f64, f16, bf16, i32, i64, u8");
        default: return dispatch_signed(t, op, static_cast<F&&>(f));
    }
}

// Every type: elementwise arithmetic, comparisons, reductions, casts.
template <class F> void dispatch_all(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::boolean: return f(bool{});
        default: return dispatch_numeric(t, op, static_cast<F&&>(f));
    }
}

// An unsigned integer of the element's size: for kernels that only move elements.
template <class F> void dispatch_bytes(DType t, F&& f) {
    switch (itemsize(t)) {
        case 1: return f(std::uint8_t{});
        case 2: return f(std::uint16_t{});
        case 4: return f(std::uint32_t{});
        default: return f(std::uint64_t{});
    }
}

}  // namespace fluxion::cuda
