// autodiff.cpp — the tape: recording ops, and the reverse sweep.
#include "fluxion/autodiff.hpp"

#include <algorithm>

#include "core/op_arguments.hpp"
#include "core/tape.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {
thread_local bool g_grad_enabled = true;
thread_local detail::TapeData* g_active = nullptr;
thread_local detail::LeafObserver* g_leaf_observer = nullptr;

// For each entry, the leaves whose last contribution it makes in the reverse sweep (the first
// entry, in recording order, that reads them); leaves no entry reads are listed in `unused`.
struct LeafSchedule {
    std::vector<std::vector<std::size_t>> after;  // by entry index: positions in TapeData::leaves
    std::vector<std::size_t> unused;
};
LeafSchedule schedule_leaves(const detail::TapeData& d) {
    LeafSchedule s;
    s.after.resize(d.entries.size());
    std::vector<std::int64_t> position(static_cast<std::size_t>(d.next_id), -1);
    for (std::size_t k = 0; k < d.leaves.size(); ++k)
        position[static_cast<std::size_t>(d.leaves[k].first)] = std::int64_t(k);
    std::vector<bool> placed(d.leaves.size(), false);
    for (std::size_t e = 0; e < d.entries.size(); ++e)
        for (const detail::TapeInput& in : d.entries[e].inputs) {
            const std::int64_t id = in.id;
            if (id < 0 || position[static_cast<std::size_t>(id)] < 0) continue;
            const auto k = static_cast<std::size_t>(position[static_cast<std::size_t>(id)]);
            if (!placed[k]) placed[k] = true, s.after[e].push_back(k);
        }
    for (std::size_t k = 0; k < d.leaves.size(); ++k)
        if (!placed[k]) s.unused.push_back(k);
    return s;
}
}  // namespace

NoGrad::NoGrad() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGrad::~NoGrad() { g_grad_enabled = previous_; }
bool grad_enabled() { return g_grad_enabled; }

namespace detail {

void set_leaf_observer(LeafObserver* observer) { g_leaf_observer = observer; }

TapeData* active_tape() { return g_grad_enabled ? g_active : nullptr; }

bool any_tracked(const std::vector<Tensor>& inputs) {
    TapeData* tape = active_tape();
    if (!tape) return false;
    for (const auto& t : inputs)
        if (t.defined() && impl_of(t)->tape == tape) return true;
    return false;
}

Tensor record(const char* op, const std::vector<Tensor>& inputs, Tensor out, BackwardFn backward) {
    TapeData* tape = active_tape();
    if (!tape || !is_floating(out.dtype()) || !any_tracked(inputs)) return out;
    for (const auto& in : inputs)
        if (in.defined() && in.is_same(out)) {  // an op returned its input: give it its own handle
            out = make_view(out, out.shape(), out.strides(), out.offset());
            break;
        }
    TapeEntry e{op, {}, tape->next_id++, std::move(backward)};
    e.inputs.reserve(inputs.size());
    for (const auto& in : inputs)
        e.inputs.push_back({in.defined() && impl_of(in)->tape == tape ? impl_of(in)->tape_id : -1,
                            in.defined() ? in.dtype() : DType::f32});
    impl_of(out)->tape = tape;
    impl_of(out)->tape_id = e.output;
    tape->entries.push_back(std::move(e));
    return out;
}

Tape::Tape() : data_(std::make_unique<TapeData>()) {
    data_->outer = g_active;
    g_active = data_.get();
}

Tape::~Tape() { g_active = data_->outer; }

Tensor Tape::track(const Tensor& x) {
    Tensor t = make_view(x, x.shape(), x.strides(), x.offset());
    impl_of(t)->tape = data_.get();
    impl_of(t)->tape_id = data_->next_id++;
    data_->leaves.emplace_back(impl_of(t)->tape_id, t);
    return t;
}

void Tape::backward(const Tensor& result) {
    if (!result.defined() || result.numel() != 1)
        throw ShapeError("gradient: the function returned a tensor of shape " +
                         (result.defined() ? to_string(result.shape()) : std::string("(none)")) +
                         "; a gradient needs a one-element result — reduce it, e.g. with fx::sum or fx::mean");
    if (!is_floating(result.dtype()))
        throw DTypeError(std::string("gradient: the function returned a ") + name(result.dtype()) +
                         " tensor; gradients need a floating-point result");
    auto& d = *data_;
    d.grads.assign(static_cast<std::size_t>(d.next_id), Tensor());
    d.done = true;
    LeafObserver* observer = g_leaf_observer;
    LeafSchedule schedule;
    if (observer) {
        schedule = schedule_leaves(d);
        observer->sweep_begins();
    }
    auto tell = [&](const std::vector<std::size_t>& leaves) {
        for (std::size_t k : leaves) observer->leaf_ready(d.leaves[k].second, d.grads[d.leaves[k].first]);
    };
    NoGrad no_grad;
    if (observer) tell(schedule.unused);
    if (impl_of(result)->tape != &d) {  // the result does not depend on any argument
        if (observer) std::for_each(schedule.after.begin(), schedule.after.end(), tell);
        return;
    }
    d.grads[impl_of(result)->tape_id] = ones_like(result);
    for (std::size_t e = d.entries.size(); e-- > 0;) {
        TapeEntry& entry = d.entries[e];
        if (Tensor g = std::move(d.grads[entry.output]); g.defined()) {
            std::vector<bool> needs;
            for (const TapeInput& in : entry.inputs) needs.push_back(in.id >= 0);
            auto gin = entry.backward(g, needs);
            for (std::size_t i = 0; i < entry.inputs.size(); ++i) {
                const auto [id, dtype] = entry.inputs[i];
                if (id < 0 || i >= gin.size() || !gin[i].defined()) continue;
                // An op that promoted (bf16 × f32 computes in f32) hands back its input's gradient
                // in the wider type; the kernels of the ops before it expect their own.
                if (gin[i].dtype() != dtype) gin[i] = cast(gin[i], dtype);
                auto& acc = d.grads[id];
                acc = acc.defined() ? acc + gin[i] : gin[i];
            }
        }
        entry.backward = nullptr;  // frees what the rule captured as soon as it is used
        if (observer) tell(schedule.after[e]);
    }
}

Tensor Tape::grad(const Tensor& tracked) const {
    const auto& d = *data_;
    if (!d.done) throw Error("gradient: backward() has not run on this tape");
    auto id = impl_of(tracked)->tape_id;
    if (impl_of(tracked)->tape == &d && id >= 0 && id < static_cast<std::int64_t>(d.grads.size()) &&
        d.grads[id].defined()) {
        // Gradients reach users and optimisers as dense tensors of the argument's type.
        NoGrad no_grad;
        Tensor g = d.grads[id].dtype() == tracked.dtype() ? d.grads[id] : cast(d.grads[id], tracked.dtype());
        return g.is_contiguous() ? g : g.clone();
    }
    return zeros(tracked.shape(), {.dtype = tracked.dtype(), .device = tracked.device()});
}

}  // namespace detail
}  // namespace fluxion
