// Elementwise functions of one tensor and their gradients.
#include <cmath>
#include <string>
#include <type_traits>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "cpu/vector_math.hpp"

namespace fluxion::backend::cpu {
namespace {

// Ops that are a few instructions per element: below a larger size they are not worth threads.
constexpr bool is_cheap(Unary op) {
    return op == Unary::neg || op == Unary::abs || op == Unary::square || op == Unary::relu ||
           op == Unary::leakyrelu || op == Unary::clamp || op == Unary::sign || op == Unary::recip;
}

// The table has one line per backend::Unary, in the order of the codes, which the shaders use.
constexpr bool table_matches_codes() {
    int next = 0;
#define FX_UNARY(name, code, reads, api, value, gradient) \
    if (int(Unary::name) != next++ || code != int(Unary::name)) return false;
#define FX_UNARY_INTEGER(name, code, value) \
    if (code != int(Unary::name)) return false;
#include "core/elementwise_formulas.def"
    return next == int(Unary::count);
}
static_assert(table_matches_codes(), "core/elementwise_formulas.def: one FX_UNARY line per backend::Unary, by code");

// The ops that also take integers (i32, i64).
constexpr bool takes_integers(Unary op) {
#define FX_UNARY_INTEGER(name, code, value) \
    if (op == Unary::name) return true;
#include "core/elementwise_formulas.def"
    return false;
}

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
T unary_value(T x, T a, T b) {
#define FX_UNARY(name, code, reads, api, value, gradient)      \
    if constexpr (op == Unary::name) return value; \
    else
#include "core/elementwise_formulas.def"
    static_assert(kHasNoFormula<op>, "unary_value: an op with no line in core/elementwise_formulas.def");
}

// gx = gy * d op(x) / dx, with y = op(x) where that is cheaper.
template <Unary op, class T>
T unary_gradient(T x, T y, T gy, T a, T b) {
#define FX_UNARY(name, code, reads, api, value, gradient)         \
    if constexpr (op == Unary::name) return gradient; \
    else
#include "core/elementwise_formulas.def"
    static_assert(kHasNoFormula<op>, "unary_gradient: an op with no line in core/elementwise_formulas.def");
}

// Each op's loops are functions of their own: inlined into unary(), whose dispatch makes it very
// large, GCC stopped inlining the elementary functions into them and left them scalar calls.
template <Unary op, class T>
[[gnu::noinline]] void unary_range(int64_t begin, int64_t end, const T* x, T* y, T a, T b) {
    if constexpr (std::is_integral_v<T>)
        for (int64_t i = begin; i < end; ++i) y[i] = integer_value<op>(x[i]);
    else
        for (int64_t i = begin; i < end; ++i) y[i] = unary_value<op>(x[i], a, b);
}

template <Unary op, class T>
[[gnu::noinline]] void unary_backward_range(int64_t begin, int64_t end, const T* x, const T* y, const T* gy, T* gx,
                                            T a, T b) {
    for (int64_t i = begin; i < end; ++i) gx[i] = unary_gradient<op>(x[i], y[i], gy[i], a, b);
}

template <Unary op, class T>
void unary_loop(int64_t n, const T* x, T* y, T a, T b) {
    constexpr int64_t grain = is_cheap(op) ? kParallelMin : kParallelMin / 16;
    parallel_for(n, n > grain, [=](int64_t begin, int64_t end) { unary_range<op>(begin, end, x, y, a, b); });
}

template <Unary op, class T>
void unary_backward_loop(int64_t n, const T* x, const T* y, const T* gy, T* gx, T a, T b) {
    constexpr int64_t grain = is_cheap(op) ? kParallelMin : kParallelMin / 16;
    parallel_for(n, n > grain,
                 [=](int64_t begin, int64_t end) { unary_backward_range<op>(begin, end, x, y, gy, gx, a, b); });
}

// Calls f(std::integral_constant<Unary, op>{}) so that each op compiles to its own loop.
template <class F>
void with_op(Unary op, F&& f) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    if (op == Unary::name) return f(std::integral_constant<Unary, Unary::name>{});
#include "core/elementwise_formulas.def"
    throw ValueError("unary: unknown op code " + std::to_string(int(op)));
}

// The name is only built for an error, so the common path allocates nothing.
std::string kernel_name(const char* kernel, Unary op) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    if (op == Unary::name) return std::string(kernel) + " " #name;
#include "core/elementwise_formulas.def"
    return std::string(kernel) + " ?";
}

bool is_float(DType t) { return t == DType::f32 || t == DType::f64; }

}  // namespace

void unary(int device, Unary op, DType t, int64_t n, const void* x, void* y, double a, double b) {
    with_op(op, [&](auto constant) {
        constexpr Unary o = decltype(constant)::value;
        if constexpr (takes_integers(o)) {
            const auto integers = [&](auto tag) {
                using I = decltype(tag);
                unary_loop<o>(n, static_cast<const I*>(x), static_cast<I*>(y), I(0), I(0));
            };
            if (t == DType::i32) return integers(std::int32_t{});
            if (t == DType::i64) return integers(std::int64_t{});
            if (!is_float(t)) throw unsupported(kernel_name("unary", op).c_str(), t, "f32, f64, f16, bf16, i32, i64");
        }
        if (!is_float(t)) throw unsupported(kernel_name("unary", op).c_str(), t, kFloatTypes);
        dispatch_float(t, "unary", [&](auto tag) {
            using T = decltype(tag);
            unary_loop<o>(n, static_cast<const T*>(x), static_cast<T*>(y), T(a), T(b));
        });
    });
}

void unary_backward(int device, Unary op, DType t, int64_t n, const void* x, const void* y, const void* gy,
                    void* gx, double a, double b) {
    if (!is_float(t)) throw unsupported(kernel_name("unary_backward", op).c_str(), t, kFloatTypes);
    with_op(op, [&](auto constant) {
        constexpr Unary o = decltype(constant)::value;
        dispatch_float(t, "unary_backward", [&](auto tag) {
            using T = decltype(tag);
            unary_backward_loop<o>(n, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(gy),
                                   static_cast<T*>(gx), T(a), T(b));
        });
    });
}

}  // namespace fluxion::backend::cpu
