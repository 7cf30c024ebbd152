// fluxion/detail/compiled_plans.hpp — the machinery behind fluxion/compile.hpp's CompiledStep and
// CompiledForward (and mixed_precision.hpp's CompiledMixedStep): the plans of one compiled function,
// the tensors a compiled step relies on, and a snapshot that undoes a step. Not part of the API:
// included by compile.hpp because templates over the user's model need it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fluxion/autodiff.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/optimisers.hpp"

namespace fluxion {

struct CompileStats;

namespace detail {

// The plans of one compiled function, by the shapes and element types of its inputs.
class CompiledPlans {
public:
    CompiledPlans(std::string what, bool cache, bool fuse);
    ~CompiledPlans();
    CompiledPlans(CompiledPlans&&) noexcept;
    CompiledPlans& operator=(CompiledPlans&&) noexcept;

    int find(const Tensor* inputs, std::size_t n) const;  // -1 when none fits
    // Runs step(inputs) eagerly while recording it. `refused` says why no plan could be made (plan -1).
    struct Traced {
        int plan;
        Tensor output;
        std::string refused;
    };
    Traced trace(std::vector<Tensor> inputs, const Device& device,
                 const std::function<Tensor(const std::vector<Tensor>&)>& step);
    // Inside a trace: the calls so far are phase 0 (the loss and gradients), the rest phase 1.
    static void mark_phase();
    void replay(int plan, const Tensor* inputs, int phase);
    double value(int plan) const;          // the one-element output, read on the host
    // The output's n elements (f32 or f64, n <= kMaxValues), read on the host without allocating.
    static constexpr std::size_t kMaxValues = 4;
    void values(int plan, double* out, std::size_t n) const;
    static double read(const Tensor& t);   // a one-element CPU tensor's value, without running a kernel
    const Tensor& output(int plan) const;  // a view of the output's buffer
    std::size_t optimiser_steps(int plan) const;
    // Every optimiser kernel of the plan takes the hyper-parameters (all but t) that `step` passes to
    // the one kernel it runs, on a probe tensor, while no kernel runs (the rule's current values).
    void take_hyperparameters(int plan, const std::function<void(Tensor& probe)>& step);
    void set_optimiser_step(int plan, std::size_t k, std::int64_t t);
    CompileStats stats(int plan) const;
    void clear();
    // DeviceError unless every input is on `device` (the model's).
    void check_devices(const Tensor* inputs, std::size_t n, const Device& device) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The tensors a compiled step relies on, to notice one replaced between calls.
class Identity {
public:
    template <class M, class Rule> void take(const M& model, const OptimiserState<Rule>& opt) {
        held_.clear();
        frozen_.clear();
        for_each_tensor(model, [&](const Tensor& t) { held_.push_back(t); });
        for (const auto& s : opt.params) {
            held_.push_back(s.state1), held_.push_back(s.state2), held_.push_back(s.state3);
            frozen_.push_back(s.frozen);
        }
    }
    template <class M, class Rule> bool same(const M& model, const OptimiserState<Rule>& opt) const {
        std::size_t i = 0, k = 0;
        bool same = true;
        auto check = [&](const Tensor& t) { same = same && i < held_.size() && same_tensor(held_[i++], t); };
        for_each_tensor(model, check);
        for (const auto& s : opt.params) {
            check(s.state1);
            check(s.state2);
            check(s.state3);
            same = same && k < frozen_.size() && frozen_[k++] == s.frozen;
        }
        return same && i == held_.size() && k == frozen_.size();
    }
    Device device() const;  // the model's (CPU when it holds no tensor)

private:
    static bool same_tensor(const Tensor& a, const Tensor& b);
    std::vector<Tensor> held_;  // held, so that a replaced tensor's memory is not reused meanwhile
    std::vector<bool> frozen_;
};

// The random generator's state (fx::seed's), saved when made and put back by restore().
class GeneratorState {
public:
    GeneratorState();
    void restore() const;

private:
    std::shared_ptr<const void> state_;
};

// Everything a training step changes — every tensor of the model (parameters, and buffers such as
// BatchNorm's running statistics), the optimiser's state and step counts, the random generator —
// copied when made, so that restore() undoes the step.
class StepSnapshot {
public:
    template <class M, class Rule> StepSnapshot(const M& model, const OptimiserState<Rule>& opt) {
        for_each_tensor(model, [&](const Tensor& t) { keep(t); });
        for (const auto& s : opt.params) keep(s.state1), keep(s.state2), keep(s.state3), steps_.push_back(s.t);
    }
    template <class M, class Rule> void restore(const M& model, OptimiserState<Rule>& opt) const {
        std::size_t i = 0, k = 0;
        for_each_tensor(model, [&](const Tensor& t) { put_back(t, i++); });
        for (auto& s : opt.params)
            put_back(s.state1, i++), put_back(s.state2, i++), put_back(s.state3, i++), s.t = steps_[k++];
        generator_.restore();
    }

private:
    void keep(const Tensor& t);
    void put_back(const Tensor& t, std::size_t i) const;
    std::vector<Tensor> copies_;  // undefined where the tensor is
    std::vector<std::int64_t> steps_;
    GeneratorState generator_;
};

// What compiled training steps share (CompiledStep, and CompiledMixedStep in mixed_precision.hpp).

// A rule or modifier with host work cannot be replayed: ValueError, unless the step may run eagerly.
inline void refuse_host_work(bool fall_back) {
    if (!fall_back)
        throw ValueError("fx::compile: the optimiser does work outside the backend's kernels (a rule "
                         "or modifier with replayable = false), which a replay would skip; run it "
                         "eagerly (CompileOptions{.fall_back = true}, or fx::train)");
}

// Why a traced step's plan cannot be replayed because it did not update each trainable tensor once
// ("" when it did).
template <class Rule>
std::string optimiser_mismatch(const CompiledPlans& plans, int plan, const OptimiserState<Rule>& opt) {
    std::size_t active = 0;
    for (const auto& s : opt.params) active += s.frozen ? 0 : 1;
    if (plan < 0 || plans.optimiser_steps(plan) == active) return {};
    return "fx::compile: the step ran " + std::to_string(plans.optimiser_steps(plan)) + " optimiser kernels for " +
           std::to_string(active) + " trainable tensors; a compiled step updates each parameter once";
}

// Before a replay's update: the schedules are followed, the rule's hyper-parameters are its own now,
// and each trainable tensor's step count advances.
template <class Rule> void advance_optimiser_steps(CompiledPlans& plans, int plan, OptimiserState<Rule>& opt) {
    follow_schedules(opt);
    plans.take_hyperparameters(plan, [&opt](Tensor& probe) {
        ParamState scratch;
        final_rule(opt.rule).step(scratch, probe, probe);
    });
    std::size_t k = 0;
    for (auto& s : opt.params)
        if (!s.frozen) plans.set_optimiser_step(plan, k++, ++s.t);
}

// After a trace that was refused (the traced step itself ran, eagerly, and counts): ValueError, or
// true when later steps run eagerly.
inline bool run_eagerly(const std::string& refused, bool fall_back) {
    if (!fall_back) throw ValueError(refused + " (or run it eagerly: CompileOptions{.fall_back = true})");
    return true;
}

}  // namespace detail

}  // namespace fluxion
