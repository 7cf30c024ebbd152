// modifiers.cpp — gradient transformations, as tensor ops on the gradients' device (no host sync).
#include "fluxion/ops.hpp"
#include "fluxion/optimisers.hpp"

namespace fluxion {

void WeightDecay::modify(std::vector<Tensor>& grads, const std::vector<Tensor>& params) const {
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = grads[i] + params[i] * lambda;
}

void SignDecay::modify(std::vector<Tensor>& grads, const std::vector<Tensor>& params) const {
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = grads[i] + sign(params[i]) * kappa;
}

void AccumGrad::init(ParamState& s, const Tensor& param) const {
    if (n < 1) throw ValueError("AccumGrad: n = " + std::to_string(n) + "; it must accumulate at least one gradient");
    s.accumulated = zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()});
    s.accumulated_steps = 0;
}

void AccumGrad::accumulate(std::vector<Tensor>& grads, std::vector<Tensor>& params,
                           std::vector<ParamState*>& states) const {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
        ParamState& s = *states[i];
        const Tensor share = grads[i] / double(n);
        s.accumulated = s.accumulated_steps == 0 ? share : s.accumulated + share;
        if (++s.accumulated_steps < n) continue;
        s.accumulated_steps = 0;
        grads[kept] = s.accumulated, params[kept] = params[i], states[kept] = states[i];
        ++kept;
    }
    grads.resize(kept), params.resize(kept), states.resize(kept);
}

void ClipGrad::modify(std::vector<Tensor>& grads, const std::vector<Tensor>&) const {
    for (auto& g : grads) g = clamp(g, -delta, delta);
}

void ClipNorm::modify(std::vector<Tensor>& grads, const std::vector<Tensor>&) const {
    if (grads.empty()) return;
    Tensor squares = sum(square(grads[0]));
    for (std::size_t i = 1; i < grads.size(); ++i) squares = squares + sum(square(grads[i]));
    // As torch.nn.utils.clip_grad_norm_: scale by ω / (‖g‖ + 1e-6) when that is below 1.
    Tensor scale = clamp(omega / (sqrt(squares) + 1e-6), 0, 1);
    for (auto& g : grads) g = g * scale;
}

}  // namespace fluxion
