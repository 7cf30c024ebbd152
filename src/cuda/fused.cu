// fused.cu — the CUDA backend's fused entries (core/backend.hpp, "fused kernels"): an elementwise
// chain in one kernel, a convolution's bias and activation in one pass over its output, a pool's
// gradient then an activation's gradient in place, and an optimiser rule's steps launched back to
// back. Each rounds every intermediate to the element type as the unfused kernels store it.
#include <string>

#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/formulas.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

constexpr int kChainSteps = 8;  // a longer chain runs as several kernels, in place after the first

struct ChainStep {
    int code;   // a backend::Unary, or with `binary` a backend::Binary
    int other;  // the binary step's operand in ChainArgs::others, else -1
    bool binary, value_first, other_scalar;
    double a, b;
};

struct ChainArgs {
    int count;
    ChainStep steps[kChainSteps];
    const void* others[kChainSteps];
};

template <class T> __device__ Compute<T> as_stored(Compute<T> v) { return widen(narrow<T>(v)); }

template <class T> __global__ void chain_kernel(std::int64_t n, const T* x, ChainArgs args, T* y) {
    using C = Compute<T>;
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        C v = widen(x[i]);
        for (int s = 0; s < args.count; ++s) {
            const ChainStep& st = args.steps[s];
            if (!st.binary) {
                v = unary_value(Unary(st.code), v, C(st.a), C(st.b));
            } else {
                const C o = widen(static_cast<const T*>(args.others[st.other])[st.other_scalar ? 0 : i]);
                v = st.value_first ? binary_arithmetic(Binary(st.code), v, o) : binary_arithmetic(Binary(st.code), o, v);
            }
            v = as_stored<T>(v);
        }
        y[i] = narrow<T>(v);
    }
}

template <class T>
__global__ void conv_epilogue_kernel(std::int64_t n, std::int64_t plane, std::int64_t channels, const T* bias, int act,
                                     Compute<T> a, Compute<T> b, T* y) {
    using C = Compute<T>;
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        C v = widen(y[i]);
        if (bias) v = as_stored<T>(v + widen(bias[(i / plane) % channels]));
        if (act >= 0) v = unary_value(Unary(act), v, a, b);
        y[i] = narrow<T>(v);
    }
}

}  // namespace

void elementwise_chain(int device, DType t, std::int64_t n, const backend::ElementwiseStep* steps, std::size_t count,
                       void* const* ptrs) {
    if (n <= 0 || count == 0) return;
    std::size_t others = 0;
    for (std::size_t s = 0; s < count; ++s) others += steps[s].binary ? 1 : 0;
    void* y = ptrs[1 + others];
    Context& ctx = activate(device);
    const void* in = ptrs[0];
    std::size_t next_other = 1;
    for (std::size_t first = 0; first < count; first += kChainSteps) {
        ChainArgs args{};
        args.count = int(std::min<std::size_t>(kChainSteps, count - first));
        for (int s = 0; s < args.count; ++s) {
            const backend::ElementwiseStep& e = steps[first + s];
            ChainStep& c = args.steps[s];
            c.binary = e.binary;
            c.code = e.binary ? int(e.binary_op) : int(e.unary_op);
            c.value_first = e.value_first;
            c.other_scalar = e.other_scalar;
            c.a = e.a;
            c.b = e.b;
            c.other = -1;
            if (e.binary) {
                c.other = s;
                args.others[s] = ptrs[next_other++];
            }
        }
        dispatch_floating(t, "elementwise_chain", [&](auto tag) {
            using T = decltype(tag);
            chain_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(n, static_cast<const T*>(in), args,
                                                                           static_cast<T*>(y));
        });
        FLUXION_CUDA_CHECK_LAUNCH("chain_kernel");
        in = y;
    }
}

void conv2d_epilogue(int device, DType t, const Conv2dShape* s, const void* x, const void* w, const void* bias,
                     const backend::ConvEpilogue* e, void* y) {
    conv2d(device, t, s, x, w, y);
    const std::int64_t plane = s->oh * s->ow, n = s->n * s->k * plane;
    if (n <= 0 || (!e->bias && !e->activation)) return;
    Context& ctx = activate(device);
    dispatch_floating(t, "conv2d_epilogue", [&](auto tag) {
        using T = decltype(tag);
        conv_epilogue_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
            n, plane, s->k, e->bias ? static_cast<const T*>(bias) : nullptr, e->activation ? int(e->op) : -1,
            Compute<T>(e->a), Compute<T>(e->b), static_cast<T*>(y));
    });
    FLUXION_CUDA_CHECK_LAUNCH("conv_epilogue_kernel");
}

void pool2d_backward_activation(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                                const void* gy, Unary act, void* gx) {
    pool2d_backward(device, op, t, s, x, y, gy, gx);
    unary_backward(device, act, t, s->n * s->c * s->h * s->w, x, x, gx, gx, 0, 0);
}

void optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const std::int64_t* n,
                     const OptimiserStep* const* hp, void* const* ptrs) {
    for (std::size_t i = 0; i < count; ++i) {
        void* const* p = ptrs + 5 * i;
        optimiser_step(device, rule, t, n[i], p[0], p[1], p[2], p[3], p[4], hp[i]);
    }
}

}  // namespace fluxion::cuda
