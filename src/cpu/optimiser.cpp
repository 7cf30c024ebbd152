// One fused optimiser step over a flat parameter buffer, with PyTorch's update rules
// (p: parameter, g: gradient, s1/s2: state buffers, t: 1-based step):
//   descent   p -= eta g
//   momentum  s1 = rho s1 + g;                 p -= eta s1
//   nesterov  s1 = rho s1 + g;                 p -= eta (g + rho s1)
//   rmsprop   s1 = rho s1 + (1 - rho) g^2;     p -= eta g / (sqrt(s1) + epsilon)
//   adam      s1 = beta1 s1 + (1 - beta1) g;   s2 = beta2 s2 + (1 - beta2) g^2;
//             p -= eta (s1 / (1 - beta1^t)) / (sqrt(s2 / (1 - beta2^t)) + epsilon)
//   adamw     p *= 1 - eta decay, then adam
#include <algorithm>
#include <cmath>
#include <string>

#include "cpu/dispatch.hpp"
#include "cpu/fused.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

// Whole names, so that a step builds no string unless it fails (compiled steps allocate nothing).
const char* const kKernelNames[] = {"optimiser_step descent", "optimiser_step momentum", "optimiser_step nesterov",
                                    "optimiser_step rmsprop",  "optimiser_step adam",     "optimiser_step adamw"};

int states_needed(Optimiser rule) {
    switch (rule) {
        case Optimiser::descent: return 0;
        case Optimiser::momentum:
        case Optimiser::nesterov:
        case Optimiser::rmsprop: return 1;
        case Optimiser::adam:
        case Optimiser::adamw: return 2;
    }
    throw ValueError("optimiser_step: unknown rule code " + std::to_string(int(rule)));
}

void check(Optimiser rule, const void* state1, const void* state2, const OptimiserStep& hp) {
    const int states = states_needed(rule);
    const char* kernel = kKernelNames[int(rule)];
    if ((states >= 1 && !state1) || (states == 2 && !state2))
        throw ValueError(std::string(kernel) + ": the rule needs " + std::to_string(states) +
                         " state buffer(s) of the parameters' size, but a null buffer was passed");
    if ((rule == Optimiser::adam || rule == Optimiser::adamw) && hp.t < 1)
        throw ValueError(std::string(kernel) + ": step count t = " + std::to_string(hp.t) +
                         " must start at 1 (Adam's bias correction divides by 1 - beta^t)");
}

// Each rule is one pass over the slice [begin, end) of the buffers.
template <class T>
void step(Optimiser rule, int64_t begin, int64_t end, T* p, const T* g, T* s1, T* s2, const OptimiserStep& hp) {
    const T eta = T(hp.eta), rho = T(hp.rho), epsilon = T(hp.epsilon);
    switch (rule) {
        case Optimiser::descent:
            for (int64_t i = begin; i < end; ++i) p[i] -= eta * g[i];
            return;
        case Optimiser::momentum:
            for (int64_t i = begin; i < end; ++i) {
                s1[i] = rho * s1[i] + g[i];
                p[i] -= eta * s1[i];
            }
            return;
        case Optimiser::nesterov:
            for (int64_t i = begin; i < end; ++i) {
                s1[i] = rho * s1[i] + g[i];
                p[i] -= eta * (g[i] + rho * s1[i]);
            }
            return;
        case Optimiser::rmsprop:
            for (int64_t i = begin; i < end; ++i) {
                s1[i] = rho * s1[i] + (T(1) - rho) * g[i] * g[i];
                p[i] -= eta * g[i] / (std::sqrt(s1[i]) + epsilon);
            }
            return;
        case Optimiser::adam:
        case Optimiser::adamw: {
            const T beta1 = T(hp.beta1), beta2 = T(hp.beta2);
            const T correction1 = T(1 - std::pow(hp.beta1, double(hp.t)));
            const T correction2 = T(1 - std::pow(hp.beta2, double(hp.t)));
            const T shrink = rule == Optimiser::adamw ? T(1 - hp.eta * hp.decay) : T(1);
            for (int64_t i = begin; i < end; ++i) {
                s1[i] = beta1 * s1[i] + (T(1) - beta1) * g[i];
                s2[i] = beta2 * s2[i] + (T(1) - beta2) * g[i] * g[i];
                p[i] = p[i] * shrink - eta * (s1[i] / correction1) / (std::sqrt(s2[i] / correction2) + epsilon);
            }
            return;
        }
    }
}

}  // namespace

void optimiser_step(int device, Optimiser rule, DType t, int64_t n, void* param, const void* grad, void* state1,
                    void* state2, const OptimiserStep* hp) {
    check(rule, state1, state2, *hp);
    const char* kernel = kKernelNames[int(rule)];
    dispatch_float(t, kernel, [&](auto tag) {
        using T = decltype(tag);
        T* p = static_cast<T*>(param);
        const T* g = static_cast<const T*>(grad);
        T* s1 = static_cast<T*>(state1);
        T* s2 = static_cast<T*>(state2);
        parallel_for(n, n > kParallelMin, [&](int64_t begin, int64_t end) { step(rule, begin, end, p, g, s1, s2, *hp); });
    });
}

// Each thread takes a slice of the tensors' elements laid end to end, and runs `step` on the part
// of every tensor that falls in its slice: each element sees the arithmetic of its own tensor's call.
void optimiser_steps(Optimiser rule, DType t, std::size_t count, const int64_t* n, const OptimiserStep* const* hp,
                     void* const* ptrs) {
    int64_t total = 0;
    for (std::size_t i = 0; i < count; ++i) {
        check(rule, ptrs[4 * i + 2], ptrs[4 * i + 3], *hp[i]);
        total += n[i];
    }
    dispatch_float(t, kKernelNames[int(rule)], [&](auto tag) {
        using T = decltype(tag);
        parallel_for(total, total > kParallelMin, [&](int64_t begin, int64_t end) {
            int64_t first = 0;  // of tensor i in the whole
            for (std::size_t i = 0; i < count && first < end; first += n[i], ++i) {
                const int64_t lo = std::max(begin, first) - first, hi = std::min(end, first + n[i]) - first;
                if (lo >= hi) continue;
                void* const* p = ptrs + 4 * i;
                step(rule, lo, hi, static_cast<T*>(p[0]), static_cast<const T*>(p[1]), static_cast<T*>(p[2]),
                     static_cast<T*>(p[3]), *hp[i]);
            }
        });
    });
}

}  // namespace fluxion::backend::cpu
