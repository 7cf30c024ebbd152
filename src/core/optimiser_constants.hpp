// optimiser_constants.hpp — what every backend's optimiser_step needs besides the formulas
// (core/elementwise_formulas.def, FX_OPTIMISER): the state buffers each rule keeps, and the
// step's constants, computed here in double from the hyper-parameters and the step count, so that
// a compiled step that advances t gets them right on every replay. Header-only: the CUDA and
// Vulkan plugins include it too.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "core/backend.hpp"
#include "fluxion/error.hpp"

namespace fluxion::backend {

// The rule's name ("adam") and the state buffers it reads and writes (0 to 3); -1 when the code
// is not a rule.
// clang-format off
inline const char* optimiser_name(Optimiser rule) {
    switch (rule) {
#define FX_OPTIMISER(name, code, states, m, v, w, p) case Optimiser::name: return #name;
#include "core/elementwise_formulas.def"
    }
    return nullptr;
}
inline int optimiser_states(Optimiser rule) {
    switch (rule) {
#define FX_OPTIMISER(name, code, states, m, v, w, p) case Optimiser::name: return states;
#include "core/elementwise_formulas.def"
    }
    return -1;
}
// clang-format on

// The rules that divide by 1 - β^t or otherwise read the step count, which starts at 1.
inline bool optimiser_counts_steps(Optimiser rule) {
    switch (rule) {
        case Optimiser::adam:
        case Optimiser::adamw:
        case Optimiser::adamax:
        case Optimiser::nadam:
        case Optimiser::radam:
        case Optimiser::adabelief:
        case Optimiser::amsgrad:
        case Optimiser::oadam: return true;
        default: return false;
    }
}

// mixed_optimiser_steps' gradients are f16 or bf16 (the parameters and state are f32); every
// backend checks it before it updates anything.
inline void check_mixed_gradients(DType t) {
    if (t != DType::f16 && t != DType::bf16)
        throw DTypeError(std::string("mixed_optimiser_steps: the gradients are ") + name(t) +
                         "; it takes f16 or bf16 (the parameters and state are f32)");
}

// The constants the formulas read (names as there).
struct OptimiserConstants {
    double eta, rho, beta1, beta2, epsilon, lower, upper;
    double c1, c2;  // 1 - β1^t, 1 - β2^t
    double shrink;  // 1 - η λ (AdamW)
    double k1, k2;  // a rule's own: see the formulas
};

namespace detail {
// NAdam's μ_t = β1 (1 - ½ q^t) with q = 0.96^ψ, and the product μ_1 ⋯ μ_t in closed form, so that
// it needs no state: log ∏ (1 - ½ q^i) = -Σ_k (½^k / k) Σ_i q^(ik), a geometric sum in i and a
// series in k whose terms shrink by at least half (60 terms reach double's precision).
inline double nadam_mu(double beta1, double psi, double t) { return beta1 * (1 - 0.5 * std::pow(0.96, t * psi)); }
inline double nadam_mu_product(double beta1, double psi, double t) {
    const double log_q = psi * std::log(0.96);
    double log_product = 0, half_k = 1;
    for (int k = 1; k <= 60; ++k) {
        half_k *= 0.5;
        const double sum_i = log_q == 0 ? t : std::exp(k * log_q) * std::expm1(k * t * log_q) / std::expm1(k * log_q);
        log_product -= half_k / k * sum_i;
    }
    return std::exp(t * std::log(beta1) + log_product);
}
}  // namespace detail

inline OptimiserConstants optimiser_constants(Optimiser rule, const OptimiserStep& hp) {
    const double t = double(hp.t);
    OptimiserConstants k{hp.eta, hp.rho, hp.beta1, hp.beta2, hp.epsilon, hp.lower, hp.upper, 1, 1, 1, 0, 0};
    if (optimiser_counts_steps(rule)) k.c1 = 1 - std::pow(hp.beta1, t), k.c2 = 1 - std::pow(hp.beta2, t);
    switch (rule) {
        case Optimiser::adamax: k.k1 = hp.eta / k.c1; break;
        case Optimiser::adamw: k.shrink = 1 - hp.eta * hp.decay; [[fallthrough]];
        case Optimiser::adam:
        case Optimiser::amsgrad: k.k1 = hp.eta / k.c1, k.k2 = std::sqrt(k.c2); break;
        case Optimiser::nadam: {  // PyTorch's NAdam, ψ its momentum_decay
            const double mu = detail::nadam_mu(hp.beta1, hp.decay, t);
            const double mu_next = detail::nadam_mu(hp.beta1, hp.decay, t + 1);
            const double product = detail::nadam_mu_product(hp.beta1, hp.decay, t);
            k.k1 = hp.eta * (1 - mu) / (1 - product);           // the gradient's weight
            k.k2 = hp.eta * mu_next / (1 - product * mu_next);  // the momentum's
            break;
        }
        case Optimiser::radam: {  // the variance's rectification r_t where ρ_t > 5, else 0 (no adaptive step)
            const double rho_inf = 2 / (1 - hp.beta2) - 1;
            const double rho_t = rho_inf - 2 * t * std::pow(hp.beta2, t) / k.c2;
            k.k1 = rho_t > 5 ? std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                             : 0;
            k.k2 = std::sqrt(k.c2);
            break;
        }
        default: break;
    }
    return k;
}

}  // namespace fluxion::backend
