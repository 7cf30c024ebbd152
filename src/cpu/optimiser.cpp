// optimiser.cpp — one fused optimiser step over a flat parameter buffer, over many (the compiled
// steps' multi-tensor step), and over many f32 parameters from 16-bit gradients (mixed precision's),
// with PyTorch's update rules from the op registry (core/elementwise_formulas.def, FX_OPTIMISER).
#include <algorithm>
#include <cmath>
#include <string>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "core/optimiser_constants.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/fused.hpp"
#include "cpu/half_simd.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

// Whole names, so that a step builds no string unless it fails (compiled steps allocate nothing).
const char* const kKernelNames[] = {
#define FX_OPTIMISER(name, code, states, m, v, w, p) "optimiser_step " #name,
#include "core/elementwise_formulas.def"
};

void check(Optimiser rule, const void* state1, const void* state2, const void* state3, const OptimiserStep& hp) {
    const int states = optimiser_states(rule);
    if (states < 0) throw ValueError("optimiser_step: unknown rule code " + std::to_string(int(rule)));
    const char* kernel = kKernelNames[int(rule)];
    if ((states >= 1 && !state1) || (states >= 2 && !state2) || (states >= 3 && !state3))
        throw ValueError(std::string(kernel) + ": the rule needs " + std::to_string(states) +
                         " state buffer(s) of the parameters' size, but a null buffer was passed");
    if (optimiser_counts_steps(rule) && hp.t < 1)
        throw ValueError(std::string(kernel) + ": step count t = " + std::to_string(hp.t) +
                         " must start at 1 (the bias correction divides by 1 - beta^t)");
}

// Subnormal results flushed to zero and subnormal operands read as zero (MXCSR's FTZ and DAZ) on
// this thread for the guard's lifetime, as XLA's CPU kernels run. A state that decays toward zero
// (Adam's first moment for a unit whose gradient stays zero: 0.9^t, subnormal after ~800 steps)
// would otherwise cost a microcode assist per operation that touches it: Adam's step over 22,000
// elements took 320 µs with subnormal first moments against 22 µs (Intel Xeon, family 6 model
// 207), and on LeNet-5 the thread whose slice held its dead units' states took 2.5× the other's.
// Values that flush are below 2^-126 (f32) or 2^-1022 (f64), far under any step's effect on a
// parameter.
class FlushSubnormals {
public:
#if defined(__SSE__)
    FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
    ~FlushSubnormals() { _mm_setcsr(saved_); }
#endif
    FlushSubnormals(const FlushSubnormals&) = delete;
    FlushSubnormals& operator=(const FlushSubnormals&) = delete;

private:
#if defined(__SSE__)
    unsigned saved_;
#endif
};

template <class T> T fx_sqrt(T x) { return std::sqrt(x); }
template <class T> T fx_abs(T x) { return std::abs(x); }

// Each rule is one pass over the slice [begin, end) of the buffers, its formulas those of
// core/elementwise_formulas.def; the step's constants k are computed in double (optimiser_constants)
// and rounded once.
template <class T>
void step(Optimiser rule, int64_t begin, int64_t end, T* pp, const T* gp, T* s1p, T* s2p, T* s3p,
          const OptimiserConstants& k) {
    const T eta = T(k.eta), rho = T(k.rho), epsilon = T(k.epsilon), beta1 = T(k.beta1), beta2 = T(k.beta2);
    const T lower = T(k.lower), upper = T(k.upper), c1 = T(k.c1), c2 = T(k.c2), shrink = T(k.shrink);
    const T k1 = T(k.k1), k2 = T(k.k2);
    switch (rule) {
#define FX_OPTIMISER(name, code, states, new_m, new_v, new_w, new_p)     \
    case Optimiser::name:                                                \
        for (int64_t i = begin; i < end; ++i) {                          \
            const T g = gp[i], p = pp[i];                                \
            [[maybe_unused]] const T m0 = (states) >= 1 ? s1p[i] : T(0); \
            [[maybe_unused]] const T v0 = (states) >= 2 ? s2p[i] : T(0); \
            [[maybe_unused]] const T w0 = (states) >= 3 ? s3p[i] : T(0); \
            [[maybe_unused]] const T m = new_m;                          \
            [[maybe_unused]] const T v = new_v;                          \
            [[maybe_unused]] const T w = new_w;                          \
            pp[i] = new_p;                                               \
            if constexpr ((states) >= 1) s1p[i] = m;                     \
            if constexpr ((states) >= 2) s2p[i] = v;                     \
            if constexpr ((states) >= 3) s3p[i] = w;                     \
        }                                                                \
        return;
#include "core/elementwise_formulas.def"
    }
    (void)eta, (void)rho, (void)epsilon, (void)beta1, (void)beta2, (void)lower, (void)upper, (void)c1, (void)c2,
        (void)shrink, (void)k1, (void)k2;
}

}  // namespace

