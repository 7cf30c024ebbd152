// optimiser.cpp — one fused optimiser step over n parameters (shader optimiser.comp); the update
// rules are the CPU backend's (src/cpu/optimiser.cpp).
#include <cmath>
#include <cstring>
#include <string>

#include "fluxion/error.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

void optimiser_step(int device, Optimiser rule, DType t, std::int64_t n, void* param, const void* grad, void* state1,
                    void* state2, const OptimiserStep* hp) {
    const int states = rule == Optimiser::descent ? 0 : (rule == Optimiser::adam || rule == Optimiser::adamw) ? 2 : 1;
    if ((states >= 1 && !state1) || (states == 2 && !state2))
        throw ValueError("optimiser_step on Vulkan: the rule needs " + std::to_string(states) +
                         " state buffer(s) of the parameters' size, but a null buffer was passed");
    const bool adam = rule == Optimiser::adam || rule == Optimiser::adamw;
    if (adam && hp->t < 1)
        throw ValueError("optimiser_step on Vulkan: step count t = " + std::to_string(hp->t) +
                         " must start at 1 (Adam's bias correction divides by 1 - beta^t)");
    if (n <= 0) return;
    Launch launch(device, "optimiser_step");
    require(launch.ctx(), backend::Op::optimiser_step, t, "optimiser_step");
    const std::string type = suffix(t, launch.ctx(), "optimiser_step");
    check_count(n, launch.ctx(), "optimiser_step");
    const std::size_t size = itemsize(t), bytes = std::size_t(n) * size;
    const std::int32_t off0 = launch.buffer(param, bytes, size, true);
    const std::int32_t off1 = launch.buffer(grad, bytes, size, false);
    // Unused state slots are bound to the parameters, which the rule then never reads through them.
    const std::int32_t off2 = launch.buffer(state1 ? state1 : param, bytes, size, true);
    const std::int32_t off3 = launch.buffer(state2 ? state2 : param, bytes, size, true);
    // The parameter block, from the hyper-parameters; a recording builds it again before each
    // submission (fx::compile advances the step count and follows the learning rate).
    auto block = [=](ParamBlock& p) {
        p.param(std::int32_t(n));
        p.param(std::int32_t(rule));
        p.param(off0);
        p.param(off1);
        p.param(off2);
        p.param(off3);
        const double values[] = {hp->eta,
                                 hp->rho,
                                 hp->beta1,
                                 hp->beta2,
                                 hp->epsilon,
                                 adam ? 1 - std::pow(hp->beta1, double(hp->t)) : 1.0,
                                 adam ? 1 - std::pow(hp->beta2, double(hp->t)) : 1.0,
                                 rule == Optimiser::adamw ? 1 - hp->eta * hp->decay : 1.0};
        for (double v : values) {
            if (t == DType::f64) p.param(v);
            else p.param(float(v));
        }
    };
    block(launch.params());
    void* staged = launch.run("optimiser_" + type, launch.groups(n));
    Stream& s = stream(launch.ctx());
    if (s.capturing())
        s.on_run([block, staged] {
            ParamBlock p;
            block(p);
            std::memcpy(staged, p.data(), p.size());
        });
}

}  // namespace fluxion::vulkan
