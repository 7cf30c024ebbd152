// optimiser.cu — one fused update of n parameters, with PyTorch's rules from the op registry
// (core/elementwise_formulas.def, FX_OPTIMISER). f16 and bf16 parameters and state stay in their
// type, as on the CPU; the update is computed in f32 and each result rounded once
// (dtype_dispatch.cuh). Mixed precision's update (optimiser_step_mixed) is the same kernel on f32
// parameters and state with 16-bit gradients, each widened and divided by the loss scale, and the
// updated parameters rounded into the 16-bit copy.
#include <cmath>
#include <string>

#include "core/optimiser_constants.hpp"
#include "cuda/allocator.hpp"
#include "cuda/capture.hpp"
#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

// The step's constants (core/optimiser_constants.hpp), rounded once to the compute type.
template <class T> struct Hyper { T eta, rho, beta1, beta2, epsilon, lower, upper, c1, c2, shrink, k1, k2; };

template <class T> Hyper<T> hyper(Optimiser rule, const OptimiserStep& hp) {
    const backend::OptimiserConstants k = backend::optimiser_constants(rule, hp);
    return {T(k.eta),   T(k.rho), T(k.beta1), T(k.beta2),  T(k.epsilon), T(k.lower),
            T(k.upper), T(k.c1),  T(k.c2),    T(k.shrink), T(k.k1),      T(k.k2)};
}

template <class T> __device__ T fx_sqrt(T x) { return sqrt(x); }
template <class T> __device__ T fx_abs(T x) { return fabs(x); }

// The hyper-parameters come by value, or, in a CUDA graph, from device memory (`from`) that an
// upload captured before the kernel refills at every launch (capture.hpp). The rules' formulas are
// core/elementwise_formulas.def's. Gradients of type G (S, or 16-bit ones for f32 parameters)
// are divided by `divisor` unless it is 1; where `copy` is not null, each updated parameter is
// rounded into it.
template <class S, class G, class C = Compute<S>>
__global__ void optimiser_kernel(Optimiser rule, std::int64_t n, S* pp, const G* gp, S* s1p, S* s2p, S* s3p,
                                 G* copy, C divisor, Hyper<C> by_value, const Hyper<C>* from) {
    using T = C;  // the formulas' T: S's compute type (f16 and bf16 are stored, not computed in)
    const Hyper<C> h = from ? *from : by_value;
    const C eta = h.eta, rho = h.rho, beta1 = h.beta1, beta2 = h.beta2, epsilon = h.epsilon, lower = h.lower,
            upper = h.upper, c1 = h.c1, c2 = h.c2, shrink = h.shrink, k1 = h.k1, k2 = h.k2;
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        C g = C(widen(gp[i]));
        if (divisor != C(1)) g = g / divisor;
        const C p = widen(pp[i]);
        switch (rule) {
#define FX_OPTIMISER(name, code, states, new_m, new_v, new_w, new_p) \
    case Optimiser::name: {                                           \
        const C m0 = (states) >= 1 ? C(widen(s1p[i])) : C(0);        \
        const C v0 = (states) >= 2 ? C(widen(s2p[i])) : C(0);        \
        const C w0 = (states) >= 3 ? C(widen(s3p[i])) : C(0);        \
        const C m = new_m;                                            \
        const C v = new_v;                                            \
        const C w = new_w;                                            \
        const S stored = narrow<S>(new_p);                            \
        pp[i] = stored;                                               \
        if (copy) copy[i] = narrow<G>(widen(stored));                 \
        if ((states) >= 1) s1p[i] = narrow<S>(m);                     \
        if ((states) >= 2) s2p[i] = narrow<S>(v);                     \
        if ((states) >= 3) s3p[i] = narrow<S>(w);                     \
        (void)m0, (void)v0, (void)w0, (void)m, (void)v, (void)w;      \
        break;                                                        \
    }
#include "core/elementwise_formulas.def"
        }
    }
    (void)eta, (void)rho, (void)beta1, (void)beta2, (void)epsilon, (void)lower, (void)upper, (void)c1, (void)c2,
        (void)shrink, (void)k1, (void)k2;
}

