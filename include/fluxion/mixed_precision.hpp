// fluxion/mixed_precision.hpp — training in f16 or bf16 with f32 master weights (Flux's
// MixedPrecision, PyTorch's autocast with GradScaler).
//
//   auto mp = fx::MixedPrecision(fx::Adam{.eta = 1e-3}, model, fx::DType::f16);   // model: f32
//   for (auto [xb, yb] : loader) double loss = mp.step(lossfn, xb, yb);          // lossfn(m, xb, yb)
//   mp.model();          // the f32 master weights, trained
//   mp.skipped_steps();  // f16 steps whose gradients overflowed, skipped
//   std::cout << mp;     // MixedPrecision(f16, loss scale 32768, 2 of 500 steps skipped)
//
// Each step runs lossfn on a copy of the model in the compute type (the inputs are converted to
// it too), so the forward and backward passes compute in f16 or bf16; the gradients are widened to
// f32 and the rule updates the f32 master weights with f32 state; the compute copy is then rounded
// from the masters again. f16 overflows beyond 65504, so its loss is multiplied by a scale before
// the backward pass and the gradients divided by it after: a step whose gradients are not finite
// changes nothing, is counted, and halves the scale; `growth_interval` finite steps in a row
// double it. bf16 has f32's range and needs no scaling (the scale stays 1 unless asked).
// The masters are a copy: the model passed in is not changed. Non-trainable tensors (BatchNorm's
// running statistics) are kept by the compute copy and copied back to the masters after each step.
#pragma once
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

#include "fluxion/autodiff.hpp"
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
        Tensor loss;
        auto grads = std::get<0>(gradient(
            [&](const M& m) {
                Tensor l = lossfn(m, to_compute(args)...);
                loss = l.detach();  // the unscaled value, which may be finite where l * scale is not
                return l * scale_;
            },
            compute_));
        ++steps_;
        auto wide = f32(grads);
        double magnitude = 0;
        {
            NoGrad no_grad;
            wide = fmap([&](const Tensor& g) { return g / scale_; }, wide);
            for_each_tensor(wide, [&](const Tensor& g) { magnitude += sum(abs(g.to(DType::f64))).item(); });
        }
        const double value = loss.to(DType::f64).item();
        if (!std::isfinite(magnitude)) {
            ++skipped_;
            good_steps_ = 0;
            if (dynamic_) scale_ *= options_.backoff;
            return value;
        }
        update(opt_, master_, wide);
        if (dynamic_ && ++good_steps_ == options_.growth_interval) {
            scale_ *= options_.growth;
            good_steps_ = 0;
        }
        refresh();
        return value;
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

    // Trainable tensors from the masters, the others (running statistics) from the compute copy.
    void refresh() {
        NoGrad no_grad;
        std::set<std::string> trainable;
        visit_trainable(master_, [&](const std::string& path, const Tensor&) { trainable.insert(path); });
        std::map<std::string, Tensor> masters, computed;
        visit_tensors(master_, [&](const std::string& path, const Tensor& t) { masters[path] = t; });
        visit_tensors(compute_, [&](const std::string& path, Tensor& t) {
            if (!t.defined()) return;
            if (trainable.count(path)) t = masters.at(path).to(compute_type_);
            else computed[path] = t;
        });
        visit_tensors(master_, [&](const std::string& path, Tensor& t) {
            if (t.defined() && !trainable.count(path)) t = computed.at(path).to(t.dtype());
        });
    }

    DType compute_type_;
    LossScaleOptions options_;
    M master_, compute_;
    OptimiserState<Rule> opt_;
    bool dynamic_;
    double scale_;
    std::int64_t steps_ = 0, skipped_ = 0, good_steps_ = 0;
};

}  // namespace fluxion
