// formulas.cuh — backend::Unary's and backend::Binary's formulas as device functions, made from the
// formula table every backend shares (src/core/elementwise_formulas.def): the unary and binary
// kernels and the fused elementwise chain (fused.cu) evaluate the same expressions.
#pragma once
#include <type_traits>

#include "cuda/launch.cuh"
#include "core/backend.hpp"

namespace fluxion::cuda {

using backend::Binary;
using backend::Unary;

// The elementary functions of the formulas (core/elementwise_formulas.def): CUDA's overloads for
// float and double.
template <class T> __device__ T fx_exp(T x) { return exp(x); }
template <class T> __device__ T fx_expm1(T x) { return expm1(x); }
template <class T> __device__ T fx_log(T x) { return log(x); }
template <class T> __device__ T fx_log1p(T x) { return log1p(x); }
template <class T> __device__ T fx_sqrt(T x) { return sqrt(x); }
template <class T> __device__ T fx_abs(T x) { return fabs(x); }
template <class T> __device__ T fx_sin(T x) { return sin(x); }
template <class T> __device__ T fx_cos(T x) { return cos(x); }
template <class T> __device__ T fx_tanh(T x) { return tanh(x); }
template <class T> __device__ T fx_erf(T x) { return erf(x); }
template <class T> __device__ T fx_pow(T x, T a) { return pow(x, a); }

#define FX_K(v) T(v)
#define FX_FUNCTION template <class T> __device__ inline T
#include "core/elementwise_formulas.def"

template <class T> __device__ T unary_value(Unary op, T x, T a, T b) {
    switch (op) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    case Unary::name: {                       \
        return value;                         \
    }
#include "core/elementwise_formulas.def"
    }
    return x;
}

// gx = gy * d op(x) / dx, given x and y = op(x)
template <class T> __device__ T unary_gradient(Unary op, T x, T y, T gy, T a, T b) {
    switch (op) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    case Unary::name: {                       \
        return gradient;                      \
    }
#include "core/elementwise_formulas.def"
    }
    return T(0);
}

// The integer ops, through the unsigned twin W so that overflow wraps.
template <class T, class W = std::make_unsigned_t<T>> __device__ T unary_integer(Unary op, T x) {
    switch (op) {
#define FX_UNARY_INTEGER(name, code, value) \
    case Unary::name: {                     \
        return value;                       \
    }
#include "core/elementwise_formulas.def"
        default: return x;
    }
}

// Signed integers add, subtract and multiply through their unsigned twin, which wraps.
template <class T, bool = std::is_integral_v<T> && std::is_signed_v<T>> struct WrappingOf {
    using type = T;
};
template <class T> struct WrappingOf<T, true> {
    using type = std::make_unsigned_t<T>;
};
template <class T> using Wrapping = typename WrappingOf<T>::type;

// A negative exponent truncates 1 / a^|b| towards zero, as division does.
template <class T> __device__ T integer_power(T base, T exponent) {
    if constexpr (std::is_signed_v<T>) {
        if (exponent < 0) {
            if (base == 1) return 1;
            if (base == -1) return exponent & 1 ? T(-1) : T(1);
            return 0;
        }
    }
    Wrapping<T> result = 1, factor = Wrapping<T>(base);
    for (auto e = std::make_unsigned_t<T>(exponent); e; e >>= 1) {
        if (e & 1) result = Wrapping<T>(result * factor);
        factor = Wrapping<T>(factor * factor);
    }
    return T(result);
}

// The helpers of core/elementwise_formulas.def. bool never divides or takes powers (binary()
// refuses them), but the switch instantiates every op for it.
template <class T> __device__ bool fx_isnan(T x) { return is_nan(x); }

template <class T> __device__ T fx_quotient(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
        return a;
    } else if constexpr (std::is_floating_point_v<T>) {
        return a / b;
    } else {
        if (b == 0) return T(0);
        if constexpr (std::is_signed_v<T>)
            if (b == -1) return T(Wrapping<T>(0) - Wrapping<T>(a));  // INT_MIN / -1 wraps
        return T(a / b);
    }
}

template <class T> __device__ T fx_power(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) return a;
    else if constexpr (std::is_floating_point_v<T>) return pow(a, b);
    else return integer_power(a, b);
}

template <class T, class W = Wrapping<T>> __device__ T binary_arithmetic(Binary op, T a, T b) {
    switch (op) {
#define FX_BINARY(name, code, value) \
    case Binary::name: {             \
        return value;                \
    }
#include "core/elementwise_formulas.def"
        default: return T(0);
    }
}

template <class T> __device__ bool binary_compare(Binary op, T a, T b) {
    switch (op) {
#define FX_COMPARE(name, code, value) \
    case Binary::name: {              \
        return value;                 \
    }
#include "core/elementwise_formulas.def"
        default: return false;
    }
}

}  // namespace fluxion::cuda
