// recurrent.cu — the LSTM cell's gate arithmetic for one time step, forward and backward, one
// thread per (row, unit) and every value read once, as src/cpu/recurrent.cpp does on the CPU:
// without it an LSTM step on CUDA is about ten kernels forward and twenty backward. sigmoid and
// tanh are the op registry's (formulas.cuh), as CUDA's unary kernels compute them.
#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/formulas.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"

namespace fluxion::cuda {

namespace {

// gates {n, 4h} at row stride ld_gates (i, f, g, o), replaced by their activations.
template <class T>
__global__ void cell_kernel(std::int64_t n, std::int64_t h, T* gates, std::int64_t ld_gates, const T* c_prev, T* c,
                            T* h_out, std::int64_t ld_h) {
    for (std::int64_t k = first_index(); k < n * h; k += index_step()) {
        const std::int64_t r = k / h, j = k % h;
        T* gi = gates + r * ld_gates;
        const T i = fx_sigmoid(gi[j]), f = fx_sigmoid(gi[h + j]), g = fx_tanh(gi[2 * h + j]),
                o = fx_sigmoid(gi[3 * h + j]);
        const T cj = f * c_prev[k] + i * g;
        gi[j] = i, gi[h + j] = f, gi[2 * h + j] = g, gi[3 * h + j] = o;
        c[k] = cj;
        h_out[r * ld_h + j] = o * fx_tanh(cj);
    }
}

// Reads all of a unit's values before writing any, so dgates may be gates itself.
template <class T>
__global__ void cell_backward_kernel(std::int64_t n, std::int64_t h, const T* gates, std::int64_t ld_gates,
                                     const T* c_prev, const T* c, const T* gh, std::int64_t ld_gh, const T* gh_next,
                                     T* gc, T* dgates) {
    for (std::int64_t k = first_index(); k < n * h; k += index_step()) {
        const std::int64_t r = k / h, j = k % h;
        const T* gi = gates + r * ld_gates;
        const T i = gi[j], f = gi[h + j], g = gi[2 * h + j], o = gi[3 * h + j];
        const T dh = gh_next ? gh[r * ld_gh + j] + gh_next[k] : gh[r * ld_gh + j];
        const T tc = fx_tanh(c[k]);
        const T dc = gc[k] + dh * o * (T(1) - tc * tc);
        const T cp = c_prev[k];
        T* di = dgates + r * ld_gates;
        di[j] = dc * g * i * (T(1) - i);
        di[h + j] = dc * cp * f * (T(1) - f);
        di[2 * h + j] = dc * i * (T(1) - g * g);
        di[3 * h + j] = dh * tc * o * (T(1) - o);
        gc[k] = dc * f;
    }
}

}  // namespace

void lstm_cell(int device, DType t, std::int64_t n, std::int64_t h, void* gates, std::int64_t ld_gates,
               const void* c_prev, void* c, void* h_out, std::int64_t ld_h) {
    dispatch_f32_f64(t, "lstm_cell", [&](auto tag) {
        using T = decltype(tag);
        if (n <= 0 || h <= 0) return;
        Context& ctx = activate(device);
        cell_kernel<T><<<grid_for(ctx, n * h), kThreads, 0, ctx.stream>>>(
            n, h, static_cast<T*>(gates), ld_gates, static_cast<const T*>(c_prev), static_cast<T*>(c),
            static_cast<T*>(h_out), ld_h);
        FLUXION_CUDA_CHECK_LAUNCH("lstm_cell kernel");
    });
}

void lstm_cell_backward(int device, DType t, std::int64_t n, std::int64_t h, const void* gates, std::int64_t ld_gates,
                        const void* c_prev, const void* c, const void* gh, std::int64_t ld_gh, const void* gh_next,
                        void* gc, void* dgates) {
    dispatch_f32_f64(t, "lstm_cell_backward", [&](auto tag) {
        using T = decltype(tag);
        if (n <= 0 || h <= 0) return;
        Context& ctx = activate(device);
        cell_backward_kernel<T><<<grid_for(ctx, n * h), kThreads, 0, ctx.stream>>>(
            n, h, static_cast<const T*>(gates), ld_gates, static_cast<const T*>(c_prev), static_cast<const T*>(c),
            static_cast<const T*>(gh), ld_gh, static_cast<const T*>(gh_next), static_cast<T*>(gc),
            static_cast<T*>(dgates));
        FLUXION_CUDA_CHECK_LAUNCH("lstm_cell_backward kernel");
    });
}

}  // namespace fluxion::cuda