// One launch over n parameters of type S whose gradients (and copy, if any) are of type G.
template <class S, class G>
void launch_step(int device, Optimiser rule, std::int64_t n, void* param, const void* grad, void* state1,
                 void* state2, void* state3, void* copy, double divisor, const OptimiserStep* hp) {
    using C = Compute<S>;
    Context& ctx = activate(device);
    Recording* recording = capturing(device);
    const Hyper<C> h = hyper<C>(rule, *hp);
    Hyper<C>* from = nullptr;
    if (recording) {  // the step count and learning rate change between launches: read *hp again each time
        auto* host = static_cast<Hyper<C>*>(recording_pinned(*recording, sizeof(Hyper<C>)));
        *host = h;
        recording->kept.reserve(recording->kept.size() + 1);
        from = static_cast<Hyper<C>*>(allocate(device, sizeof(Hyper<C>)));
        recording->kept.push_back(from);
        FLUXION_CUDA_CHECK(cudaMemcpyAsync(from, host, sizeof(Hyper<C>), cudaMemcpyHostToDevice, ctx.stream));
        recording->on_run.push_back([host, rule, hp] { *host = hyper<C>(rule, *hp); });
    }
    optimiser_kernel<S, G><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
        rule, n, static_cast<S*>(param), static_cast<const G*>(grad), static_cast<S*>(state1),
        static_cast<S*>(state2), static_cast<S*>(state3), static_cast<G*>(copy), C(divisor), h, from);
    FLUXION_CUDA_CHECK_LAUNCH("optimiser_kernel");
}

// What optimiser_step and optimiser_step_mixed check before a launch: the op's name.
std::string checked(Optimiser rule, void* state1, void* state2, void* state3, const OptimiserStep* hp) {
    const int states = backend::optimiser_states(rule);
    if (states < 0) throw ValueError("optimiser_step: unknown rule code " + std::to_string(static_cast<int>(rule)));
    std::string op = std::string("optimiser_step ") + backend::optimiser_name(rule);
    if ((states >= 1 && !state1) || (states >= 2 && !state2) || (states >= 3 && !state3))
        throw ValueError(op + ": the rule needs " + std::to_string(states) +
                         " state buffer(s) of the parameters' size, but a null buffer was passed");
    if (backend::optimiser_counts_steps(rule) && hp->t < 1)
        throw ValueError(op + ": step count t = " + std::to_string(hp->t) +
                         " must start at 1 (the bias correction divides by 1 - beta^t)");
    return op;
}

}  // namespace

void optimiser_step(int device, Optimiser rule, DType t, std::int64_t n, void* param, const void* grad,
                    void* state1, void* state2, void* state3, const OptimiserStep* hp) {
    const std::string op = checked(rule, state1, state2, state3, hp);
    if (n <= 0) return;
    dispatch_floating(t, op.c_str(), [&](auto tag) {
        using T = decltype(tag);
        launch_step<T, T>(device, rule, n, param, grad, state1, state2, state3, nullptr, 1.0, hp);
    });
}

void optimiser_step_mixed(int device, Optimiser rule, DType t, std::int64_t n, void* param, const void* grad,
                          void* state1, void* state2, void* state3, void* copy, double divisor,
                          const OptimiserStep* hp) {
    const std::string op = checked(rule, state1, state2, state3, hp);
    backend::check_mixed_gradients(t);
    if (n <= 0) return;
    if (t == DType::f16) launch_step<float, __half>(device, rule, n, param, grad, state1, state2, state3, copy, divisor, hp);
    else launch_step<float, __nv_bfloat16>(device, rule, n, param, grad, state1, state2, state3, copy, divisor, hp);
}

}  // namespace fluxion::cuda
