// softmax.cu — softmax and log-softmax along the middle axis of {outer, n, inner}, and their
// gradients. Contiguous rows (inner == 1) get a warp or a block each; otherwise one thread per
// column walks down it, neighbouring threads reading neighbouring elements. f16 and bf16 compute in
// f32 (dtype_dispatch.cuh).
#include <cmath>

#include "cuda/block_reduce.cuh"
#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"

namespace fluxion::cuda {

namespace {

struct Max {
    template <class T> __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct Sum {
    template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};

// y = softmax(x) = exp(x - max) / sum, or log-softmax = (x - max) - log(sum), rounded as the CPU does
template <class T> __device__ T softmax_value(bool log_softmax, T x, T max, T sum) {
    return log_softmax ? (x - max) - log(sum) : exp(x - max) * (T(1) / sum);
}

// The sum the gradient needs: sum(gy) for log-softmax, sum(gy * y) for softmax.
template <class T> __device__ T gradient_term(bool log_softmax, T y, T gy) { return log_softmax ? gy : gy * y; }

template <class T> __device__ T softmax_gradient(bool log_softmax, T y, T gy, T total) {
    return log_softmax ? gy - exp(y) * total : y * (gy - total);
}

template <class T>
__global__ void softmax_rows_kernel(bool log_softmax, std::int64_t rows, std::int64_t n, const T* x, T* y) {
    for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* xr = x + row * n;
        Compute<T> max = -INFINITY, sum = 0;
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) max = Max{}(max, widen(xr[j]));
        max = block_reduce(max, Max{});
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += exp(widen(xr[j]) - max);
        sum = block_reduce(sum, Sum{});
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x)
            y[row * n + j] = narrow<T>(softmax_value(log_softmax, widen(xr[j]), max, sum));
    }
}

template <class T>
__global__ void softmax_columns_kernel(bool log_softmax, std::int64_t outer, std::int64_t n, std::int64_t inner,
                                       const T* x, T* y) {
    for (std::int64_t i = first_index(); i < outer * inner; i += index_step()) {
        const std::int64_t base = i / inner * n * inner + i % inner;
        Compute<T> max = -INFINITY, sum = 0;
        for (std::int64_t j = 0; j < n; ++j) max = Max{}(max, widen(x[base + j * inner]));
        for (std::int64_t j = 0; j < n; ++j) sum += exp(widen(x[base + j * inner]) - max);
        for (std::int64_t j = 0; j < n; ++j)
            y[base + j * inner] = narrow<T>(softmax_value(log_softmax, widen(x[base + j * inner]), max, sum));
    }
}

template <class T>
__global__ void softmax_backward_rows_kernel(bool log_softmax, std::int64_t rows, std::int64_t n, const T* y,
                                             const T* gy, T* gx) {
    for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const std::int64_t base = row * n;
        Compute<T> total = 0;
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x)
            total += gradient_term(log_softmax, widen(y[base + j]), widen(gy[base + j]));
        total = block_reduce(total, Sum{});
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x)
            gx[base + j] = narrow<T>(softmax_gradient(log_softmax, widen(y[base + j]), widen(gy[base + j]), total));
    }
}

template <class T>
__global__ void softmax_backward_columns_kernel(bool log_softmax, std::int64_t outer, std::int64_t n,
                                                std::int64_t inner, const T* y, const T* gy, T* gx) {
    for (std::int64_t i = first_index(); i < outer * inner; i += index_step()) {
        const std::int64_t base = i / inner * n * inner + i % inner;
        Compute<T> total = 0;
        for (std::int64_t j = 0; j < n; ++j)
            total += gradient_term(log_softmax, widen(y[base + j * inner]), widen(gy[base + j * inner]));
        for (std::int64_t j = 0; j < n; ++j) {
            const std::int64_t at = base + j * inner;
            gx[at] = narrow<T>(softmax_gradient(log_softmax, widen(y[at]), widen(gy[at]), total));
        }
    }
}

}  // namespace

void softmax(int device, bool log, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner, const void* x,
             void* y) {
    if (outer * n * inner <= 0) return;
    Context& ctx = activate(device);
    dispatch_floating(t, "softmax", [&](auto tag) {
        using T = decltype(tag);
        const T* xs = static_cast<const T*>(x);
        T* ys = static_cast<T*>(y);
        if (inner == 1)
            softmax_rows_kernel<T><<<row_blocks(outer), threads_per_row(n), 0, ctx.stream>>>(log, outer, n, xs, ys);
        else
            softmax_columns_kernel<T><<<grid_for(ctx, outer * inner), kThreads, 0, ctx.stream>>>(log, outer, n,
                                                                                                  inner, xs, ys);
    });
    FLUXION_CUDA_CHECK_LAUNCH("softmax kernel");
}

void softmax_backward(int device, bool log, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner,
                      const void* y, const void* gy, void* gx) {
    if (outer * n * inner <= 0) return;
    Context& ctx = activate(device);
    dispatch_floating(t, "softmax_backward", [&](auto tag) {
        using T = decltype(tag);
        const T* ys = static_cast<const T*>(y);
        const T* gys = static_cast<const T*>(gy);
        T* gxs = static_cast<T*>(gx);
        if (inner == 1)
            softmax_backward_rows_kernel<T>
                <<<row_blocks(outer), threads_per_row(n), 0, ctx.stream>>>(log, outer, n, ys, gys, gxs);
        else
            softmax_backward_columns_kernel<T>
                <<<grid_for(ctx, outer * inner), kThreads, 0, ctx.stream>>>(log, outer, n, inner, ys, gys, gxs);
    });
    FLUXION_CUDA_CHECK_LAUNCH("softmax_backward kernel");
}

}  // namespace fluxion::cuda
