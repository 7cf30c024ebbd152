// Elementwise functions of one tensor and their gradients.
#include <cmath>
#include <numbers>
#include <string>
#include <type_traits>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

const char* const kUnaryNames[] = {"neg",     "exp",     "log",      "sqrt",  "abs",  "square",
                                   "sin",     "cos",     "tanh",     "sigmoid", "relu", "leakyrelu",
                                   "elu",     "gelu",    "softplus", "swish", "clamp", "sign",
                                   "recip",   "pow_scalar", "gelu_erf"};

// Ops that are a few instructions per element: below a larger size they are not worth threads.
constexpr bool is_cheap(Unary op) {
    return op == Unary::neg || op == Unary::abs || op == Unary::square || op == Unary::relu ||
           op == Unary::leakyrelu || op == Unary::clamp || op == Unary::sign || op == Unary::recip;
}

// The ops that also take integers (i32, i64).
constexpr bool takes_integers(Unary op) {
    return op == Unary::neg || op == Unary::abs || op == Unary::square || op == Unary::sign;
}

template <class T>
T sigmoid(T x) {
    return T(1) / (T(1) + std::exp(-x));
}

// gelu's tanh approximation: 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2 / pi).
template <class T>
inline constexpr T kGeluK = T(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
template <class T>
inline constexpr T kGeluC = T(0.044715);

// gelu_erf: x Φ(x) = 0.5 x (1 + erf(x / sqrt 2)), whose derivative is Φ(x) + x φ(x).
template <class T>
inline constexpr T kInvSqrt2 = T(std::numbers::sqrt2 / 2);
template <class T>
inline constexpr T kInvSqrt2Pi = T(std::numbers::inv_sqrtpi * std::numbers::sqrt2 / 2);

template <Unary op, class T>
T integer_value(T x) {
    using U = std::make_unsigned_t<T>;  // wraps on the most negative value instead of overflowing
    if constexpr (op == Unary::neg) return T(U(0) - U(x));
    else if constexpr (op == Unary::abs) return x < 0 ? T(U(0) - U(x)) : x;
    else if constexpr (op == Unary::square) return T(U(x) * U(x));
    else return T((x > 0) - (x < 0));
}

template <Unary op, class T>
T unary_value(T x, T a, T b) {
    using std::exp, std::log, std::tanh;
    if constexpr (op == Unary::neg) return -x;
    else if constexpr (op == Unary::exp) return exp(x);
    else if constexpr (op == Unary::log) return log(x);
    else if constexpr (op == Unary::sqrt) return std::sqrt(x);
    else if constexpr (op == Unary::abs) return std::abs(x);
    else if constexpr (op == Unary::square) return x * x;
    else if constexpr (op == Unary::sin) return std::sin(x);
    else if constexpr (op == Unary::cos) return std::cos(x);
    else if constexpr (op == Unary::tanh) return tanh(x);
    else if constexpr (op == Unary::sigmoid) return sigmoid(x);
    else if constexpr (op == Unary::relu) return x < 0 ? T(0) : x;  // NaN stays NaN
    else if constexpr (op == Unary::leakyrelu) return x > 0 ? x : a * x;
    else if constexpr (op == Unary::elu) return x > 0 ? x : a * std::expm1(x);
    else if constexpr (op == Unary::gelu) return T(0.5) * x * (T(1) + tanh(kGeluK<T> * (x + kGeluC<T> * x * x * x)));
    else if constexpr (op == Unary::softplus) return std::log1p(exp(-std::abs(x))) + (x > 0 ? x : T(0));
    else if constexpr (op == Unary::swish) return x * sigmoid(x);
    else if constexpr (op == Unary::clamp) return x < a ? a : (x > b ? b : x);
    else if constexpr (op == Unary::sign) return x > 0 ? T(1) : (x < 0 ? T(-1) : x);  // keeps ±0 and NaN
    else if constexpr (op == Unary::recip) return T(1) / x;
    else if constexpr (op == Unary::gelu_erf) return T(0.5) * x * (T(1) + std::erf(x * kInvSqrt2<T>));
    else return std::pow(x, a);
}

// gx = gy * d op(x) / dx, with y = op(x) where that is cheaper.
template <Unary op, class T>
T unary_gradient(T x, T y, T gy, T a, T b) {
    if constexpr (op == Unary::neg) return -gy;
    else if constexpr (op == Unary::exp) return gy * y;
    else if constexpr (op == Unary::log) return gy / x;
    else if constexpr (op == Unary::sqrt) return gy / (T(2) * y);
    else if constexpr (op == Unary::abs) return x > 0 ? gy : (x < 0 ? -gy : T(0));
    else if constexpr (op == Unary::square) return T(2) * x * gy;
    else if constexpr (op == Unary::sin) return gy * std::cos(x);
    else if constexpr (op == Unary::cos) return -gy * std::sin(x);
    else if constexpr (op == Unary::tanh) return gy * (T(1) - y * y);
    else if constexpr (op == Unary::sigmoid) return gy * y * (T(1) - y);
    else if constexpr (op == Unary::relu) return x > 0 ? gy : T(0);
    else if constexpr (op == Unary::leakyrelu) return x > 0 ? gy : a * gy;
    else if constexpr (op == Unary::elu) return x > 0 ? gy : gy * (y + a);  // a e^x = y + a
    else if constexpr (op == Unary::gelu) {
        const T t = std::tanh(kGeluK<T> * (x + kGeluC<T> * x * x * x));
        const T du = kGeluK<T> * (T(1) + T(3) * kGeluC<T> * x * x);
        return gy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
    } else if constexpr (op == Unary::softplus) return gy * sigmoid(x);
    else if constexpr (op == Unary::swish) {
        const T s = sigmoid(x);
        return gy * (s + y * (T(1) - s));  // s + x s (1 - s)
    } else if constexpr (op == Unary::clamp) return (a <= x && x <= b) ? gy : T(0);
    else if constexpr (op == Unary::sign) return T(0);
    else if constexpr (op == Unary::recip) return -gy * y * y;
    else if constexpr (op == Unary::gelu_erf)
        return gy * (T(0.5) * (T(1) + std::erf(x * kInvSqrt2<T>)) + x * kInvSqrt2Pi<T> * std::exp(T(-0.5) * x * x));
    else return a == 0 ? T(0) : gy * a * std::pow(x, a - T(1));
}

template <Unary op, class T>
void unary_loop(int64_t n, const T* x, T* y, T a, T b) {
    constexpr int64_t grain = is_cheap(op) ? kParallelMin : kParallelMin / 16;
    parallel_for(n, n > grain, [=](int64_t begin, int64_t end) {
        if constexpr (std::is_integral_v<T>)
            for (int64_t i = begin; i < end; ++i) y[i] = integer_value<op>(x[i]);
        else
            for (int64_t i = begin; i < end; ++i) y[i] = unary_value<op>(x[i], a, b);
    });
}

template <Unary op, class T>
void unary_backward_loop(int64_t n, const T* x, const T* y, const T* gy, T* gx, T a, T b) {
    constexpr int64_t grain = is_cheap(op) ? kParallelMin : kParallelMin / 16;
    parallel_for(n, n > grain, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) gx[i] = unary_gradient<op>(x[i], y[i], gy[i], a, b);
    });
}

