// fluxion/mixed_precision.hpp — training in f16 or bf16 with f32 master weights (Flux's
// MixedPrecision, PyTorch's autocast with GradScaler).
//
//   auto mp = fx::MixedPrecision(fx::Adam{.eta = 1e-3}, model, fx::DType::f16);   // model: f32
//   for (auto [xb, yb] : loader) double loss = mp.step(lossfn, xb, yb);          // lossfn(m, xb, yb)
//   mp.model();          // the f32 master weights, trained
//   mp.skipped_steps();  // f16 steps whose gradients overflowed, skipped
//   std::cout << mp;     // MixedPrecision(f16, loss scale 32768, 2 of 500 steps skipped)
//
//   auto step = fx::compile(lossfn, mp);   // the same step, compiled (fluxion/compile.hpp)
//   for (auto [xb, yb] : loader) float loss = step(xb, yb);
//
// Each step runs lossfn on a copy of the model in the compute type (the inputs are converted to
// it too), so the forward and backward passes compute in f16 or bf16; the gradients are widened to
// f32 and the rule updates the f32 master weights with f32 state; the compute copy is then rounded
// from the masters again. f16 overflows beyond 65504, so its loss is multiplied by a scale before
// the backward pass and the gradients divided by it after: a step whose gradients are not finite
// changes nothing, is counted, and halves the scale; `growth_interval` finite steps in a row
// double it. bf16 has f32's range and needs no scaling (the scale stays 1 unless asked).
// Where the device's backend has the multi-tensor kernels for it (the CPU's), the check is one
// kernel over all gradients and the widening, unscaling, update and rounding one more, as PyTorch's
// GradScaler and fused optimisers do; elsewhere the same arithmetic runs kernel by kernel.
// The masters are a copy: the model passed in is not changed. Non-trainable tensors (BatchNorm's
// running statistics) are kept by the compute copy and copied back to the masters after each step.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fluxion/autodiff.hpp"
#include "fluxion/compile.hpp"
#include "fluxion/detail/mixed_steps.hpp"
#include "fluxion/error.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/optimisers.hpp"

