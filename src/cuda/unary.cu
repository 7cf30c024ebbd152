// unary.cu — elementwise functions of one tensor and their gradients, made from the formula table
// that every backend shares (src/core/elementwise_formulas.def). The op is a run-time switch inside
// one kernel per dtype (uniform across a warp, so nearly free), which keeps the number of
// instantiated kernels, and the build time, small.
// f16 and bf16 compute in f32 (dtype_dispatch.cuh). neg, abs, square and sign also take i32 and
// i64, wrapping on overflow as the CPU does.
#include <type_traits>

#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/formulas.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"

namespace fluxion::cuda {

namespace {

bool takes_integers(Unary op) {
#define FX_UNARY_INTEGER(name, code, value) \
    if (op == Unary::name) return true;
#include "core/elementwise_formulas.def"
    return false;
}

template <class T>
__global__ void unary_kernel(Unary op, std::int64_t n, const T* x, T* y, Compute<T> a, Compute<T> b) {
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        if constexpr (std::is_integral_v<T>) y[i] = unary_integer(op, x[i]);
        else y[i] = narrow<T>(unary_value(op, widen(x[i]), a, b));
    }
}

template <class T>
__global__ void unary_backward_kernel(Unary op, std::int64_t n, const T* x, const T* y, const T* gy, T* gx,
                                      Compute<T> a, Compute<T> b) {
    for (std::int64_t i = first_index(); i < n; i += index_step())
        gx[i] = narrow<T>(unary_gradient(op, widen(x[i]), widen(y[i]), widen(gy[i]), a, b));
}

}  // namespace

void unary(int device, Unary op, DType t, std::int64_t n, const void* x, void* y, double a, double b) {
    if (n <= 0) return;
    if ((t == DType::i32 || t == DType::i64) && !takes_integers(op))
        throw_unsupported("unary", t, "f32, f64, f16, bf16; neg, abs, square and sign also i32, i64");
    Context& ctx = activate(device);
    dispatch_signed(t, "unary", [&](auto tag) {
        using T = decltype(tag);
        unary_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
            op, n, static_cast<const T*>(x), static_cast<T*>(y), Compute<T>(a), Compute<T>(b));
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
            static_cast<T*>(gx), Compute<T>(a), Compute<T>(b));
    });
    FLUXION_CUDA_CHECK_LAUNCH("unary_backward_kernel");
}

}  // namespace fluxion::cuda
