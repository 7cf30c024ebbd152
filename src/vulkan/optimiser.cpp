// optimiser.cpp — one fused optimiser step over n parameters (shader optimiser.comp); the update
// rules are the op registry's (core/elementwise_formulas.def), the step's constants
// core/optimiser_constants.hpp's. Also mixed precision's two multi-tensor kernels (core/backend.hpp):
// the update (optimiser.comp's MIXED variants) and the overflow check (nonfinite.comp), one
// dispatch per tensor each.
#include <cstring>
#include <string>

#include "core/optimiser_constants.hpp"
#include "fluxion/error.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

namespace {

// One dispatch of optimiser.comp: the plain step over parameters, gradients and state of type t, or
// (with a copy) mixed precision's, over f32 parameters and state from gradients of type t.
void launch_step(int device, Optimiser rule, DType t, std::int64_t n, void* param, const void* grad, void* state1,
                 void* state2, void* state3, void* copy, double divisor, const OptimiserStep* hp) {
    const int states = backend::optimiser_states(rule);
    if (states < 0) throw ValueError("optimiser_step on Vulkan: unknown rule code " + std::to_string(int(rule)));
    if ((states >= 1 && !state1) || (states >= 2 && !state2) || (states >= 3 && !state3))
        throw ValueError("optimiser_step on Vulkan: the rule needs " + std::to_string(states) +
                         " state buffer(s) of the parameters' size, but a null buffer was passed");
    if (backend::optimiser_counts_steps(rule) && hp->t < 1)
        throw ValueError("optimiser_step on Vulkan: step count t = " + std::to_string(hp->t) +
                         " must start at 1 (the bias correction divides by 1 - beta^t)");
    if (n <= 0) return;
    const bool mixed = copy != nullptr;
    const DType pt = mixed ? DType::f32 : t;  // the parameters' and state's type
    Launch launch(device, "optimiser_step");
    require(launch.ctx(), backend::Op::optimiser_step, t, "optimiser_step");
    const std::string type = suffix(t, launch.ctx(), "optimiser_step");
    check_count(n, launch.ctx(), "optimiser_step");
    const std::size_t size = itemsize(pt), bytes = std::size_t(n) * size;
    const std::size_t gsize = itemsize(t), gbytes = std::size_t(n) * gsize;
    const std::int32_t off0 = launch.buffer(param, bytes, size, true);
    const std::int32_t off1 = launch.buffer(grad, gbytes, gsize, false);
    // Unused state slots are bound to the parameters, which the rule then never reads through them.
    const std::int32_t off2 = launch.buffer(state1 ? state1 : param, bytes, size, true);
    const std::int32_t off3 = launch.buffer(state2 ? state2 : param, bytes, size, true);
    const std::int32_t off4 = launch.buffer(state3 ? state3 : param, bytes, size, true);
    const std::int32_t off5 = mixed ? launch.buffer(copy, gbytes, gsize, true) : 0;
    // The parameter block, from the hyper-parameters; a recording builds it again before each
    // submission (fx::compile advances the step count and follows the learning rate).
    auto block = [=](ParamBlock& p) {
        p.param(std::int32_t(n));
        p.param(std::int32_t(rule));
        p.param(off0);
        p.param(off1);
        p.param(off2);
        p.param(off3);
        p.param(off4);
        if (mixed) p.param(off5);
        const backend::OptimiserConstants k = backend::optimiser_constants(rule, *hp);
        const double values[] = {k.eta,   k.rho, k.beta1, k.beta2,  k.epsilon, k.lower,
                                 k.upper, k.c1,  k.c2,    k.shrink, k.k1,      k.k2};
        for (double v : values) {
            if (t == DType::f64) p.param(v);
            else p.param(float(v));
        }
        if (mixed) p.param(float(divisor));
    };
    block(launch.params());
    void* staged = launch.run((mixed ? "mixed_optimiser_" : "optimiser_") + type, launch.groups(n));
    Stream& s = stream(launch.ctx());
    if (s.capturing())
        s.on_run([block, staged] {
            ParamBlock p;
            block(p);
            std::memcpy(staged, p.data(), p.size());
        });
}

}  // namespace

void optimiser_step(int device, Optimiser rule, DType t, std::int64_t n, void* param, const void* grad, void* state1,
                    void* state2, void* state3, const OptimiserStep* hp) {
    launch_step(device, rule, t, n, param, grad, state1, state2, state3, nullptr, 1.0, hp);
}

void mixed_optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const std::int64_t* n,
                           const OptimiserStep* const* hp, double divisor, void* const* ptrs) {
    backend::check_mixed_gradients(t);
    for (std::size_t i = 0; i < count; ++i) {
        void* const* p = ptrs + 6 * i;
        launch_step(device, rule, t, n[i], p[0], p[1], p[2], p[3], p[4], p[5], divisor, hp[i]);
    }
}

// One dispatch per tensor, after the flag is cleared; each may set it (nonfinite.comp).
void nonfinite_check(int device, DType t, std::size_t count, const std::int64_t* n, const void* const* ptrs,
                     double divisor, void* flag) {
    fill(device, DType::f32, 1, flag, 0.0);
    for (std::size_t i = 0; i < count; ++i) {
        if (n[i] <= 0) continue;
        Launch launch(device, "nonfinite_check");
        const std::string type = suffix(t, launch.ctx(), "nonfinite_check");
        check_count(n[i], launch.ctx(), "nonfinite_check");
        const std::size_t size = itemsize(t);
        const std::int32_t off0 = launch.buffer(ptrs[i], std::size_t(n[i]) * size, size, false);
        const std::int32_t off1 = launch.buffer(flag, sizeof(float), sizeof(float), true);
        ParamBlock& p = launch.params();
        p.param(std::int32_t(n[i]));
        p.param(off0);
        p.param(off1);
        if (t == DType::f64) p.param(divisor);
        else p.param(float(divisor));
        launch.run("nonfinite_" + type, launch.groups(n[i]));
    }
}

}  // namespace fluxion::vulkan
