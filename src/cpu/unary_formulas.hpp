// unary_formulas.hpp — the op registry's unary formulas (core/elementwise_formulas.def) as inline
// functions of the CPU backend: unary_value<op>(x, a, b), unary_gradient<op>(x, y, gy, a, b) and
// integer_value<op>(x), for the unary kernels (unary.cpp) and for kernels that apply an op inside a
// larger pass (the LSTM cell's sigmoid and tanh, recurrent.cpp).
#pragma once
#include <cmath>
#include <type_traits>

#include "core/backend.hpp"
#include "cpu/vector_math.hpp"

namespace fluxion::backend::cpu {

// The elementary functions of the formulas: std's, except exp and tanh of float (vector_math.hpp),
// whose loops then vectorise; glibc's expf and tanhf are scalar calls. They, and the formulas'
// helpers, must be inlined for that: GCC otherwise keeps some as calls, the loop scalar.
template <class T> [[gnu::always_inline]] inline T fx_exp(T x) {
    if constexpr (std::is_same_v<T, float>) return vector_math::exp(x);
    else return std::exp(x);
}
template <class T> T fx_expm1(T x) { return std::expm1(x); }
template <class T> T fx_log(T x) { return std::log(x); }
template <class T> T fx_log1p(T x) { return std::log1p(x); }
template <class T> T fx_sqrt(T x) { return std::sqrt(x); }
template <class T> T fx_abs(T x) { return std::abs(x); }
template <class T> T fx_sin(T x) { return std::sin(x); }
template <class T> T fx_cos(T x) { return std::cos(x); }
template <class T> [[gnu::always_inline]] inline T fx_tanh(T x) {
    if constexpr (std::is_same_v<T, float>) return vector_math::tanh(x);
    else return std::tanh(x);
}
template <class T> T fx_erf(T x) { return std::erf(x); }
template <class T> T fx_pow(T x, T a) { return std::pow(x, a); }

// FX_K stays defined: the table's constants expand it wherever a formula is used.
#define FX_K(v) T(v)
#define FX_FUNCTION template <class T> [[gnu::always_inline]] inline T
#include "core/elementwise_formulas.def"

template <Unary>
constexpr bool kHasNoFormula = false;

// Each op's value and gradient, one if-constexpr branch per line of the table. Integers compute
// in their unsigned twin W, which wraps on the most negative value instead of overflowing.
template <Unary op, class T, class W = std::make_unsigned_t<T>>
T integer_value(T x) {
#define FX_UNARY_INTEGER(name, code, value)        \
    if constexpr (op == Unary::name) return value; \
    else
#include "core/elementwise_formulas.def"
    static_assert(kHasNoFormula<op>, "integer_value: an op that takes no integers");
}

template <Unary op, class T>
[[gnu::always_inline]] inline T unary_value(T x, T a, T b) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    if constexpr (op == Unary::name) return value;        \
    else
#include "core/elementwise_formulas.def"
    static_assert(kHasNoFormula<op>, "unary_value: an op with no line in core/elementwise_formulas.def");
}

// gx = gy * d op(x) / dx, with y = op(x) where that is cheaper.
template <Unary op, class T>
T unary_gradient(T x, T y, T gy, T a, T b) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    if constexpr (op == Unary::name) return gradient;     \
    else
#include "core/elementwise_formulas.def"
    static_assert(kHasNoFormula<op>, "unary_gradient: an op with no line in core/elementwise_formulas.def");
}

}  // namespace fluxion::backend::cpu
