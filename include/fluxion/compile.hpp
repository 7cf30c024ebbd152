// fluxion/compile.hpp — compiled steps (docs/ARCHITECTURE.md, "Compiled steps"): SimpleNNs'
// preallocated model, made automatic.
//
//   auto step = fx::compile(lossfn, model, opt);   // lossfn(m, x, y) returns a one-element tensor
//   float l = step(xb, yb);                        // one training step: forward, gradient, update
//   auto fwd = fx::compile(model);
//   fx::Tensor y = fwd(x);                         // inference
//
// The first call with inputs of new shapes runs eagerly (it is a real step) and records every kernel
// it runs — forward, backward, optimiser — with its static shapes (on the CPU, where the plan fuses
// kernels, that step is then undone and replayed, so that every step is a replay). Everything the
// step creates is then given a place in one arena, reused by lifetime. Later calls with the same input shapes and
// element types replay the recorded kernels in a flat loop: no tape, no shape checks, no heap
// allocation. Each new set of shapes (the last, smaller batch; evaluation batches) gets a plan of
// its own. The model and the optimiser state stay the tensors the user holds: after compiled steps
// the model is trained, fx::save saves it, and eager calls see the new values.
//
// A trace fixes what the step decided on the host:
//  - train/test mode (trainmode/testmode before compiling; compile once per mode);
//  - values read on the host inside the loss function (a branch on a tensor's value);
//  - the hyper-parameters of the optimiser's modifiers (WeightDecay's λ, ClipNorm's ω); its rule's
//    (η, β1, ..., as fx::adjust or a schedule, fx::schedule, set them) are taken anew at every
//    replay, and its step count advances (Adam's bias correction).
// Random numbers (Dropout) are drawn at every replay from the generator eager code uses, so a
// compiled run draws the same numbers as an eager one. A model tensor replaced by the user (or a new
// optimiser state, or a frozen/thawed parameter) is noticed at the next call: every plan is dropped
// and that call traces again. Inputs must be on the model's device (DeviceError otherwise); a
// non-contiguous input is copied first (that copy allocates).
// fwd(x) returns a view of the plan's output buffer: it holds the result until the next call with
// inputs of that shape; clone() it to keep it longer.
// Compiled steps run on every device: a replay calls the device's kernels from the plan, with the
// step's intermediates in one arena on the device and its host-side work (random numbers) in one on
// the host. Work on a third device inside the step is not followed (run such a step eagerly).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/autodiff.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/optimisers.hpp"

namespace fluxion {

struct CompileOptions {
    bool cache = true;       // one plan per set of input shapes; false: inputs of new shapes are an error
    bool fall_back = false;  // a step that cannot be replayed (it keeps a tensor it made outside the
                             // function, ...) runs eagerly instead of raising ValueError
    bool fuse = true;        // replay some runs of kernels as one fused call each, on every backend
                             // (docs/ARCHITECTURE.md, "Fusion"); FLUXION_FUSE=0 turns it off too
};

// What the plan for the latest inputs holds.
struct CompileStats {
    std::size_t kernels = 0;             // calls replayed per step, after fusion
    std::size_t traced_kernels = 0;      // kernel calls the traced step made (kernels, without fusion)
    std::size_t arena_bytes = 0;         // one arena for every tensor the step creates
    std::size_t intermediate_bytes = 0;  // those tensors' sizes added up (what eager steps allocate)
    bool recorded = false;               // the device replays each phase as one recorded submission
};

}  // namespace fluxion

// What CompiledStep and CompiledForward are made of (their plans, the tensors they watch).
#include "fluxion/detail/compiled_plans.hpp"

namespace fluxion {

template <class LossFn, class Model, class Rule> class CompiledStep {
public:
    CompiledStep(LossFn lossfn, Model& model, OptimiserState<Rule>& opt, CompileOptions options)
        : lossfn_(std::move(lossfn)), model_(model), opt_(opt), plans_("compiled step", options.cache, options.fuse),
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
        if (!identity_.same(model_, opt_)) {
            plans_.clear();
            identity_.take(model_, opt_);
        }
        plans_.check_devices(in.data(), in.size(), identity_.device());
        int p = plans_.find(in.data(), in.size());
        if (p < 0) return trace(in, check);
        return replay(p, in, check);
    }
    CompileStats stats(const Tensor& x, const Tensor& y) const {
        std::array<Tensor, 2> in{x, y};
        return plans_.stats(plans_.find(in.data(), in.size()));
    }

private:
    template <class Check> float eager(const Tensor& x, const Tensor& y, Check& check) {
        auto [l, grads] = withgradient([&](const Model& m) { return lossfn_(m, x, y); }, model_);
        double value = l.item();
        check(value);
        update(opt_, model_, grads);
        return static_cast<float>(value);
    }

