// autodiff.cpp — the tape: recording ops, and the reverse sweep.
#include "fluxion/autodiff.hpp"

#include "core/dispatch.hpp"
#include "core/tape.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {
thread_local bool g_grad_enabled = true;
thread_local detail::TapeData* g_active = nullptr;
}  // namespace

NoGrad::NoGrad() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGrad::~NoGrad() { g_grad_enabled = previous_; }
bool grad_enabled() { return g_grad_enabled; }

namespace detail {

TapeData* active_tape() { return g_grad_enabled ? g_active : nullptr; }

bool any_tracked(const std::vector<Tensor>& inputs) {
    TapeData* tape = active_tape();
    if (!tape) return false;
    for (const auto& t : inputs)
        if (t.defined() && t.impl()->tape == tape) return true;
    return false;
}

Tensor record(const char* op, const std::vector<Tensor>& inputs, Tensor out, BackwardFn backward) {
    TapeData* tape = active_tape();
    if (!tape || !is_floating(out.dtype()) || !any_tracked(inputs)) return out;
    for (const auto& in : inputs)
        if (in.defined() && in.impl() == out.impl()) {  // an op returned its input: give it its own handle
            out = make_view(out, out.shape(), out.strides(), out.offset());
            break;
        }
    TapeEntry e{op, {}, tape->next_id++, std::move(backward)};
    for (const auto& in : inputs) e.inputs.push_back(in.defined() && in.impl()->tape == tape ? in.impl()->tape_id : -1);
    out.impl_ptr()->tape = tape;
    out.impl_ptr()->tape_id = e.output;
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
    t.impl_ptr()->tape = data_.get();
    t.impl_ptr()->tape_id = data_->next_id++;
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
    if (result.impl()->tape != &d) return;  // the result does not depend on any argument
    NoGrad no_grad;
    d.grads[result.impl()->tape_id] = ones_like(result);
    for (auto it = d.entries.rbegin(); it != d.entries.rend(); ++it) {
        Tensor g = std::move(d.grads[it->output]);
        if (!g.defined()) continue;
        std::vector<bool> needs;
        for (auto id : it->inputs) needs.push_back(id >= 0);
        auto gin = it->backward(g, needs);
        for (std::size_t i = 0; i < it->inputs.size(); ++i) {
            auto id = it->inputs[i];
            if (id < 0 || i >= gin.size() || !gin[i].defined()) continue;
            auto& acc = d.grads[id];
            acc = acc.defined() ? acc + gin[i] : gin[i];
        }
        it->backward = nullptr;  // frees what the rule captured as soon as it is used
    }
}

Tensor Tape::grad(const Tensor& tracked) const {
    const auto& d = *data_;
    if (!d.done) throw Error("gradient: backward() has not run on this tape");
    auto id = tracked.impl()->tape_id;
    if (tracked.impl()->tape == &d && id >= 0 && id < static_cast<std::int64_t>(d.grads.size()) && d.grads[id].defined()) {
        // Gradients reach users and optimisers as dense tensors of the argument's type.
        NoGrad no_grad;
        Tensor g = d.grads[id].dtype() == tracked.dtype() ? d.grads[id] : cast(d.grads[id], tracked.dtype());
        return g.is_contiguous() ? g : g.clone();
    }
    return zeros(tracked.shape(), {.dtype = tracked.dtype(), .device = tracked.device()});
}

}  // namespace detail
}  // namespace fluxion
