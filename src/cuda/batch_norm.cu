// batch_norm.cu — BatchNorm's training pass and its gradient, one launch each way (core/backend.hpp's
// batch_norm and batch_norm_backward), in f32 and f64: one block per channel (a grid-stride loop over
// channels), each thread a strided share of the channel's outer·inner values, Kahan-summed, the
// shares combined by block_reduce. As Vulkan's batch_norm.comp, which lavapipe runs in CI; this file
// has been compiled, not yet run on a GPU.
#include <cmath>

#include "cuda/block_reduce.cuh"
#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"

namespace fluxion::cuda {

namespace {

// Kahan's compensated sum of one thread's share: a channel of a million values summed one by one
// in f32 would lose about as many units in the last place. (No product to contract into an FMA.)
template <class T> struct Kahan {
    T sum = 0, lost = 0;
    __device__ void add(T x) {
        const T y = x - lost, t = sum + y;
        lost = (t - sum) - y;
        sum = t;
    }
};

struct Sum {
    template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};

// Where the e-th of channel j's values lies in x {outer, c, inner}.
__device__ inline std::int64_t at(std::int64_t c, std::int64_t inner, std::int64_t j, std::int64_t e) {
    const std::int64_t o = e / inner;
    return (o * c + j) * inner + (e - o * inner);
}

// g = gy, or relu's gradient of it (gy where y > 0) where the pass had relu (y not null).
template <class T> __device__ T masked(const T* y, const T* gy, std::int64_t i) {
    return y ? (y[i] > T(0) ? gy[i] : T(0)) : gy[i];
}

template <class T> __global__ void batch_norm_kernel(std::int64_t outer, std::int64_t c, std::int64_t inner, const T* x,
                                                     const T* w, const T* b, T eps, bool relu, T* y, T* mean, T* var,
                                                     T* rstd) {
    const std::int64_t m = outer * inner;
    for (std::int64_t j = blockIdx.x; j < c; j += gridDim.x) {
        Kahan<T> s;
        for (std::int64_t e = threadIdx.x; e < m; e += blockDim.x) s.add(x[at(c, inner, j, e)]);
        const T mu = block_reduce(s.sum, Sum{}) / T(m);
        Kahan<T> q;  // the squared deviations from the mean, as the CPU: no cancellation of E[x²] - E[x]²
        for (std::int64_t e = threadIdx.x; e < m; e += blockDim.x) {
            const T d = x[at(c, inner, j, e)] - mu;
            q.add(d * d);
        }
        const T v = block_reduce(q.sum, Sum{}) / T(m), rs = T(1) / sqrt(v + eps);
        if (threadIdx.x == 0) mean[j] = mu, var[j] = v, rstd[j] = rs;
        const T scale = w ? rs * w[j] : rs, shift = b ? b[j] : T(0);
        for (std::int64_t e = threadIdx.x; e < m; e += blockDim.x) {
            const std::int64_t i = at(c, inner, j, e);
            const T out = (x[i] - mu) * scale + shift;
            y[i] = relu && out < T(0) ? T(0) : out;  // NaN stays NaN, as the relu kernel
        }
    }
}

template <class T> __global__ void batch_norm_backward_kernel(std::int64_t outer, std::int64_t c, std::int64_t inner,
                                                              const T* x, const T* y, const T* gy, const T* mean,
                                                              const T* rstd, const T* w, T* gx, T* gw, T* gb) {
    const std::int64_t m = outer * inner;
    for (std::int64_t j = blockIdx.x; j < c; j += gridDim.x) {
        const T mt = mean[j], rt = rstd[j];
        Kahan<T> sg, sgc;  // Σ g and Σ g (x - mean)
        for (std::int64_t e = threadIdx.x; e < m; e += blockDim.x) {
            const std::int64_t i = at(c, inner, j, e);
            const T g = masked(y, gy, i);
            sg.add(g);
            sgc.add(g * (x[i] - mt));
        }
        const T sum_g = block_reduce(sg.sum, Sum{}), sum_gx = block_reduce(sgc.sum, Sum{}) * rt;
        if (threadIdx.x == 0) {
            if (gb) gb[j] = sum_g;
            if (gw) gw[j] = sum_gx;
        }
        if (!gx) continue;
        const T a = sum_g / T(m), bx = sum_gx / T(m), k = w ? rt * w[j] : rt;
        for (std::int64_t e = threadIdx.x; e < m; e += blockDim.x) {
            const std::int64_t i = at(c, inner, j, e);
            gx[i] = (masked(y, gy, i) - a - (x[i] - mt) * rt * bx) * k;
        }
    }
}

}  // namespace

void batch_norm(int device, DType t, std::int64_t outer, std::int64_t c, std::int64_t inner, const void* x,
                const void* weight, const void* bias, double epsilon, bool relu, void* y, void* mean, void* var,
                void* rstd) {
    dispatch_f32_f64(t, "batch_norm", [&](auto tag) {
        using T = decltype(tag);
        if (outer * c * inner <= 0) return;
        Context& ctx = activate(device);
        batch_norm_kernel<T><<<row_blocks(c), threads_per_row(outer * inner), 0, ctx.stream>>>(
            outer, c, inner, static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias),
            T(epsilon), relu, static_cast<T*>(y), static_cast<T*>(mean), static_cast<T*>(var), static_cast<T*>(rstd));
        FLUXION_CUDA_CHECK_LAUNCH("batch_norm kernel");
    });
}

void batch_norm_backward(int device, DType t, std::int64_t outer, std::int64_t c, std::int64_t inner, const void* x,
                         const void* y, const void* gy, const void* mean, const void* rstd, const void* weight,
                         void* gx, void* gweight, void* gbias) {
    dispatch_f32_f64(t, "batch_norm_backward", [&](auto tag) {
        using T = decltype(tag);
        if (outer * c * inner <= 0) return;
        Context& ctx = activate(device);
        batch_norm_backward_kernel<T><<<row_blocks(c), threads_per_row(outer * inner), 0, ctx.stream>>>(
            outer, c, inner, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(gy),
            static_cast<const T*>(mean), static_cast<const T*>(rstd), static_cast<const T*>(weight),
            static_cast<T*>(gx), static_cast<T*>(gweight), static_cast<T*>(gbias));
        FLUXION_CUDA_CHECK_LAUNCH("batch_norm_backward kernel");
    });
}

}  // namespace fluxion::cuda
