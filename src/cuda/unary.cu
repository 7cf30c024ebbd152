// unary.cu — elementwise functions of one tensor and their gradients, with the CPU's formulas
// (src/cpu/unary.cpp). The op is a run-time switch inside one kernel per dtype (uniform across a
// warp, so nearly free), which keeps the number of instantiated kernels, and the build time, small.
// neg, abs, square and sign also take i32 and i64, wrapping on overflow as the CPU does.
#include <type_traits>

#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"

namespace fluxion::cuda {

namespace {

template <class T> __device__ T sigmoid_of(T x) { return T(1) / (T(1) + exp(-x)); }

constexpr double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;    // gelu_erf: x Φ(x) = 0.5 x (1 + erf(x / sqrt 2))
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // φ(x) = exp(-x² / 2) / sqrt(2 pi)

template <class T> __device__ T apply(Unary op, T x, T a, T b) {
    switch (op) {
        case Unary::neg: return -x;
        case Unary::exp: return exp(x);
        case Unary::log: return log(x);
        case Unary::sqrt: return sqrt(x);
        case Unary::abs: return fabs(x);
        case Unary::square: return x * x;
        case Unary::sin: return sin(x);
        case Unary::cos: return cos(x);
        case Unary::tanh: return tanh(x);
        case Unary::sigmoid: return sigmoid_of(x);
        case Unary::relu: return x < T(0) ? T(0) : x;
        case Unary::leakyrelu: return x > T(0) ? x : a * x;
        case Unary::elu: return x > T(0) ? x : a * expm1(x);
        case Unary::gelu: return T(0.5) * x * (T(1) + tanh(T(kGeluScale) * (x + T(kGeluCubic) * x * x * x)));
        case Unary::softplus: return log1p(exp(-fabs(x))) + (x > T(0) ? x : T(0));
        case Unary::swish: return x * sigmoid_of(x);
        case Unary::clamp: return x < a ? a : (x > b ? b : x);
        case Unary::sign: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
        case Unary::recip: return T(1) / x;
        case Unary::pow_scalar: return pow(x, a);
        case Unary::gelu_erf: return T(0.5) * x * (T(1) + erf(x * T(kInvSqrt2)));
    }
    return x;
}

// gx = gy * d op(x) / dx, given x and y = op(x), in the CPU's arrangement of each formula
template <class T> __device__ T gradient(Unary op, T x, T y, T gy, T a, T b) {
    switch (op) {
        case Unary::neg: return -gy;
        case Unary::exp: return gy * y;
        case Unary::log: return gy / x;
        case Unary::sqrt: return gy / (T(2) * y);
        case Unary::abs: return x > T(0) ? gy : (x < T(0) ? -gy : T(0));
        case Unary::square: return T(2) * x * gy;
        case Unary::sin: return gy * cos(x);
        case Unary::cos: return -gy * sin(x);
        case Unary::tanh: return gy * (T(1) - y * y);
        case Unary::sigmoid: return gy * y * (T(1) - y);
        case Unary::relu: return x > T(0) ? gy : T(0);
        case Unary::leakyrelu: return x > T(0) ? gy : a * gy;
        case Unary::elu: return x > T(0) ? gy : gy * (y + a);  // a e^x = y + a
        case Unary::gelu: {
            const T t = tanh(T(kGeluScale) * (x + T(kGeluCubic) * x * x * x));
            const T du = T(kGeluScale) * (T(1) + T(3) * T(kGeluCubic) * x * x);
            return gy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
        }
        case Unary::softplus: return gy * sigmoid_of(x);
        case Unary::swish: {
            const T s = sigmoid_of(x);
            return gy * (s + y * (T(1) - s));  // s + x s (1 - s)
        }
        case Unary::clamp: return a <= x && x <= b ? gy : T(0);
        case Unary::sign: return T(0);
        case Unary::recip: return -gy * y * y;
        case Unary::pow_scalar: return a == T(0) ? T(0) : gy * a * pow(x, a - T(1));
        case Unary::gelu_erf:
            return gy * (T(0.5) * (T(1) + erf(x * T(kInvSqrt2))) + x * T(kInvSqrt2Pi) * exp(T(-0.5) * x * x));
    }
    return T(0);
}

// The integer ops, through the unsigned twin so that overflow wraps.
template <class T> __device__ T apply_integer(Unary op, T x) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
        case Unary::neg: return T(U(0) - U(x));
        case Unary::abs: return x < 0 ? T(U(0) - U(x)) : x;
        case Unary::square: return T(U(x) * U(x));
        default: return T((x > 0) - (x < 0));  // sign
    }
}

bool takes_integers(Unary op) {
    return op == Unary::neg || op == Unary::abs || op == Unary::square || op == Unary::sign;
}

template <class T> __global__ void unary_kernel(Unary op, std::int64_t n, const T* x, T* y, T a, T b) {
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        if constexpr (std::is_integral_v<T>) y[i] = apply_integer(op, x[i]);
        else y[i] = apply(op, x[i], a, b);
    }
}

template <class T>
__global__ void unary_backward_kernel(Unary op, std::int64_t n, const T* x, const T* y, const T* gy, T* gx, T a,
                                      T b) {
    for (std::int64_t i = first_index(); i < n; i += index_step()) gx[i] = gradient(op, x[i], y[i], gy[i], a, b);
}

}  // namespace

void unary(int device, Unary op, DType t, std::int64_t n, const void* x, void* y, double a, double b) {
    if (n <= 0) return;
    if ((t == DType::i32 || t == DType::i64) && !takes_integers(op))
        throw_unsupported("unary", t, "f32, f64; neg, abs, square and sign also i32, i64");
    Context& ctx = activate(device);
    dispatch_signed(t, "unary", [&](auto tag) {
        using T = decltype(tag);
        unary_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(op, n, static_cast<const T*>(x),
                                                                        static_cast<T*>(y), T(a), T(b));
    });
    FLUXION_CUDA_CHECK_LAUNCH("unary_kernel");
}

void unary_backward(int device, Unary op, DType t, std::int64_t n, const void* x, const void* y, const void* gy,
                    void* gx, double a, double b) {
    if (n <= 0) return;
    Context& ctx = activate(device);
    dispatch_floating(t, "unary_backward", [&](auto tag) {
        using T = decltype(tag);
        unary_backward_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
            op, n, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(gy),
            static_cast<T*>(gx), T(a), T(b));
    });
    FLUXION_CUDA_CHECK_LAUNCH("unary_backward_kernel");
}

}  // namespace fluxion::cuda
