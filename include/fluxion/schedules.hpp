// fluxion/schedules.hpp — hyper-parameter schedules (ParameterSchedulers.jl's names, fields and
// formulas). A schedule is a value s(t) of the step t = 1, 2, 3, ... (1-based, as ParameterSchedulers;
// PyTorch's scheduler after `e` calls of step() gives s(e + 1)). Each prints as it is written.
//
//   fx::Schedule s = fx::Sequence({{fx::Triangle{.l0 = 0, .l1 = 2e-3, .period = 200}, 100},      // warm-up
//                                  {fx::CosAnneal{.l0 = 2e-3, .l1 = 0, .period = 900}, 900}});   // then cosine
//   double eta = s(1);                              // 0
//   auto opt = fx::setup(fx::AdamW{}, model);
//   fx::schedule(opt, &fx::AdamW::eta, s);          // any hyper-parameter of the rule, not only η
//   fx::train(lossfn, model, data, opt);            // each step sets η = s(t) first, compiled steps too
//
// Decay:   Step     start · decay^i, i the number of step_sizes passed (one size: every step_size steps,
//                   PyTorch's StepLR; several: at their running sums, then constant)
//          Exp      start · decay^(t-1)                          (PyTorch's ExponentialLR)
//          Poly     start · (1 - (t-1)/max_iter)^degree          (t ≤ max_iter; PyTorch's PolynomialLR)
//          Inv      start / (1 + (t-1)·decay)^degree
// Cyclic (amplitude |l0 - l1| above min(l0, l1), `period` steps per cycle):
//          Triangle, TriangleDecay2 (amplitude halved each cycle), TriangleExp (amplitude · decay^(t-1))
//                   — PyTorch's CyclicLR triangular, triangular2, exp_range with step_size_up = period/2
//          Sin, SinDecay2, SinExp                                — the same with |sin(π (t-1)/period)|
//          CosAnneal  (1 + cos(π t̂/period))/2, t̂ = (t-1) mod period with restart, t-1 without
//                   — PyTorch's CosineAnnealingWarmRestarts (T_mult 1) and CosineAnnealingLR
//          OneCycle   a cosine from startval up to maxval over ceil(percent_start·nsteps) steps, then
//                     down to endval over the rest (t ≤ nsteps)
// Composed: Constant, Sequence (each schedule for its number of steps, from its own t = 1; the last
//          continues), Loop (f(mod1(t, period))), Shifted (s(t - 1 + offset)), Interpolator
//          (s(ceil(t / rate)): a schedule written per epoch followed per step, rate steps an epoch),
//          Shortened (s(t) for t ≤ nsteps only). A callable of your own (t -> double) is a schedule
//          too; it prints as λ.
// A bad argument (a period or step size < 1, a rate ≤ 0, t < 1, t past Poly's max_iter, OneCycle's
// or Shortened's nsteps) throws fx::ValueError when the schedule is evaluated.
//
// fx::schedule(opt, &Rule::field, s) makes every later update (fx::update, fx::train, compiled steps,
// which take the rule's hyper-parameters anew at each replay without tracing again) first set that
// field of the optimiser's rule (an OptimiserChain's last) to s(t), t being 1 + the steps the
// optimiser has taken (ParamState::t, which checkpoints keep: a resumed run follows the schedule on
// from where it stopped). It overrides fx::adjust for that field.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fluxion/optimisers.hpp"

