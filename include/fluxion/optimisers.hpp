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
// A rule (Descent ... AdamW) updates parameters with one fused kernel of the backend
// (optimiser_step). A modifier (WeightDecay, ClipGrad, ClipNorm) transforms the gradients first;
// an OptimiserChain lists modifiers in the order they apply and ends with one rule. Only trainable
// tensors are optimised (FLUXION_TRAINABLE; BatchNorm's running statistics are not).
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
    std::string path;       // "layers.0.weight"
    Tensor state1, state2;  // momentum / first and second moments, as the rule needs
    std::int64_t t = 0;     // steps taken
    bool frozen = false;
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

// ---- modifiers (each transforms all gradients of one step; params in the same order) ----
struct WeightDecay {  // g += λ p (PyTorch's weight_decay of SGD and Adam)
    double lambda = 5e-4;
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

namespace detail {
template <class R> inline constexpr bool is_rule = requires(const R& r, ParamState& s, Tensor& p) { r.step(s, p, p); };
template <class R>
inline constexpr bool is_modifier = requires(const R& r, std::vector<Tensor>& g) { r.modify(g, g); };
}  // namespace detail

// Whether fx::compile can replay a rule or modifier: true unless the type says
// `static constexpr bool replayable = false;` — work done outside the backend's kernels (host
// arithmetic on read-back values), which a traced step cannot record. fx::compile
// refuses such an optimiser, and fx::train runs its steps eagerly.
template <class R> constexpr bool replayable() {
    if constexpr (requires { R::replayable; }) return R::replayable;
    else return true;
}

// Modifiers in the order they apply, then one rule.
template <class... Parts> struct OptimiserChain {
    static_assert(sizeof...(Parts) > 0, "fluxion: OptimiserChain needs at least a rule");
    std::tuple<Parts...> parts;
    explicit OptimiserChain(Parts... ps) : parts(std::move(ps)...) {
        constexpr std::size_t n = sizeof...(Parts);
        static_assert(detail::is_rule<std::tuple_element_t<n - 1, std::tuple<Parts...>>>,
                      "fluxion: an OptimiserChain ends with a rule (Descent, Momentum, Nesterov, RMSProp, Adam, AdamW)");
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            static_assert((detail::is_modifier<std::tuple_element_t<I, std::tuple<Parts...>>> && ...),
                          "fluxion: only modifiers (WeightDecay, ClipGrad, ClipNorm) come before the rule of an "
                          "OptimiserChain");
        }(std::make_index_sequence<n - 1>());
    }
    const auto& rule() const { return std::get<sizeof...(Parts) - 1>(parts); }
    auto& rule() { return std::get<sizeof...(Parts) - 1>(parts); }
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
template <class R> void apply(const R& r, std::vector<Tensor>& grads, std::vector<Tensor>& params,
                              const std::vector<ParamState*>& states) {
    if constexpr (requires { r.parts; }) {
        std::apply([&](const auto&... part) { (apply(part, grads, params, states), ...); }, r.parts);
    } else if constexpr (is_modifier<R>) {
        r.modify(grads, params);
    } else {
        for (std::size_t i = 0; i < params.size(); ++i) r.step(*states[i], params[i], grads[i]);
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
}  // namespace detail

template <class Rule, class M> OptimiserState<Rule> setup(const Rule& rule, const M& model) {
    static_assert(detail::is_rule<Rule> || requires { rule.rule(); },
                  "fluxion: setup takes a rule (Descent, Momentum, Nesterov, RMSProp, Adam, AdamW) or an "
                  "OptimiserChain ending with one");
    OptimiserState<Rule> opt{rule, {}, {}};
    auto params = detail::trainable_of(model);
    for (std::size_t i = 0; i < params.paths.size(); ++i) {
        ParamState s;
        s.path = params.paths[i];
        detail::final_rule(rule).init(s, params.tensors[i]);
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
