// rules.cpp — each rule is one call of the backend's fused optimiser_step (formulas beside the
// kernels); this file only allocates state and fills in the hyper-parameters.
#include "core/ops/optimiser_step.hpp"
#include "fluxion/optimisers.hpp"

namespace fluxion {
namespace {

using backend::Optimiser;

void allocate(ParamState& s, const Tensor& param, int buffers) {
    TensorOptions o{.dtype = param.dtype(), .device = param.device()};
    if (buffers >= 1) s.state1 = zeros(param.shape(), o);
    if (buffers >= 2) s.state2 = zeros(param.shape(), o);
    if (buffers >= 3) s.state3 = zeros(param.shape(), o);
}

// The kernel works on contiguous buffers; a strided parameter is updated through a copy.
void run(Optimiser rule, ParamState& s, Tensor& param, const Tensor& grad, backend::OptimiserStep hp) {
    hp.t = ++s.t;
    Tensor g = grad.contiguous();
    if (param.is_contiguous()) {
        detail::optimiser_step(rule, param, g, s.state1, s.state2, s.state3, hp);
    } else {
        Tensor p = param.contiguous();
        detail::optimiser_step(rule, p, g, s.state1, s.state2, s.state3, hp);
        param.copy_(p);
    }
}

}  // namespace

void Descent::init(ParamState&, const Tensor&) const {}
void Descent::step(ParamState& s, Tensor& p, const Tensor& g) const { run(Optimiser::descent, s, p, g, {.eta = eta}); }

void Momentum::init(ParamState& s, const Tensor& p) const { allocate(s, p, 1); }
void Momentum::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::momentum, s, p, g, {.eta = eta, .rho = rho});
}

void Nesterov::init(ParamState& s, const Tensor& p) const { allocate(s, p, 1); }
void Nesterov::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::nesterov, s, p, g, {.eta = eta, .rho = rho});
}

void RMSProp::init(ParamState& s, const Tensor& p) const { allocate(s, p, 1); }
void RMSProp::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::rmsprop, s, p, g, {.eta = eta, .rho = rho, .epsilon = epsilon});
}

void Adam::init(ParamState& s, const Tensor& p) const { allocate(s, p, 2); }
void Adam::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::adam, s, p, g, {.eta = eta, .beta1 = beta1, .beta2 = beta2, .epsilon = epsilon});
}

void AdamW::init(ParamState& s, const Tensor& p) const { allocate(s, p, 2); }
void AdamW::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::adamw, s, p, g, {.eta = eta, .beta1 = beta1, .beta2 = beta2, .epsilon = epsilon, .decay = lambda});
}

void AdaGrad::init(ParamState& s, const Tensor& p) const { allocate(s, p, 1); }
void AdaGrad::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::adagrad, s, p, g, {.eta = eta, .epsilon = epsilon});
}

void AdaDelta::init(ParamState& s, const Tensor& p) const { allocate(s, p, 2); }
void AdaDelta::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::adadelta, s, p, g, {.eta = eta, .rho = rho, .epsilon = epsilon});
}

void AdaMax::init(ParamState& s, const Tensor& p) const { allocate(s, p, 2); }
void AdaMax::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::adamax, s, p, g, {.eta = eta, .beta1 = beta1, .beta2 = beta2, .epsilon = epsilon});
}

void NAdam::init(ParamState& s, const Tensor& p) const { allocate(s, p, 2); }
void NAdam::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::nadam, s, p, g, {.eta = eta, .beta1 = beta1, .beta2 = beta2, .epsilon = epsilon, .decay = psi});
}

void RAdam::init(ParamState& s, const Tensor& p) const { allocate(s, p, 2); }
void RAdam::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::radam, s, p, g, {.eta = eta, .beta1 = beta1, .beta2 = beta2, .epsilon = epsilon});
}

void AdaBelief::init(ParamState& s, const Tensor& p) const { allocate(s, p, 2); }
void AdaBelief::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::adabelief, s, p, g, {.eta = eta, .beta1 = beta1, .beta2 = beta2, .epsilon = epsilon});
}

void Lion::init(ParamState& s, const Tensor& p) const { allocate(s, p, 1); }
void Lion::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::lion, s, p, g, {.eta = eta, .beta1 = beta1, .beta2 = beta2});
}

void AMSGrad::init(ParamState& s, const Tensor& p) const { allocate(s, p, 3); }
void AMSGrad::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::amsgrad, s, p, g, {.eta = eta, .beta1 = beta1, .beta2 = beta2, .epsilon = epsilon});
}

void OAdam::init(ParamState& s, const Tensor& p) const { allocate(s, p, 3); }
void OAdam::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::oadam, s, p, g, {.eta = eta, .beta1 = beta1, .beta2 = beta2, .epsilon = epsilon});
}

// state1 is the last gradient kept (zero where its sign flipped), state2 each element's step size.
void Rprop::init(ParamState& s, const Tensor& p) const {
    allocate(s, p, 1);
    s.state2 = full(p.shape(), eta, {.dtype = p.dtype(), .device = p.device()});
}
void Rprop::step(ParamState& s, Tensor& p, const Tensor& g) const {
    run(Optimiser::rprop, s, p, g,
        {.eta = eta, .beta1 = ell_minus, .beta2 = ell_plus, .lower = gamma_min, .upper = gamma_max});
}

}  // namespace fluxion
