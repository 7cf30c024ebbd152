// fluxion/optimisers.hpp — optimisation rules (Flux/Optimisers.jl names, PyTorch's formulas) and
// the state they keep per trainable tensor.
//
//   auto opt = fx::setup(fx::Adam{.eta = 1e-3}, model);           // state on the model's device
//   auto [loss, grads] = fx::withgradient(lossfn, model);
//   fx::update(opt, model, grads);                                // one step, in place
//   fx::adjust(opt, 1e-4);                                        // a new learning rate
//   fx::schedule(opt, &fx::Adam::eta, fx::Exp{.start = 1e-3, .decay = 0.99});   // fluxion/schedules.hpp
//   fx::freeze(opt, "layers.0");  fx::thaw(opt, "layers.0");      // by path prefix
//   auto opt2 = fx::setup(fx::OptimiserChain(fx::ClipNorm{1.0}, fx::Adam{}), model);
//
// A rule (Descent, Momentum, Nesterov, RMSProp, Adam, AdamW, AMSGrad, OAdam, AdaGrad, AdaDelta, AdaMax,
// NAdam, RAdam, AdaBelief, Lion, Rprop) updates parameters with one fused kernel of the backend (optimiser_step).
// A modifier (WeightDecay, SignDecay, ClipGrad, ClipNorm, AccumGrad) transforms the gradients first;
// an OptimiserChain lists modifiers and one rule in the order they apply (modifiers after the rule
// transform its update, as in Optimisers.jl). Only trainable tensors are optimised
// (FLUXION_TRAINABLE; BatchNorm's running statistics are not).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fluxion/autodiff.hpp"
#include "fluxion/functor.hpp"

