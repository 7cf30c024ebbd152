// recurrent.cpp — the LSTM cell's gate arithmetic for one time step, forward and backward, each one
// pass over the step's rows (src/core/layers/lstm_sequence.cpp runs them between the products).
// Composed from separate ops the same step takes about ten passes forward and twenty backward, each
// its own kernel call; here every value is read once and stays in registers.
#include <cmath>

#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "cpu/unary_formulas.hpp"
#include "fluxion/error.hpp"

namespace fluxion::backend::cpu {
namespace {

// The op registry's sigmoid and tanh (core/elementwise_formulas.def), the unary kernels' own.
template <class T> [[gnu::always_inline]] inline T sigmoid(T x) { return unary_value<Unary::sigmoid>(x, T(0), T(0)); }
template <class T> [[gnu::always_inline]] inline T tanh_of(T x) { return unary_value<Unary::tanh>(x, T(0), T(0)); }

// Rows share the threads when a step has enough of them: each element costs four exponentials.
int64_t team(int64_t n, int64_t h) { return n > 1 ? team_for(n * h * 8) : 1; }

template <class T>
void cell(int64_t n, int64_t h, T* gates, int64_t ld_gates, const T* c_prev, T* c, T* h_out, int64_t ld_h) {
    parallel_for(n, team(n, h), [=](int64_t first, int64_t last) {
        for (int64_t r = first; r < last; ++r) {
            T* gi = gates + r * ld_gates;
            T *gf = gi + h, *gg = gi + 2 * h, *go = gi + 3 * h;
            const T* cp = c_prev + r * h;
            T* cr = c + r * h;
            T* hr = h_out + r * ld_h;
#pragma omp simd
            for (int64_t j = 0; j < h; ++j) {
                const T i = sigmoid(gi[j]), f = sigmoid(gf[j]), g = tanh_of(gg[j]), o = sigmoid(go[j]);
                const T cj = f * cp[j] + i * g;
                gi[j] = i, gf[j] = f, gg[j] = g, go[j] = o;
                cr[j] = cj;
                hr[j] = o * tanh_of(cj);
            }
        }
    });
}

template <class T>
void cell_backward(int64_t n, int64_t h, const T* gates, int64_t ld_gates, const T* c_prev, const T* c, const T* gh,
                   int64_t ld_gh, const T* gh_next, T* gc, T* dgates) {
    parallel_for(n, team(n, h), [=](int64_t first, int64_t last) {
        for (int64_t r = first; r < last; ++r) {
            const T* gi = gates + r * ld_gates;
            const T *gf = gi + h, *gg = gi + 2 * h, *go = gi + 3 * h;
            const T *cp = c_prev + r * h, *cr = c + r * h, *ghr = gh + r * ld_gh;
            const T* ghn = gh_next ? gh_next + r * h : nullptr;
            T* gcr = gc + r * h;
            T* di = dgates + r * ld_gates;
            T *df = di + h, *dg = di + 2 * h, *dout = di + 3 * h;
#pragma omp simd
            for (int64_t j = 0; j < h; ++j) {
                const T i = gi[j], f = gf[j], g = gg[j], o = go[j];
                const T dh = ghn ? ghr[j] + ghn[j] : ghr[j];
                const T tc = tanh_of(cr[j]);
                const T dc = gcr[j] + dh * o * (T(1) - tc * tc);
                di[j] = dc * g * i * (T(1) - i);
                df[j] = dc * cp[j] * f * (T(1) - f);
                dg[j] = dc * i * (T(1) - g * g);
                dout[j] = dh * tc * o * (T(1) - o);
                gcr[j] = dc * f;
            }
        }
    });
}

void require_f32_or_f64(DType t, const char* op) {
    if (t != DType::f32 && t != DType::f64)
        throw DTypeError(std::string(op) + ": the CPU kernel takes f32 and f64, got " + name(t));
}

}  // namespace

void lstm_cell(int, DType t, int64_t n, int64_t h, void* gates, int64_t ld_gates, const void* c_prev, void* c,
               void* h_out, int64_t ld_h) {
    require_f32_or_f64(t, "lstm_cell");
    if (t == DType::f32)
        cell(n, h, static_cast<float*>(gates), ld_gates, static_cast<const float*>(c_prev), static_cast<float*>(c),
             static_cast<float*>(h_out), ld_h);
    else
        cell(n, h, static_cast<double*>(gates), ld_gates, static_cast<const double*>(c_prev),
             static_cast<double*>(c), static_cast<double*>(h_out), ld_h);
}

void lstm_cell_backward(int, DType t, int64_t n, int64_t h, const void* gates, int64_t ld_gates, const void* c_prev,
                        const void* c, const void* gh, int64_t ld_gh, const void* gh_next, void* gc, void* dgates) {
    require_f32_or_f64(t, "lstm_cell_backward");
    if (t == DType::f32)
        cell_backward(n, h, static_cast<const float*>(gates), ld_gates, static_cast<const float*>(c_prev),
                      static_cast<const float*>(c), static_cast<const float*>(gh), ld_gh,
                      static_cast<const float*>(gh_next), static_cast<float*>(gc), static_cast<float*>(dgates));
    else
        cell_backward(n, h, static_cast<const double*>(gates), ld_gates, static_cast<const double*>(c_prev),
                      static_cast<const double*>(c), static_cast<const double*>(gh), ld_gh,
                      static_cast<const double*>(gh_next), static_cast<double*>(gc), static_cast<double*>(dgates));
}

}  // namespace fluxion::backend::cpu
