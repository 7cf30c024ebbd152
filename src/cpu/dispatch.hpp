// dispatch.hpp — turning a run-time DType into a C++ element type for the CPU kernels, and the
// DTypeError a kernel throws for a type it does not handle.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "cpu/half.hpp"
#include "fluxion/dtype.hpp"
#include "fluxion/error.hpp"

namespace fluxion::backend::cpu {

// Signed integers add, subtract and multiply through their unsigned twin, which wraps instead of
// overflowing into undefined behaviour: T(Wrapping<T>(a) + Wrapping<T>(b)).
template <class T, bool = std::is_integral_v<T> && std::is_signed_v<T>>
struct WrappingOf {
    using type = T;
};
template <class T>
struct WrappingOf<T, true> {
    using type = std::make_unsigned_t<T>;
};
template <class T>
using Wrapping = typename WrappingOf<T>::type;

// `supported` lists the accepted types, e.g. "f32, f64".
inline DTypeError unsupported(const char* kernel, DType t, const char* supported) {
    return DTypeError(std::string(kernel) + ": dtype " + name(t) + " is not supported by the CPU backend (supported: " +
                      supported + "); cast the tensor to one of those first");
}

// The types the table's entries accept. f16 and bf16 are computed in f32: the elementwise kernels
// and the reductions take them natively (dispatch_float_or_half, dispatch_any: half.hpp's load and
// store in their loops), the others receive f32 copies from widen.cpp. Either way they count among
// the supported types of every kernel that computes.
inline constexpr const char* kFloatTypes = "f32, f64, f16, bf16";
inline constexpr const char* kNumericTypes = "f32, f64, f16, bf16, i32, i64, u8";
inline constexpr const char* kPlainTypes = "f32, f64, f16, bf16, i32, i64, u8, bool";
inline constexpr const char* kAllTypes = "f32, f64, i32, i64, u8, bool, f16, bf16";

// Each `f` is called with a value of the element type as its only argument (a type tag):
//   dispatch_float(t, "exp", [&](auto tag) { using T = decltype(tag); ... });
template <class F>
decltype(auto) dispatch_float(DType t, const char* kernel, F&& f) {
    switch (t) {
        case DType::f32: return f(float{});
        case DType::f64: return f(double{});
        default: throw unsupported(kernel, t, kFloatTypes);
    }
}

// f32, f64 and the 16-bit floats, which the kernel computes in float (half.hpp's Compute).
template <class F>
decltype(auto) dispatch_float_or_half(DType t, const char* kernel, F&& f) {
    switch (t) {
        case DType::f16: return f(Half{});
        case DType::bf16: return f(BFloat16{});
        default: return dispatch_float(t, kernel, static_cast<F&&>(f));
    }
}

// f32, f64, i32, i64, u8
template <class F>
decltype(auto) dispatch_numeric(DType t, const char* kernel, F&& f) {
    switch (t) {
        case DType::f32: return f(float{});
        case DType::f64: return f(double{});
        case DType::i32: return f(std::int32_t{});
        case DType::i64: return f(std::int64_t{});
        case DType::u8: return f(std::uint8_t{});
        default: throw unsupported(kernel, t, kNumericTypes);
    }
}

// The numeric types and bool, which is stored as one byte holding 0 or 1.
template <class F>
decltype(auto) dispatch_plain(DType t, const char* kernel, F&& f) {
    switch (t) {
        case DType::f32: return f(float{});
        case DType::f64: return f(double{});
        case DType::i32: return f(std::int32_t{});
        case DType::i64: return f(std::int64_t{});
        case DType::u8: return f(std::uint8_t{});
        case DType::boolean: return f(bool{});
        default: throw unsupported(kernel, t, kPlainTypes);
    }
}

// Every storage type, the 16-bit floats included.
template <class F>
decltype(auto) dispatch_any(DType t, const char* kernel, F&& f) {
    switch (t) {
        case DType::f16: return f(Half{});
        case DType::bf16: return f(BFloat16{});
        default: return dispatch_plain(t, kernel, static_cast<F&&>(f));
    }
}

// Kernels that only move elements need their size, not their type.
template <class F>
decltype(auto) dispatch_bytes(DType t, F&& f) {
    switch (t) {
        case DType::f64:
        case DType::i64: return f(std::uint64_t{});
        case DType::f32:
        case DType::i32: return f(std::uint32_t{});
        case DType::f16:
        case DType::bf16: return f(std::uint16_t{});
        case DType::u8:
        case DType::boolean: return f(std::uint8_t{});
    }
    throw DTypeError("CPU backend: unknown dtype code " + std::to_string(int(t)));
}

}  // namespace fluxion::backend::cpu