namespace fluxion {

// ---- decay ----
struct Step {
    double start = 1, decay = 0.1;
    std::vector<std::int64_t> step_sizes = {1};
    double operator()(std::int64_t t) const;
};
struct Exp {
    double start = 1, decay = 0.9;
    double operator()(std::int64_t t) const;
};
struct Poly {
    double start = 1;
    double degree = 1;
    std::int64_t max_iter = 1;
    double operator()(std::int64_t t) const;
};
struct Inv {
    double start = 1, decay = 0.1;
    double degree = 1;
    double operator()(std::int64_t t) const;
};

// ---- cyclic ----
struct Triangle {
    double l0 = 0, l1 = 1;
    std::int64_t period = 1;
    double operator()(std::int64_t t) const;
};
struct TriangleDecay2 {
    double l0 = 0, l1 = 1;
    std::int64_t period = 1;
    double operator()(std::int64_t t) const;
};
struct TriangleExp {
    double l0 = 0, l1 = 1;
    std::int64_t period = 1;
    double decay = 0.9;
    double operator()(std::int64_t t) const;
};
struct Sin {
    double l0 = 0, l1 = 1;
    std::int64_t period = 1;
    double operator()(std::int64_t t) const;
};
struct SinDecay2 {
    double l0 = 0, l1 = 1;
    std::int64_t period = 1;
    double operator()(std::int64_t t) const;
};
struct SinExp {
    double l0 = 0, l1 = 1;
    std::int64_t period = 1;
    double decay = 0.9;
    double operator()(std::int64_t t) const;
};
struct CosAnneal {
    double l0 = 1, l1 = 0;
    std::int64_t period = 1;
    bool restart = true;
    double operator()(std::int64_t t) const;
};
struct OneCycle {
    std::int64_t nsteps = 1;
    double maxval = 1;
    std::optional<double> startval = {}, endval = {};  // maxval / 25 and maxval / 1e5 unless given
    double percent_start = 0.25;
    double operator()(std::int64_t t) const;
};

// ---- any schedule, and compositions ----
// A schedule of any type (a copy shares it; schedules are immutable values).
class Schedule {
public:
    Schedule(double value);  // NOLINT(google-explicit-constructor): a number is a constant schedule
    template <class S>
    requires(!std::is_same_v<S, Schedule>) && requires(const S& s, std::int64_t t) {
        { s(t) } -> std::convertible_to<double>;
    }
    Schedule(S s)  // NOLINT(google-explicit-constructor)
        : impl_(std::make_shared<const Model<S>>(std::move(s))) {}
    double operator()(std::int64_t t) const { return impl_->at(t); }
    friend std::ostream& operator<<(std::ostream& os, const Schedule& s);

private:
    struct Concept {
        virtual ~Concept() = default;
        virtual double at(std::int64_t t) const = 0;
        virtual void print(std::ostream& os) const = 0;
    };
    template <class S> struct Model final : Concept {
        S s;
        explicit Model(S v) : s(std::move(v)) {}
        double at(std::int64_t t) const override { return static_cast<double>(s(t)); }
        void print(std::ostream& os) const override;
    };
    std::shared_ptr<const Concept> impl_;
};

struct Constant {
    double value = 0;
    double operator()(std::int64_t) const { return value; }
};
struct Sequence {
    std::vector<std::pair<Schedule, std::int64_t>> stages;  // {schedule, its number of steps}
    explicit Sequence(std::vector<std::pair<Schedule, std::int64_t>> s) : stages(std::move(s)) {}
    double operator()(std::int64_t t) const;
};
struct Loop {
    Schedule f;
    std::int64_t period;
    double operator()(std::int64_t t) const;
};
struct Shifted {
    Schedule schedule;
    std::int64_t offset;
    double operator()(std::int64_t t) const;
};
struct Interpolator {
    Schedule schedule;
    double rate;  // steps of the Interpolator per step of `schedule`; any positive number
    double operator()(std::int64_t t) const;
};
struct Shortened {
    Schedule schedule;
    std::int64_t nsteps;
    double operator()(std::int64_t t) const;
};

std::ostream& operator<<(std::ostream& os, const Step& s);
std::ostream& operator<<(std::ostream& os, const Exp& s);
std::ostream& operator<<(std::ostream& os, const Poly& s);
std::ostream& operator<<(std::ostream& os, const Inv& s);
std::ostream& operator<<(std::ostream& os, const Triangle& s);
std::ostream& operator<<(std::ostream& os, const TriangleDecay2& s);
std::ostream& operator<<(std::ostream& os, const TriangleExp& s);
std::ostream& operator<<(std::ostream& os, const Sin& s);
std::ostream& operator<<(std::ostream& os, const SinDecay2& s);
std::ostream& operator<<(std::ostream& os, const SinExp& s);
std::ostream& operator<<(std::ostream& os, const CosAnneal& s);
std::ostream& operator<<(std::ostream& os, const OneCycle& s);
std::ostream& operator<<(std::ostream& os, const Constant& s);
std::ostream& operator<<(std::ostream& os, const Sequence& s);
std::ostream& operator<<(std::ostream& os, const Loop& s);
std::ostream& operator<<(std::ostream& os, const Shifted& s);
std::ostream& operator<<(std::ostream& os, const Interpolator& s);
std::ostream& operator<<(std::ostream& os, const Shortened& s);
// What it prints ("CosAnneal(l0 = 0.1, l1 = 0, period = 100, restart = true)").
std::string repr(const Schedule& s);

namespace detail {
void print_callable(std::ostream& os);  // a schedule of the user's that does not print: "λ"
}  // namespace detail

template <class S> void Schedule::Model<S>::print(std::ostream& os) const {
    // A lambda without captures would print as a pointer converted to bool.
    if constexpr (!std::is_convertible_v<S, bool> && requires { os << s; }) os << s;
    else detail::print_callable(os);
}

// ---- driving an optimiser's hyper-parameter ----
// Every later update first sets `field` of opt's rule (an OptimiserChain's last) to s(t).
template <class Rule, class R> void schedule(OptimiserState<Rule>& opt, double R::*field, Schedule s) {
    using Final = std::remove_cvref_t<decltype(detail::final_rule(opt.rule))>;
    static_assert(std::is_same_v<Final, R>,
                  "fluxion: schedule a field of the optimiser's rule (an OptimiserChain's last), e.g. &fx::Adam::eta");
    opt.schedules.push_back(
        [field, s = std::move(s)](Rule& rule, std::int64_t t) { detail::final_rule(rule).*field = s(t); });
}

}  // namespace fluxion