// Calls f(std::integral_constant<Unary, op>{}) so that each op compiles to its own loop.
template <class F>
void with_op(Unary op, F&& f) {
    using U = Unary;
    switch (op) {
        case U::neg: return f(std::integral_constant<U, U::neg>{});
        case U::exp: return f(std::integral_constant<U, U::exp>{});
        case U::log: return f(std::integral_constant<U, U::log>{});
        case U::sqrt: return f(std::integral_constant<U, U::sqrt>{});
        case U::abs: return f(std::integral_constant<U, U::abs>{});
        case U::square: return f(std::integral_constant<U, U::square>{});
        case U::sin: return f(std::integral_constant<U, U::sin>{});
        case U::cos: return f(std::integral_constant<U, U::cos>{});
        case U::tanh: return f(std::integral_constant<U, U::tanh>{});
        case U::sigmoid: return f(std::integral_constant<U, U::sigmoid>{});
        case U::relu: return f(std::integral_constant<U, U::relu>{});
        case U::leakyrelu: return f(std::integral_constant<U, U::leakyrelu>{});
        case U::elu: return f(std::integral_constant<U, U::elu>{});
        case U::gelu: return f(std::integral_constant<U, U::gelu>{});
        case U::softplus: return f(std::integral_constant<U, U::softplus>{});
        case U::swish: return f(std::integral_constant<U, U::swish>{});
        case U::clamp: return f(std::integral_constant<U, U::clamp>{});
        case U::sign: return f(std::integral_constant<U, U::sign>{});
        case U::recip: return f(std::integral_constant<U, U::recip>{});
        case U::pow_scalar: return f(std::integral_constant<U, U::pow_scalar>{});
        case U::gelu_erf: return f(std::integral_constant<U, U::gelu_erf>{});
    }
    throw ValueError("unary: unknown op code " + std::to_string(int(op)));
}

// The name is only built for an error, so the common path allocates nothing.
std::string kernel_name(const char* kernel, Unary op) {
    const bool known = int(op) >= 0 && int(op) <= int(Unary::gelu_erf);
    return std::string(kernel) + " " + (known ? kUnaryNames[int(op)] : "?");
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