    template <class Check> float replay(int p, const std::array<Tensor, 2>& in, Check& check) {
        plans_.replay(p, in.data(), 0);
        double value = plans_.value(p);
        check(value);
        detail::advance_optimiser_steps(plans_, p, opt_);
        plans_.replay(p, in.data(), 1);
        return static_cast<float>(value);
    }

    // A CPU plan may fuse kernels (fusion.hpp), and a fused kernel may round differently in the last
    // bits from the eager kernels the trace ran (oneDNN's convolution with its bias and relu inside,
    // on some CPUs). So that every step of a compiled run is a replay, and a run restarted from a
    // checkpoint, which traces again, matches an unbroken one bit for bit, the traced step is then
    // undone (from a copy of everything it changes, made before it) and replayed.
    template <class Check> float trace(const std::array<Tensor, 2>& in, Check& check) {
        std::optional<detail::StepSnapshot> before;
        if (identity_.device().is_cpu()) before.emplace(model_, opt_);
        double value = 0;
        auto traced = plans_.trace({in[0], in[1]}, identity_.device(), [&](const std::vector<Tensor>& v) {
            auto [l, grads] = withgradient([&](const Model& m) { return lossfn_(m, v[0], v[1]); }, model_);
            value = detail::CompiledPlans::read(l);
            check(value);
            detail::CompiledPlans::mark_phase();
            update(opt_, model_, grads);
            return l;
        });
        if (traced.refused.empty()) {
            traced.refused = detail::optimiser_mismatch(plans_, traced.plan, opt_);
            if (!traced.refused.empty()) plans_.clear();
        }
        if (!traced.refused.empty()) {
            eager_ = detail::run_eagerly(traced.refused, fall_back_);
            return static_cast<float>(value);
        }
        if (const CompileStats st = plans_.stats(traced.plan); before && st.kernels != st.traced_kernels) {
            before->restore(model_, opt_);
            return replay(traced.plan, in, check);
        }
        return static_cast<float>(value);
    }

    LossFn lossfn_;
    Model& model_;
    OptimiserState<Rule>& opt_;
    detail::CompiledPlans plans_;
    detail::Identity identity_;
    bool fall_back_, eager_ = false;
};

template <class Model> class CompiledForward {
public:
    CompiledForward(const Model& model, CompileOptions options)
        : model_(model), plans_("compiled model", options.cache, options.fuse) {}

    Tensor operator()(const Tensor& x) {
        std::array<Tensor, 1> in{x.contiguous()};
        if (!identity_.same(model_, none_)) {
            plans_.clear();
            identity_.take(model_, none_);
        }
        plans_.check_devices(in.data(), in.size(), identity_.device());
        int p = plans_.find(in.data(), in.size());
        if (p < 0) {
            NoGrad no_grad;
            auto traced = plans_.trace({in[0]}, identity_.device(), [&](const std::vector<Tensor>& v) { return model_(v[0]); });
            if (!traced.refused.empty()) throw ValueError(traced.refused);
            return traced.output;
        }
        plans_.replay(p, in.data(), 0);
        return plans_.output(p);
    }
    CompileStats stats(const Tensor& x) const {
        std::array<Tensor, 1> in{x};
        return plans_.stats(plans_.find(in.data(), in.size()));
    }

private:
    const Model& model_;
    OptimiserState<Descent> none_;
    detail::CompiledPlans plans_;
    detail::Identity identity_;
};

// A training step: lossfn(model, x, y) -> loss, its gradient, and opt's update of model.
template <class LossFn, class Model, class Rule>
CompiledStep<std::decay_t<LossFn>, Model, Rule> compile(LossFn&& lossfn, Model& model, OptimiserState<Rule>& opt,
                                                        CompileOptions options = {}) {
    return {std::forward<LossFn>(lossfn), model, opt, options};
}

// Inference: model(x). The compiled function refers to `model` (its later training shows), so the
// model must outlive it: a temporary is refused at compile time.
template <class Model> CompiledForward<Model> compile(const Model& model, CompileOptions options = {}) {
    return {model, options};
}
template <class Model> void compile(const Model&& model, CompileOptions options = {}) = delete;

}  // namespace fluxion
