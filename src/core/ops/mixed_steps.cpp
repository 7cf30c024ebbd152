// mixed_steps.cpp — checks, then the backend's multi-tensor kernels of a mixed-precision step.
#include "fluxion/detail/mixed_steps.hpp"

#include <exception>

#include "core/ops/optimiser_step.hpp"
#include "core/tensor_impl.hpp"

namespace fluxion::detail {
namespace {

bool one_device_and_type(const std::vector<Tensor>& ts, const Device& device, DType t) {
    for (const auto& x : ts)
        if (!x.defined() || !(x.device() == device) || x.dtype() != t || !x.is_contiguous()) return false;
    return true;
}

}  // namespace

Tensor nonfinite_fused(const std::vector<Tensor>& tensors, double divisor) {
    if (tensors.empty()) return {};
    const Tensor& first = tensors.front();
    if (!first.defined() || !is_floating(first.dtype()) ||
        !one_device_and_type(tensors, first.device(), first.dtype()))
        return {};
    const backend::Backend& b = backend_of(first);
    if (!b.nonfinite_check) return {};
    std::vector<std::int64_t> n;
    std::vector<const void*> ptrs;
    for (const auto& x : tensors) {
        n.push_back(x.numel());
        ptrs.push_back(x.data_ptr());
    }
    Tensor flag = empty({}, {.dtype = DType::f32, .device = first.device()});
    b.nonfinite_check(first.device().index, first.dtype(), n.size(), n.data(), ptrs.data(), divisor, flag.data_ptr());
    return flag;
}

bool mixed_update_fused(const std::function<void()>& rule_step, const std::vector<Tensor>& params,
                        const std::vector<Tensor>& grads, const std::vector<ParamState*>& states,
                        const std::vector<Tensor>& copies, double divisor) {
    if (params.empty() || grads.size() != params.size() || states.size() != params.size() ||
        copies.size() != params.size())
        return false;
    const Device device = params.front().device();
    const DType t = grads.front().defined() ? grads.front().dtype() : DType::f32;
    if ((t != DType::f16 && t != DType::bf16) || !one_device_and_type(params, device, DType::f32) ||
        !one_device_and_type(grads, device, t) || !one_device_and_type(copies, device, t))
        return false;
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (grads[i].shape() != params[i].shape() || copies[i].shape() != params[i].shape()) return false;
        for (const Tensor* s : {&states[i]->state1, &states[i]->state2, &states[i]->state3})
            if (s->defined() && (s->shape() != params[i].shape() || s->dtype() != DType::f32 ||
                                 !(s->device() == device) || !s->is_contiguous()))
                return false;
    }
    const backend::Backend& b = backend_of(params.front());
    if (!b.mixed_optimiser_steps) return false;

    // The rule's kernel and hyper-parameters, from its step on a probe (no kernel runs). A rule of
    // the user's own that runs none of the backend's kernels, or refuses the probe, is composed.
    backend::OptimiserStep hp;
    backend::Optimiser rule;
    bool captured = false;
    try {
        captured = capture_optimiser_step(hp, rule, rule_step);
    } catch (const std::exception&) {
        return false;
    }
    if (!captured) return false;

    std::vector<backend::OptimiserStep> hps(params.size(), hp);
    std::vector<const backend::OptimiserStep*> hp_ptrs;
    std::vector<std::int64_t> n;
    std::vector<void*> ptrs;
    const auto data = [](const Tensor& x) -> void* { return x.defined() ? x.data_ptr() : nullptr; };
    for (std::size_t i = 0; i < params.size(); ++i) {
        hps[i].t = states[i]->t + 1;
        n.push_back(params[i].numel());
        const ParamState& s = *states[i];
        for (const Tensor* x : {&params[i], &grads[i], &s.state1, &s.state2, &s.state3, &copies[i]})
            ptrs.push_back(data(*x));
    }
    for (auto& h : hps) hp_ptrs.push_back(&h);
    b.mixed_optimiser_steps(device.index, rule, t, n.size(), n.data(), hp_ptrs.data(), divisor, ptrs.data());
    for (ParamState* s : states) ++s->t;  // after the kernel: a kernel that throws changed nothing
    return true;
}

}  // namespace fluxion::detail
