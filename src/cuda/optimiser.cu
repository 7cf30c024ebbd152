// optimiser.cu — one fused update of n parameters, with PyTorch's formulas:
//   descent   p -= eta g
//   momentum  s1 = rho s1 + g;                 p -= eta s1
//   nesterov  s1 = rho s1 + g;                 p -= eta (g + rho s1)
//   rmsprop   s1 = rho s1 + (1 - rho) g^2;     p -= eta g / (sqrt(s1) + eps)
//   adam      s1 = b1 s1 + (1 - b1) g;  s2 = b2 s2 + (1 - b2) g^2;
//             p -= eta (s1 / (1 - b1^t)) / (sqrt(s2 / (1 - b2^t)) + eps)
//   adamw     p *= 1 - eta decay, then adam
// f16 and bf16 parameters and state stay in their type, as on the CPU; the update is computed in f32
// and each result rounded once (dtype_dispatch.cuh).
#include <cmath>
#include <string>

#include "cuda/allocator.hpp"
#include "cuda/capture.hpp"
#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

const char* const kRuleNames[] = {"descent", "momentum", "nesterov", "rmsprop", "adam", "adamw"};

// The state buffers a rule reads and writes.
int states_needed(Optimiser rule) {
    switch (rule) {
        case Optimiser::descent: return 0;
        case Optimiser::momentum:
        case Optimiser::nesterov:
        case Optimiser::rmsprop: return 1;
        case Optimiser::adam:
        case Optimiser::adamw: return 2;
    }
    throw ValueError("optimiser_step: unknown rule code " + std::to_string(static_cast<int>(rule)));
}

template <class T> struct Hyper {
    T eta, rho, beta1, beta2, epsilon, decay;
    T correction1, correction2;  // 1 - beta1^t, 1 - beta2^t
};

template <class T> Hyper<T> hyper(const OptimiserStep& hp) {
    const auto t_steps = static_cast<double>(hp.t);
    return {T(hp.eta),   T(hp.rho),     T(hp.beta1), T(hp.beta2), T(hp.epsilon), T(hp.decay),
            T(1 - std::pow(hp.beta1, t_steps)), T(1 - std::pow(hp.beta2, t_steps))};
}

// The hyper-parameters come by value, or, in a CUDA graph, from device memory (`from`) that an
// upload captured before the kernel refills at every launch (capture.hpp).
template <class T, class C = Compute<T>>
__global__ void optimiser_kernel(Optimiser rule, std::int64_t n, T* p, const T* g, T* s1, T* s2, Hyper<C> by_value,
                                 const Hyper<C>* from) {
    const Hyper<C> h = from ? *from : by_value;
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        const C grad = widen(g[i]);
        C param = widen(p[i]), m = 0, v = 0;
        switch (rule) {
            case Optimiser::descent: param -= h.eta * grad; break;
            case Optimiser::momentum:
                m = h.rho * widen(s1[i]) + grad;
                param -= h.eta * m;
                break;
            case Optimiser::nesterov:
                m = h.rho * widen(s1[i]) + grad;
                param -= h.eta * (grad + h.rho * m);
                break;
            case Optimiser::rmsprop:
                m = h.rho * widen(s1[i]) + (C(1) - h.rho) * grad * grad;
                param -= h.eta * grad / (sqrt(m) + h.epsilon);
                break;
            case Optimiser::adamw: param *= C(1) - h.eta * h.decay; [[fallthrough]];
            case Optimiser::adam:
                m = h.beta1 * widen(s1[i]) + (C(1) - h.beta1) * grad;
                v = h.beta2 * widen(s2[i]) + (C(1) - h.beta2) * grad * grad;
                param -= h.eta * (m / h.correction1) / (sqrt(v / h.correction2) + h.epsilon);
                s2[i] = narrow<T>(v);
                break;
        }
        if (rule != Optimiser::descent) s1[i] = narrow<T>(m);
        p[i] = narrow<T>(param);
    }
}

}  // namespace

void optimiser_step(int device, Optimiser rule, DType t, std::int64_t n, void* param, const void* grad,
                    void* state1, void* state2, const OptimiserStep* hp) {
    const int states = states_needed(rule);
    const std::string op = std::string("optimiser_step ") + kRuleNames[static_cast<int>(rule)];
    if ((states >= 1 && !state1) || (states == 2 && !state2))
        throw ValueError(op + ": the rule needs " + std::to_string(states) +
                         " state buffer(s) of the parameters' size, but a null buffer was passed");
    if ((rule == Optimiser::adam || rule == Optimiser::adamw) && hp->t < 1)
        throw ValueError(op + ": step count t = " + std::to_string(hp->t) +
                         " must start at 1 (Adam's bias correction divides by 1 - beta^t)");
    if (n <= 0) return;
    Context& ctx = activate(device);
    Recording* recording = capturing(device);
    dispatch_floating(t, op.c_str(), [&](auto tag) {
        using T = decltype(tag);
        using C = Compute<T>;
        const Hyper<C> h = hyper<C>(*hp);
        Hyper<C>* from = nullptr;
        if (recording) {  // the step count and learning rate change between launches: read *hp again each time
            auto* host = static_cast<Hyper<C>*>(recording_pinned(*recording, sizeof(Hyper<C>)));
            *host = h;
            recording->kept.reserve(recording->kept.size() + 1);
            from = static_cast<Hyper<C>*>(allocate(device, sizeof(Hyper<C>)));
            recording->kept.push_back(from);
            FLUXION_CUDA_CHECK(cudaMemcpyAsync(from, host, sizeof(Hyper<C>), cudaMemcpyHostToDevice, ctx.stream));
            recording->on_run.push_back([host, hp] { *host = hyper<C>(*hp); });
        }
        optimiser_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
            rule, n, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(state1),
            static_cast<T*>(state2), h, from);
    });
    FLUXION_CUDA_CHECK_LAUNCH("optimiser_kernel");
}

}  // namespace fluxion::cuda