namespace fluxion {

// What an optimiser keeps for one trainable tensor.
struct ParamState {
    std::string path;                    // "layers.0.weight"
    Tensor state1, state2, state3;       // the rule's: momentum, moments, ... (as it needs)
    std::int64_t t = 0;                  // steps taken
    bool frozen = false;
    Tensor accumulated;                  // AccumGrad: the gradients since the last update, each divided by n
    std::int64_t accumulated_steps = 0;  // AccumGrad: how many
};

// ---- rules (each updates a parameter from its gradient) ----
struct Descent {  // p -= η g
    double eta = 0.1;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct Momentum {  // v = ρ v + g; p -= η v (PyTorch's SGD with momentum)
    double eta = 0.01, rho = 0.9;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct Nesterov {  // v = ρ v + g; p -= η (g + ρ v)
    double eta = 0.001, rho = 0.9;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct RMSProp {  // a = ρ a + (1 - ρ) g²; p -= η g / (√a + ε)  (ρ is PyTorch's alpha)
    double eta = 0.001, rho = 0.9, epsilon = 1e-8;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct Adam {  // PyTorch's Adam with bias correction
    double eta = 0.001, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct AdamW {  // p *= 1 - η λ, then Adam (PyTorch's AdamW; λ is its weight_decay)
    double eta = 0.001, beta1 = 0.9, beta2 = 0.999, lambda = 0.01, epsilon = 1e-8;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct AMSGrad {  // Adam dividing by the largest second moment so far (PyTorch's Adam(amsgrad=True))
    double eta = 0.001, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct OAdam {  // optimistic Adam: p -= 2 Δ - Δ_prev, Δ Adam's update (Optimisers.jl's OAdam)
    double eta = 0.001, beta1 = 0.5, beta2 = 0.9, epsilon = 1e-8;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct AdaGrad {  // a += g²; p -= η g / (√a + ε)  (PyTorch's Adagrad: a starts at 0)
    double eta = 0.1, epsilon = 1e-8;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct AdaDelta {  // PyTorch's Adadelta; η is its lr (Optimisers.jl's AdaDelta has none: η = 1)
    double eta = 1.0, rho = 0.9, epsilon = 1e-8;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct AdaMax {  // Adam with the ∞-norm: u = max(β2 u, |g| + ε); p -= η m / ((1 - β1^t) u)  (PyTorch's Adamax)
    double eta = 0.001, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct NAdam {  // Adam with Nesterov momentum (PyTorch 2's NAdam; ψ is its momentum_decay)
    double eta = 0.001, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, psi = 4e-3;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct RAdam {  // Adam with the variance rectified, plain momentum for the first steps (PyTorch's RAdam)
    double eta = 0.001, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct AdaBelief {  // Adam whose second moment is that of g - m: s = β2 s + (1 - β2)(g - m)² + ε
    double eta = 0.001, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-16;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct Lion {  // p -= η sign(β1 m + (1 - β1) g); m = β2 m + (1 - β2) g  (the paper's formulas)
    double eta = 0.001, beta1 = 0.9, beta2 = 0.999;
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};
struct Rprop {  // per-element steps, from η, times ℓ+ while g keeps its sign, ℓ- when it flips, within [Γmin, Γmax]
    double eta = 1e-3, ell_minus = 0.5, ell_plus = 1.2, gamma_min = 1e-6, gamma_max = 50;  // PyTorch's Rprop
    void init(ParamState& s, const Tensor& param) const;
    void step(ParamState& s, Tensor& param, const Tensor& grad) const;
};

// ---- modifiers (each transforms all gradients of one step; params in the same order) ----
struct WeightDecay {  // g += λ p (PyTorch's weight_decay of SGD and Adam)
    double lambda = 5e-4;
    void modify(std::vector<Tensor>& grads, const std::vector<Tensor>& params) const;
};
struct SignDecay {  // g += κ sign(p)
    double kappa = 1e-3;
    void modify(std::vector<Tensor>& grads, const std::vector<Tensor>& params) const;
};
struct ClipGrad {  // each element clamped to [-δ, δ]
    double delta = 10;
    void modify(std::vector<Tensor>& grads, const std::vector<Tensor>& params) const;
};
struct ClipNorm {  // all gradients scaled by ω / ‖g‖ when their global 2-norm ‖g‖ exceeds ω
    double omega = 10;
    void modify(std::vector<Tensor>& grads, const std::vector<Tensor>& params) const;
};

// Sums the gradients of n steps (each divided by n) and passes their mean on every n-th step; the
// steps between change nothing: the rest of the chain does not run (Optimisers.jl's AccumGrad, for
// a batch n times larger than memory holds). Its sum is optimiser state, saved in checkpoints. A
// step either updates or not, which one traced plan cannot replay: fx::compile refuses it and
// fx::train runs its steps eagerly.
struct AccumGrad {
    std::int64_t n = 1;
    static constexpr bool replayable = false;
    void init(ParamState& s, const Tensor& param) const;
    // Keeps the gradients, parameters and states that update now (the n-th of theirs), drops the others.
    void accumulate(std::vector<Tensor>& grads, std::vector<Tensor>& params, std::vector<ParamState*>& states) const;
};

namespace detail {
template <class R> inline constexpr bool is_rule = requires(const R& r, ParamState& s, Tensor& p) { r.step(s, p, p); };
// fluxion's own rules, each one call of the backend's optimiser_step per tensor on the gradient as
// given: what a fused multi-tensor step may stand for (a rule of the user's own may do more).
template <class R>
inline constexpr bool is_kernel_rule =
    std::is_same_v<R, Descent> || std::is_same_v<R, Momentum> || std::is_same_v<R, Nesterov> ||
    std::is_same_v<R, RMSProp> || std::is_same_v<R, Adam> || std::is_same_v<R, AdamW> || std::is_same_v<R, AMSGrad> ||
    std::is_same_v<R, OAdam> || std::is_same_v<R, AdaGrad> || std::is_same_v<R, AdaDelta> ||
    std::is_same_v<R, AdaMax> || std::is_same_v<R, NAdam> || std::is_same_v<R, RAdam> ||
    std::is_same_v<R, AdaBelief> || std::is_same_v<R, Lion> || std::is_same_v<R, Rprop>;
template <class R>
inline constexpr bool is_modifier =
    requires(const R& r, std::vector<Tensor>& g) { r.modify(g, g); } || std::is_same_v<R, AccumGrad>;
}  // namespace detail

// Whether fx::compile can replay a rule or modifier: true unless the type says
// `static constexpr bool replayable = false;` — work done outside the backend's kernels (host
// arithmetic on read-back values), which a traced step cannot record. fx::compile
// refuses such an optimiser, and fx::train runs its steps eagerly.
template <class R> constexpr bool replayable() {
    if constexpr (requires { R::replayable; }) return R::replayable;
    else return true;
}

// Modifiers and one rule, in the order they apply, as Optimisers.jl's: modifiers before the rule
// transform the gradients; those after it transform the rule's update Δ (the parameter before its
// step less after it), which is then subtracted: OptimiserChain(Adam{}, WeightDecay{λ}) is
// decoupled weight decay, p -= Δ + λ p.
template <class... Parts> struct OptimiserChain {
    static constexpr std::size_t rules = (std::size_t(detail::is_rule<Parts>) + ... + 0);
    static_assert(rules == 1, "fluxion: an OptimiserChain holds one rule (Descent, Adam, ... : "
                              "fluxion/optimisers.hpp) among its modifiers");
    static_assert(((detail::is_rule<Parts> || detail::is_modifier<Parts>) && ...),
                  "fluxion: an OptimiserChain holds modifiers (WeightDecay, SignDecay, ClipGrad, ClipNorm, "
                  "AccumGrad) and one rule");
    static constexpr std::size_t rule_index = [] {
        constexpr bool is[] = {detail::is_rule<Parts>...};
        std::size_t i = 0;
        while (!is[i]) ++i;
        return i;
    }();
    std::tuple<Parts...> parts;
    explicit OptimiserChain(Parts... ps) : parts(std::move(ps)...) {}
    const auto& rule() const { return std::get<rule_index>(parts); }
    auto& rule() { return std::get<rule_index>(parts); }
    static constexpr bool replayable = (fluxion::replayable<Parts>() && ...);
};

// The rule (or chain) and one ParamState per trainable tensor, in the model's declaration order.
template <class Rule> struct OptimiserState {
    Rule rule;
    std::vector<ParamState> params;
    // fx::schedule's (fluxion/schedules.hpp): each sets a hyper-parameter of the rule for step t.
    std::vector<std::function<void(Rule&, std::int64_t)>> schedules;
};

namespace detail {
template <class R> auto& final_rule(R& r) {
    if constexpr (requires { r.rule(); }) return r.rule();
    else return r;
}
// A rule's update Δ = before - after, and the parameter less Δ, in place (chain.cpp).
Tensor update_of(const Tensor& before, const Tensor& after);
void subtract_update(Tensor& param, const Tensor& update);

// One step of a rule, a modifier or a chain; in a chain whose rule is not last, the rule yields its
// update (grads become Δ) and the chain subtracts what the modifiers after it make of Δ.
template <class R> void apply(const R& r, std::vector<Tensor>& grads, std::vector<Tensor>& params,
                              std::vector<ParamState*>& states, bool rule_yields_update = false) {
    if constexpr (requires { r.parts; }) {
        constexpr bool update_after = R::rule_index + 1 < std::tuple_size_v<decltype(r.parts)>;
        std::apply([&](const auto&... part) { (apply(part, grads, params, states, update_after), ...); }, r.parts);
        if constexpr (update_after)
            for (std::size_t i = 0; i < params.size(); ++i) subtract_update(params[i], grads[i]);
    } else if constexpr (is_rule<R>) {
        for (std::size_t i = 0; i < params.size(); ++i) {
            if (!rule_yields_update) {
                r.step(*states[i], params[i], grads[i]);
                continue;
            }
            Tensor after = params[i].clone();
            r.step(*states[i], after, grads[i]);
            grads[i] = update_of(params[i], after);
        }
    } else if constexpr (std::is_same_v<R, AccumGrad>) {
        r.accumulate(grads, params, states);
    } else {
        if (!grads.empty()) r.modify(grads, params);
    }
}
struct Trainable {
    std::vector<std::string> paths;
    std::vector<Tensor> tensors;
};
template <class M> Trainable trainable_of(const M& model) {
    Trainable t;
    visit_trainable(model, [&](const std::string& path, const Tensor& x) {
        if (x.defined()) t.paths.push_back(path), t.tensors.push_back(x);
    });
    return t;
}
// Before a step: the scheduled hyper-parameters take their values at t = 1 + the steps taken.
template <class Rule> void follow_schedules(OptimiserState<Rule>& opt) {
    if (opt.schedules.empty()) return;
    std::int64_t taken = 0;
    for (const auto& s : opt.params) taken = std::max(taken, s.t);
    for (const auto& set : opt.schedules) set(opt.rule, taken + 1);
}
// Throws unless params and grads match the optimiser's paths, shapes and devices.
void check_update(const std::vector<ParamState>& states, const Trainable& params, const Trainable& grads);
// Matches path == prefix or a path below it ("layers.0" matches "layers.0.weight"); ValueError if none.
void set_frozen(std::vector<ParamState>& states, const std::string& prefix, bool frozen);
}  // namespace detail

namespace detail {
// A modifier may plan ahead for the tensors it will be given: `void prepare(const std::vector<Tensor>&
// params) const` runs once in setup (fx::distributed::AverageGradients lays out its buckets there).
template <class R> void prepare(const R& r, const std::vector<Tensor>& params) {
    if constexpr (requires { r.parts; })
        std::apply([&](const auto&... part) { (prepare(part, params), ...); }, r.parts);
    else if constexpr (requires { r.prepare(params); })
        r.prepare(params);
}
// AccumGrad's sums, one per trainable tensor.
template <class R> void init_accumulators(const R& r, ParamState& s, const Tensor& param) {
    if constexpr (requires { r.parts; })
        std::apply([&](const auto&... part) { (init_accumulators(part, s, param), ...); }, r.parts);
    else if constexpr (std::is_same_v<R, AccumGrad>)
        r.init(s, param);
}
}  // namespace detail

template <class Rule, class M> OptimiserState<Rule> setup(const Rule& rule, const M& model) {
    static_assert(detail::is_rule<Rule> || requires { rule.rule(); },
                  "fluxion: setup takes a rule (Descent, Adam, ... : fluxion/optimisers.hpp) or an "
                  "OptimiserChain ending with one");
    OptimiserState<Rule> opt{rule, {}, {}};
    auto params = detail::trainable_of(model);
    for (std::size_t i = 0; i < params.paths.size(); ++i) {
        ParamState s;
        s.path = params.paths[i];
        detail::final_rule(rule).init(s, params.tensors[i]);
        detail::init_accumulators(rule, s, params.tensors[i]);
        opt.params.push_back(std::move(s));
    }
    detail::prepare(rule, params.tensors);
    return opt;
}

// One step: grads has the model's type (as withgradient returns it). The model's tensors change in
// place; nothing changes when the arguments do not fit (ShapeError, DeviceError, ValueError).
template <class Rule, class M> void update(OptimiserState<Rule>& opt, M& model, const M& grads) {
    auto params = detail::trainable_of(model);
    auto gs = detail::trainable_of(grads);
    detail::check_update(opt.params, params, gs);
    detail::follow_schedules(opt);
    NoGrad no_grad;
    std::vector<Tensor> p, g;
    std::vector<ParamState*> states;
    for (std::size_t i = 0; i < opt.params.size(); ++i) {
        if (opt.params[i].frozen) continue;
        p.push_back(params.tensors[i]);
        g.push_back(gs.tensors[i].dtype() == p.back().dtype() ? gs.tensors[i] : gs.tensors[i].to(p.back().dtype()));
        states.push_back(&opt.params[i]);
    }
    detail::apply(opt.rule, g, p, states);
}

// A new learning rate (a schedule of eta, fx::schedule, sets it again at the next step).
template <class Rule> void adjust(OptimiserState<Rule>& opt, double eta) { detail::final_rule(opt.rule).eta = eta; }
template <class Rule> void freeze(OptimiserState<Rule>& opt, const std::string& prefix) {
    detail::set_frozen(opt.params, prefix, true);
}
template <class Rule> void thaw(OptimiserState<Rule>& opt, const std::string& prefix) {
    detail::set_frozen(opt.params, prefix, false);
}

}  // namespace fluxion