namespace fluxion {

struct LossScaleOptions {
    std::optional<bool> dynamic = std::nullopt;  // default: on for f16, off for bf16
    double initial = 65536;                      // 2^16, PyTorch's GradScaler default
    double growth = 2, backoff = 0.5;
    std::int64_t growth_interval = 2000;
};

template <class Rule, class M> class MixedPrecision {
public:
    MixedPrecision(const Rule& rule, const M& model, DType compute, const LossScaleOptions& options = {})
        : compute_type_(checked(compute)),
          options_(checked(options)),
          master_(fmap([](const Tensor& t) { return t.clone(); }, f32(model))),
          compute_(PrecisionMover{compute}(master_)),
          opt_(setup(rule, master_)),
          dynamic_(options.dynamic.value_or(compute == DType::f16)),
          scale_(dynamic_ ? options.initial : 1.0) {}

    // One step: returns the (unscaled) loss of lossfn(model, args...) computed in the compute type.
    template <class F, class... Args> double step(F&& lossfn, const Args&... args) {
        return checked_step([](double) {}, lossfn, args...);
    }
    const M& model() const { return master_; }           // f32 master weights
    const M& compute_model() const { return compute_; }  // the copy in the compute type
    OptimiserState<Rule>& optimiser() { return opt_; }
    DType compute_type() const { return compute_type_; }
    double loss_scale() const { return scale_; }
    std::int64_t steps() const { return steps_; }
    std::int64_t skipped_steps() const { return skipped_; }

    friend std::ostream& operator<<(std::ostream& os, const MixedPrecision& mp) {
        return os << "MixedPrecision(" << name(mp.compute_type_) << ", loss scale " << mp.scale_ << ", " << mp.skipped_
                  << " of " << mp.steps_ << " steps skipped)";
    }

private:
    template <class, class, class> friend class CompiledMixedStep;

    using Grads = decltype(f32(std::declval<const M&>()));
    // The forward and backward passes of a step, in the compute type: the loss (unscaled), the
    // gradients, and a one-element tensor that is 0 when every gradient (divided by the scale) is
    // finite and NaN otherwise. Where the device's backend has mixed precision's multi-tensor
    // kernels (core/backend.hpp) and the rule is one of fluxion's (detail::is_kernel_rule: not a
    // chain, not the user's own), the gradients stay in the
    // compute type and scaled (`widened` false): one kernel checks them all, and apply's one kernel
    // widens, unscales and applies them and rounds the masters into the compute copy, as PyTorch's
    // GradScaler and fused optimisers do. Otherwise the step is composed of the kernels every backend
    // has: the gradients widened to f32 and unscaled, and a gradient's max and min carry any NaN in
    // it (every backend's kernel contract) and its infinities, and 0 times either is NaN. Exact, with
    // no sum that could overflow. Unscaled, the gradients are read in the compute type, half the bytes
    // of their f32 copies and as finite (widening is exact); scaled, the f32 quotients are read,
    // which a tiny scale could overflow. The two ways compute the same bits.
    struct Pass {
        Tensor loss;
        Grads grads;
        Tensor nonfinite;
        bool widened = true;
        double scale = 1;  // the loss's, which accept() may change before apply() divides by it
    };
    template <class F, class... Args> Pass passes(F& lossfn, const Args&... args) {
        Tensor loss;
        auto grads = std::get<0>(gradient(
            [&](const M& m) {
                Tensor l = lossfn(m, to_compute(args)...);
                loss = l.detach();  // the unscaled value, which may be finite where l * scale is not
                return scale_ == 1 ? l : l * scale_;
            },
            compute_));
        NoGrad no_grad;
        if constexpr (detail::is_kernel_rule<Rule>) {
            std::vector<Tensor> all;
            for_each_tensor(grads, [&](const Tensor& g) {
                if (g.defined() && g.numel() > 0) all.push_back(g);
            });
            if (Tensor flag = detail::nonfinite_fused(all, scale_); flag.defined())
                return Pass{loss, grads, flag, false, scale_};
        }
        Pass pass{loss, f32(grads), Tensor()};
        const auto check = [&](const Tensor& g) {
            if (g.numel() == 0) return;
            Tensor zero = max(g) * 0.0 + min(g) * 0.0;
            pass.nonfinite = pass.nonfinite.defined() ? pass.nonfinite + zero : zero;
        };
        if (scale_ != 1) {
            pass.grads = fmap([&](const Tensor& g) { return g / scale_; }, pass.grads);
            for_each_tensor(pass.grads, check);
        } else {
            for_each_tensor(grads, check);
        }
        if (!pass.nonfinite.defined()) pass.nonfinite = zeros({}, {.device = loss.device()});
        pass.nonfinite = pass.nonfinite.to(DType::f32);
        return pass;
    }
    // step, with check(loss) run before the update (if it throws, nothing changed).
    template <class Check, class F, class... Args> double checked_step(Check&& check, F& lossfn, const Args&... args) {
        Pass pass = passes(lossfn, args...);
        const double value = pass.loss.item();
        check(value);
        if (accept(std::isfinite(pass.nonfinite.item()))) apply(pass);
        return value;
    }
    // Counts the step and adjusts the scale: false when its gradients were not finite (skip it).
    bool accept(bool finite) {
        ++steps_;
        if (!finite) {
            ++skipped_;
            good_steps_ = 0;
            if (dynamic_) scale_ *= options_.backoff;
            return false;
        }
        if (dynamic_ && ++good_steps_ == options_.growth_interval) {
            scale_ *= options_.growth;
            good_steps_ = 0;
        }
        return true;
    }
    // The rule's update of the masters, then the compute copy rounded from them again: in one
    // kernel where passes left the gradients in the compute type and the backend has it.
    void apply(Pass& pass) {
        if (!pass.widened) {
            if (fused_update(pass.grads, pass.scale)) return refresh(false);  // the copies are rounded
            pass.grads = fmap([&](const Tensor& g) { return pass.scale == 1 ? f32(g) : f32(g) / pass.scale; },
                              pass.grads);
            pass.widened = true;
        }
        update(opt_, master_, pass.grads);
        refresh(true);  // the copies too
    }
    // detail::mixed_update_fused over the trainable tensors that are not frozen; false where it
    // cannot run (then nothing changed).
    bool fused_update(const Grads& grads, double scale) {
        if constexpr (detail::is_kernel_rule<Rule>) {
            auto params = detail::trainable_of(master_), gs = detail::trainable_of(grads);
            auto copies = detail::trainable_of(compute_);
            detail::check_update(opt_.params, params, gs);
            if (copies.paths != params.paths) return false;
            detail::follow_schedules(opt_);
            std::vector<Tensor> p, g, c;
            std::vector<ParamState*> states;
            for (std::size_t i = 0; i < opt_.params.size(); ++i) {
                if (opt_.params[i].frozen) continue;
                p.push_back(params.tensors[i]);
                g.push_back(gs.tensors[i]);
                c.push_back(copies.tensors[i]);
                states.push_back(&opt_.params[i]);
            }
            if (p.empty()) return true;
            return detail::mixed_update_fused(
                [this] {
                    ParamState scratch;
                    opt_.rule.step(scratch, probe_, probe_);
                },
                p, g, states, c, scale);
        } else {
            (void)grads, (void)scale;
            return false;
        }
    }

    static DType checked(DType compute) {
        if (compute != DType::f16 && compute != DType::bf16)
            throw DTypeError(std::string("MixedPrecision: the compute type is ") + name(compute) +
                             "; it must be f16 or bf16 (the master weights are f32)");
        return compute;
    }
    static const LossScaleOptions& checked(const LossScaleOptions& o) {
        if (!(o.initial > 0) || !(o.growth >= 1) || !(o.backoff > 0 && o.backoff < 1) || o.growth_interval < 1)
            throw ValueError("MixedPrecision: loss scale options initial=" + std::to_string(o.initial) +
                             ", growth=" + std::to_string(o.growth) + ", backoff=" + std::to_string(o.backoff) +
                             ", growth_interval=" + std::to_string(o.growth_interval) +
                             "; they need initial > 0, growth >= 1, 0 < backoff < 1 and growth_interval >= 1");
        return o;
    }

    template <class A> A to_compute(const A& a) const {
        if constexpr (std::is_same_v<A, Tensor>) return is_floating(a.dtype()) ? a.to(compute_type_) : a;
        else return a;
    }

    // Trainable tensors from the masters, the others (running statistics) from the compute copy,
    // in place: the tensors stay the same objects, as a compiled step needs. Without
    // `all_trainable`, the trainable tensors that are not frozen are left alone (the fused update
    // rounded them).
    void refresh(bool all_trainable) {
        NoGrad no_grad;
        std::set<std::string> trainable, rounded;
        visit_trainable(master_, [&](const std::string& path, const Tensor&) { trainable.insert(path); });
        if (!all_trainable)
            for (const auto& s : opt_.params)
                if (!s.frozen) rounded.insert(s.path);
        std::map<std::string, Tensor> masters, computed;
        visit_tensors(master_, [&](const std::string& path, const Tensor& t) { masters[path] = t; });
        visit_tensors(compute_, [&](const std::string& path, Tensor& t) {
            if (!t.defined()) return;
            if (!trainable.count(path)) computed[path] = t;
            else if (!rounded.count(path)) t.copy_(masters.at(path));
        });
        visit_tensors(master_, [&](const std::string& path, Tensor& t) {
            if (t.defined() && !trainable.count(path)) t.copy_(computed.at(path));
        });
    }

    DType compute_type_;
    LossScaleOptions options_;
    M master_, compute_;
    OptimiserState<Rule> opt_;
    bool dynamic_;
    double scale_;
    std::int64_t steps_ = 0, skipped_ = 0, good_steps_ = 0;
    Tensor probe_ = zeros({1});  // fused_update's: the rule's step on it tells its kernel (none runs)
};

// A compiled mixed-precision step (fx::compile's replay, see compile.hpp): the forward and backward
// passes in the compute type and the masters' update are traced once and replayed without a tape
// or allocations. Between the two phases the host reads the loss and whether the gradients were
// finite, so an overflowing step is skipped and counted as MixedPrecision::step does. The loss scale
// is fixed by a trace: a step after the scale changed (dynamic scaling: after an overflow, and every
// growth_interval steps) traces again.
template <class LossFn, class Rule, class M> class CompiledMixedStep {
public:
    CompiledMixedStep(LossFn lossfn, MixedPrecision<Rule, M>& mp, CompileOptions options)
        : lossfn_(std::move(lossfn)), mp_(mp), plans_("compiled mixed-precision step", options.cache, options.fuse),
          fall_back_(options.fall_back) {}

    float operator()(const Tensor& x, const Tensor& y) {
        return (*this)(x, y, [](double) {});
    }
    // check(loss) runs before the update (fx::train refuses a NaN there); if it throws, nothing changed.
    template <class Check> float operator()(const Tensor& x, const Tensor& y, Check&& check) {
        if constexpr (!replayable<Rule>()) {
            detail::refuse_host_work(fall_back_);
            return eager(x, y, check);
        }
        if (eager_) return eager(x, y, check);
        std::array<Tensor, 2> in{x.contiguous(), y.contiguous()};
        if (!masters_.same(mp_.master_, mp_.opt_) || !computed_.same(mp_.compute_, none_) ||
            traced_scale_ != mp_.scale_) {
            plans_.clear();
            masters_.take(mp_.master_, mp_.opt_);
            computed_.take(mp_.compute_, none_);
            traced_scale_ = mp_.scale_;
        }
        plans_.check_devices(in.data(), in.size(), masters_.device());
        int p = plans_.find(in.data(), in.size());
        if (p < 0) return trace(in, check);
        plans_.replay(p, in.data(), 0);
        double out[2];
        plans_.values(p, out, 2);
        check(out[0]);
        if (mp_.accept(std::isfinite(out[1]))) {
            detail::advance_optimiser_steps(plans_, p, mp_.opt_);
            plans_.replay(p, in.data(), 1);
        }
        return static_cast<float>(out[0]);
    }
    CompileStats stats(const Tensor& x, const Tensor& y) const {
        std::array<Tensor, 2> in{x, y};
        return plans_.stats(plans_.find(in.data(), in.size()));
    }

private:
    template <class Check> float eager(const Tensor& x, const Tensor& y, Check& check) {
        return static_cast<float>(mp_.checked_step(check, lossfn_, x, y));
    }

    template <class Check> float trace(const std::array<Tensor, 2>& in, Check& check) {
        double value = 0;
        bool applied = false;
        auto traced = plans_.trace({in[0], in[1]}, masters_.device(), [&](const std::vector<Tensor>& v) {
            auto pass = mp_.passes(lossfn_, v[0], v[1]);
            Tensor out = stack({pass.loss.to(DType::f32).reshape({}), pass.nonfinite.reshape({})});
            value = detail::CompiledPlans::read(pass.loss);
            const bool finite = std::isfinite(detail::CompiledPlans::read(pass.nonfinite));
            check(value);
            detail::CompiledPlans::mark_phase();
            if (mp_.accept(finite)) {
                mp_.apply(pass);
                applied = true;
            }
            return out;
        });
        if (traced.plan >= 0 && (!applied || traced_scale_ != mp_.scale_)) {
            plans_.clear();  // a skipped step recorded no update, and a new scale needs a new trace
        } else if (traced.refused.empty()) {
            traced.refused = detail::optimiser_mismatch(plans_, traced.plan, mp_.opt_);
            if (!traced.refused.empty()) plans_.clear();
        }
        if (!traced.refused.empty()) eager_ = detail::run_eagerly(traced.refused, fall_back_);
        return static_cast<float>(value);
    }

    LossFn lossfn_;
    MixedPrecision<Rule, M>& mp_;
    detail::CompiledPlans plans_;
    detail::Identity masters_, computed_;
    OptimiserState<Descent> none_;
    double traced_scale_ = 0;
    bool fall_back_, eager_ = false;
};

// A mixed-precision training step, compiled: lossfn(mp.compute_model(), x, y), its gradient, and
// the update of the f32 masters (MixedPrecision::step, replayed).
template <class LossFn, class Rule, class M>
CompiledMixedStep<std::decay_t<LossFn>, Rule, M> compile(LossFn&& lossfn, MixedPrecision<Rule, M>& mp,
                                                          CompileOptions options = {}) {
    return {std::forward<LossFn>(lossfn), mp, options};
}

}  // namespace fluxion
