// pool.cu — 2-d max and mean pooling over NCHW and their gradients. Max pooling ignores padding
// (the first maximum of the window wins; NaN propagates); mean pooling divides by the window's size
// counting padding cells, as PyTorch's count_include_pad=True. Gradients are scattered with
// atomicAdd, one thread per output. f16 and bf16 compute in f32 (dtype_dispatch.cuh), and their
// gradients add up in an f32 copy that is rounded once, as on the CPU.
#include <cmath>
#include <string>

#include "cuda/allocator.hpp"
#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

void check(const char* op, Pool kind, const Pool2dShape& s) {
    const bool sizes = s.n >= 0 && s.c >= 0 && s.h >= 0 && s.w >= 0 && s.oh >= 0 && s.ow >= 0 && s.kh >= 1 &&
                       s.kw >= 1 && s.pad_h >= 0 && s.pad_w >= 0 && s.stride_h >= 1 && s.stride_w >= 1;
    if (!sizes)
        throw ShapeError(std::string(op) + ": invalid shape: window " + std::to_string(s.kh) + "x" +
                         std::to_string(s.kw) + ", stride " + std::to_string(s.stride_h) + "x" +
                         std::to_string(s.stride_w) + ", padding " + std::to_string(s.pad_h) + "x" +
                         std::to_string(s.pad_w) + "; windows and strides must be positive, padding non-negative");
    if (kind != Pool::max && kind != Pool::mean)
        throw ValueError(std::string(op) + ": unknown pooling op code " + std::to_string(static_cast<int>(kind)));
}

// The input cells [h0, h1) x [w0, w1) of one output's window, and the mean's divisor.
struct Window {
    std::int64_t h0, h1, w0, w1, divisor;
};

__device__ Window window_of(const Pool2dShape& s, std::int64_t oh, std::int64_t ow) {
    const std::int64_t hs = oh * s.stride_h - s.pad_h, ws = ow * s.stride_w - s.pad_w;
    const std::int64_t he = min(hs + s.kh, s.h + s.pad_h), we = min(ws + s.kw, s.w + s.pad_w);
    const std::int64_t divisor = max((he - hs) * (we - ws), std::int64_t{1});
    return {max(hs, std::int64_t{0}), min(hs + s.kh, s.h), max(ws, std::int64_t{0}), min(ws + s.kw, s.w), divisor};
}

// The offset in the plane of the window's first maximum, or -1 when the window has no input cell.
template <class T> __device__ std::int64_t argmax_in(const T* plane, const Pool2dShape& s, const Window& win) {
    std::int64_t best = -1;
    Compute<T> best_value = 0;
    for (std::int64_t h = win.h0; h < win.h1; ++h) {
        for (std::int64_t w = win.w0; w < win.w1; ++w) {
            const Compute<T> v = widen(plane[h * s.w + w]);
            if (best < 0 || v > best_value || (is_nan(v) && !is_nan(best_value))) {
                best = h * s.w + w;
                best_value = v;
            }
        }
    }
    return best;
}

template <class T> __device__ Compute<T> window_sum(const T* plane, const Pool2dShape& s, const Window& win) {
    Compute<T> sum = 0;
    for (std::int64_t h = win.h0; h < win.h1; ++h)
        for (std::int64_t w = win.w0; w < win.w1; ++w) sum += widen(plane[h * s.w + w]);
    return sum;
}

template <class T> __global__ void pool2d_kernel(Pool op, Pool2dShape s, const T* x, T* y) {
    const std::int64_t total = s.n * s.c * s.oh * s.ow;
    for (std::int64_t i = first_index(); i < total; i += index_step()) {
        const std::int64_t ow = i % s.ow, oh = i / s.ow % s.oh, plane_index = i / (s.ow * s.oh);
        const T* plane = x + plane_index * s.h * s.w;
        const Window win = window_of(s, oh, ow);
        if (op == Pool::max) {
            const std::int64_t at = argmax_in(plane, s, win);
            y[i] = at < 0 ? narrow<T>(-INFINITY) : plane[at];
        } else {
            y[i] = narrow<T>(window_sum(plane, s, win) / Compute<T>(win.divisor));
        }
    }
}

template <class T>
__global__ void pool2d_backward_kernel(Pool op, Pool2dShape s, const T* x, const T* gy, Compute<T>* gx) {
    const std::int64_t total = s.n * s.c * s.oh * s.ow;
    for (std::int64_t i = first_index(); i < total; i += index_step()) {
        const std::int64_t ow = i % s.ow, oh = i / s.ow % s.oh, plane_index = i / (s.ow * s.oh);
        const std::int64_t plane_offset = plane_index * s.h * s.w;
        const Window win = window_of(s, oh, ow);
        if (op == Pool::max) {
            const std::int64_t at = argmax_in(x + plane_offset, s, win);
            if (at >= 0) atomicAdd(gx + plane_offset + at, widen(gy[i]));
        } else {
            const Compute<T> share = widen(gy[i]) / Compute<T>(win.divisor);
            for (std::int64_t h = win.h0; h < win.h1; ++h)
                for (std::int64_t w = win.w0; w < win.w1; ++w) atomicAdd(gx + plane_offset + h * s.w + w, share);
        }
    }
}

}  // namespace

void pool2d(int device, Pool op, DType t, const Pool2dShape* s, const void* x, void* y) {
    check("pool2d", op, *s);
    const std::int64_t total = s->n * s->c * s->oh * s->ow;
    if (total <= 0) return;
    Context& ctx = activate(device);
    dispatch_floating(t, "pool2d", [&](auto tag) {
        using T = decltype(tag);
        pool2d_kernel<T><<<grid_for(ctx, total), kThreads, 0, ctx.stream>>>(op, *s, static_cast<const T*>(x),
                                                                             static_cast<T*>(y));
    });
    FLUXION_CUDA_CHECK_LAUNCH("pool2d_kernel");
}

void pool2d_backward(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                     const void* gy, void* gx) {
    check("pool2d_backward", op, *s);
    const std::int64_t inputs = s->n * s->c * s->h * s->w, outputs = s->n * s->c * s->oh * s->ow;
    if (inputs <= 0) return;
    Context& ctx = activate(device);
    dispatch_floating(t, "pool2d_backward", [&](auto tag) {
        using T = decltype(tag);
        using C = Compute<T>;
        Scratch wide(device, is_half_v<T> ? inputs * sizeof(C) : 0);
        C* sums = is_half_v<T> ? wide.as<C>() : static_cast<C*>(gx);
        FLUXION_CUDA_CHECK(cudaMemsetAsync(sums, 0, inputs * sizeof(C), ctx.stream));
        if (outputs > 0) {
            pool2d_backward_kernel<T><<<grid_for(ctx, outputs), kThreads, 0, ctx.stream>>>(
                op, *s, static_cast<const T*>(x), static_cast<const T*>(gy), sums);
            FLUXION_CUDA_CHECK_LAUNCH("pool2d_backward_kernel");
        }
        if (is_half_v<T>) cast(device, DType::f32, t, inputs, sums, gx);
    });
}

}  // namespace fluxion::cuda
