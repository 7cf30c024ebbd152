// optimiser_step.cpp — checks, then the backend's fused optimiser step.
#include "core/ops/optimiser_step.hpp"

#include "core/op_arguments.hpp"

namespace fluxion::detail {
namespace {
thread_local backend::OptimiserStep* capturing = nullptr;
thread_local backend::Optimiser captured_rule = backend::Optimiser::descent;
thread_local bool captured = false;
}  // namespace

bool capture_optimiser_step(backend::OptimiserStep& hp, backend::Optimiser& rule, const std::function<void()>& run) {
    capturing = &hp;
    captured = false;
    struct Restore {
        ~Restore() { capturing = nullptr; }
    } restore;
    run();
    rule = captured_rule;
    return captured;
}

bool capture_optimiser_step(backend::OptimiserStep& hp, const std::function<void()>& run) {
    backend::Optimiser rule;
    return capture_optimiser_step(hp, rule, run);
}

void optimiser_step(backend::Optimiser rule, Tensor& param, const Tensor& grad, Tensor& state1, Tensor& state2,
                    Tensor& state3, const backend::OptimiserStep& hp) {
    if (capturing) {
        *capturing = hp;
        captured_rule = rule;
        captured = true;
        return;
    }
    std::vector<Tensor> args{param, grad};
    for (const Tensor* s : {&state1, &state2, &state3})
        if (s->defined()) args.push_back(*s);
    common_device("optimiser step", args);
    for (const auto& t : args) {
        if (t.shape() != param.shape() || t.dtype() != param.dtype())
            throw ShapeError("optimiser step: parameter " + summary(param) + " got a gradient or state " + summary(t));
        if (!t.is_contiguous()) throw ValueError("optimiser step: parameters, gradients and state must be contiguous");
    }
    backend_of(param).optimiser_step(param.device().index, rule, param.dtype(), param.numel(), param.data_ptr(),
                                     grad.data_ptr(), state1.defined() ? state1.data_ptr() : nullptr,
                                     state2.defined() ? state2.data_ptr() : nullptr,
                                     state3.defined() ? state3.data_ptr() : nullptr, &hp);
}

}  // namespace fluxion::detail