void optimiser_step(int device, Optimiser rule, DType t, int64_t n, void* param, const void* grad, void* state1,
                    void* state2, void* state3, const OptimiserStep* hp) {
    check(rule, state1, state2, state3, *hp);
    const char* kernel = kKernelNames[int(rule)];
    dispatch_float(t, kernel, [&](auto tag) {
        using T = decltype(tag);
        T* p = static_cast<T*>(param);
        const T* g = static_cast<const T*>(grad);
        T* s1 = static_cast<T*>(state1);
        T* s2 = static_cast<T*>(state2);
        T* s3 = static_cast<T*>(state3);
        const OptimiserConstants k = optimiser_constants(rule, *hp);
        parallel_for(n, team_for(n), [&](int64_t begin, int64_t end) {
            const FlushSubnormals flush;
            step(rule, begin, end, p, g, s1, s2, s3, k);
        });
    });
}

// Each thread takes a slice of the tensors' elements laid end to end, and runs `step` on the part
// of every tensor that falls in its slice: each element sees the arithmetic of its own tensor's call.
void optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const int64_t* n,
                     const OptimiserStep* const* hp, void* const* ptrs) {
    if (t != DType::f32 && t != DType::f64) {  // f16, bf16: each through the widening step
        for (std::size_t i = 0; i < count; ++i) {
            void* const* p = ptrs + 5 * i;
            widen::optimiser_step(device, rule, t, n[i], p[0], p[1], p[2], p[3], p[4], hp[i]);
        }
        return;
    }
    int64_t total = 0;
    for (std::size_t i = 0; i < count; ++i) {
        check(rule, ptrs[5 * i + 2], ptrs[5 * i + 3], ptrs[5 * i + 4], *hp[i]);
        total += n[i];
    }
    dispatch_float(t, kKernelNames[int(rule)], [&](auto tag) {
        using T = decltype(tag);
        parallel_for(total, team_for(total), [&](int64_t begin, int64_t end) {
            const FlushSubnormals flush;
            for_each_part(count, n, begin, end, [&](std::size_t i, int64_t lo, int64_t hi) {
                void* const* p = ptrs + 5 * i;
                step(rule, lo, hi, static_cast<T*>(p[0]), static_cast<const T*>(p[1]), static_cast<T*>(p[2]),
                     static_cast<T*>(p[3]), static_cast<T*>(p[4]), optimiser_constants(rule, *hp[i]));
            });
        });
    });
}

namespace {

// Elements [lo, hi) of one tensor of mixed_optimiser_steps, in chunks that stay in the L1 cache: the
// gradient widened (and divided) into f32 on the stack, the f32 rule's pass over the chunk, the
// updated parameters rounded into the copy.
template <class E>
void mixed_slice(Optimiser rule, int64_t lo, int64_t hi, void* const* p, const OptimiserConstants& k, float divisor) {
    constexpr int64_t kChunk = 1024;
    alignas(64) float g[kChunk];
    auto* param = static_cast<float*>(p[0]);
    const auto* grad = static_cast<const E*>(p[1]);
    auto* s1 = static_cast<float*>(p[2]);
    auto* s2 = static_cast<float*>(p[3]);
    auto* s3 = static_cast<float*>(p[4]);
    auto* copy = static_cast<E*>(p[5]);
    for (int64_t c = lo; c < hi; c += kChunk) {
        const int64_t m = std::min(kChunk, hi - c);
        cells_to_f32(grad + c, g, m);
        if (divisor != 1.0f)
            for (int64_t i = 0; i < m; ++i) g[i] /= divisor;
        step<float>(rule, 0, m, param + c, g, s1 ? s1 + c : nullptr, s2 ? s2 + c : nullptr, s3 ? s3 + c : nullptr, k);
        f32_to_cells(param + c, copy + c, m);
    }
}

}  // namespace

// As optimiser_steps, each thread on its slice of the tensors laid end to end.
void mixed_optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const int64_t* n,
                           const OptimiserStep* const* hp, double divisor, void* const* ptrs) {
    check_mixed_gradients(t);
    int64_t total = 0;
    for (std::size_t i = 0; i < count; ++i) {
        check(rule, ptrs[6 * i + 2], ptrs[6 * i + 3], ptrs[6 * i + 4], *hp[i]);
        total += n[i];
    }
    const auto d = float(divisor);
    dispatch_float_or_half(t, "mixed_optimiser_steps", [&](auto tag) {
        using E = decltype(tag);
        if constexpr (is_half_v<E>) {
            parallel_for(total, team_for(total), [&](int64_t begin, int64_t end) {
                const FlushSubnormals flush;
                for_each_part(count, n, begin, end, [&](std::size_t i, int64_t lo, int64_t hi) {
                    mixed_slice<E>(rule, lo, hi, ptrs + 6 * i, optimiser_constants(rule, *hp[i]), d);
                });
            });
        }
    });
}

}  // namespace fluxion::backend::cpu
