// lstm_sequence.cpp — an LSTM layer's whole sequence in one recorded op. Memory, all of it made
// before the first step (the loop allocates nothing):
//   gates {N, T, 4 hidden}: x W_ih^T + b_ih + b_hh for every step at once; step t adds
//     h_prev W_hh^T to its rows (a product into them) and the cell kernel replaces them by the gate
//     activations, which the backward pass reads;
//   cells {T + 1, N, hidden}: the cell states, c0 first in processing order: c_t at t + 1 forward,
//     at t in reverse (c0 at T), so that each step's c_prev and c are neighbours;
//   packed {N T hidden + N hidden}: the op's one output, the outputs {N, T, hidden} batch first,
//     then the last cell state. The tape has one output per op; the layer reads both parts as views.
// The state h_prev of a step is the output of the step before, read in place (row stride T hidden).
#include "core/layers/lstm_sequence.hpp"

#include "core/op_arguments.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::detail {
namespace {

// The address `elements` past the start of t's data.
void* at(const Tensor& t, std::int64_t elements) {
    return static_cast<char*>(t.data_ptr()) + elements * std::int64_t(itemsize(t.dtype()));
}

}  // namespace

bool lstm_sequence_runs(const std::vector<Tensor>& args) {
    const Tensor* first = nullptr;
    for (const Tensor& a : args) {
        if (!a.defined()) continue;
        if (!first) first = &a;
        else if (a.dtype() != first->dtype() || a.device() != first->device()) return false;
    }
    if (!first || (first->dtype() != DType::f32 && first->dtype() != DType::f64)) return false;
    const backend::Backend& be = backend_for(first->device());
    return be.lstm_cell && be.lstm_cell_backward;
}

LSTMSequence lstm_sequence(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                           const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, bool reverse) {
    const Device dev = x.device();
    const DType t = x.dtype();
    const int d = dev.index;
    const std::int64_t n = x.shape(0), steps = x.shape(1), in = x.shape(2), hidden = w_hh.shape(1),
                       g4 = 4 * hidden, nth = n * steps * hidden;
    // The step processed s-th, and where its cell states lie in `cells`.
    auto step = [=](std::int64_t s) { return reverse ? steps - 1 - s : s; };
    auto c_prev_at = [=](std::int64_t tt) { return (reverse ? tt + 1 : tt) * n * hidden; };
    auto c_at = [=](std::int64_t tt) { return (reverse ? tt : tt + 1) * n * hidden; };

    Tensor xd, whh, h_first, gates, cells, packed;
    {
        NoGrad no_grad;
        const backend::Backend& be = backend_for(dev);
        xd = x.contiguous();
        whh = w_hh.contiguous();
        h_first = h0.defined() ? h0.contiguous() : zeros({n, hidden}, {.dtype = t, .device = dev});
        gates = linear(xd.reshape({n * steps, in}), w_ih, b_ih.defined() ? b_ih + b_hh : Tensor());
        cells = make_tensor({steps + 1, n, hidden}, t, dev);
        packed = make_tensor({nth + n * hidden}, t, dev);
        Tensor c_first = cells.select(0, reverse ? steps : 0);
        if (c0.defined()) c_first.copy_(c0);
        else c_first.fill_(0);
        for (std::int64_t s = 0; s < steps; ++s) {
            const std::int64_t tt = step(s);
            const void* h_prev = s == 0 ? h_first.data_ptr() : at(packed, (reverse ? tt + 1 : tt - 1) * hidden);
            be.gemm(d, t, false, true, n, g4, hidden, 1.0, h_prev, s == 0 ? hidden : steps * hidden, 0,
                    whh.data_ptr(), hidden, 0, 1.0, at(gates, tt * g4), steps * g4, 0, 1);
            be.lstm_cell(d, t, n, hidden, at(gates, tt * g4), steps * g4, at(cells, c_prev_at(tt)),
                         at(cells, c_at(tt)), at(packed, tt * hidden), steps * hidden);
        }
        packed.slice(0, nth, nth + n * hidden).copy_(cells.select(0, reverse ? 0 : steps).reshape({n * hidden}));
    }

    auto backward = [=](const Tensor& grad, const std::vector<bool>& needs) {
        const backend::Backend& be = backend_for(dev);
        const Tensor g = grad.contiguous();
        Tensor dgates = make_tensor({n, steps, g4}, t, dev);
        Tensor gc = g.slice(0, nth, nth + n * hidden).reshape({n, hidden}).clone();  // updated step by step
        Tensor dh = make_tensor({n, hidden}, t, dev);  // the gradient of h_prev from the step after
        Tensor dh0 = needs[1] ? make_tensor({n, hidden}, t, dev) : Tensor();
        for (std::int64_t s = steps; s-- > 0;) {
            const std::int64_t tt = step(s);
            be.lstm_cell_backward(d, t, n, hidden, at(gates, tt * g4), steps * g4, at(cells, c_prev_at(tt)),
                                  at(cells, c_at(tt)), at(g, tt * hidden), steps * hidden,
                                  s + 1 == steps ? nullptr : dh.data_ptr(), gc.data_ptr(), at(dgates, tt * g4));
            if (s == 0 && !needs[1]) continue;
            be.gemm(d, t, false, false, n, hidden, g4, 1.0, at(dgates, tt * g4), steps * g4, 0, whh.data_ptr(),
                    hidden, 0, 0.0, s == 0 ? dh0.data_ptr() : dh.data_ptr(), hidden, 0, 1);
        }
        const Tensor dg = dgates.reshape({n * steps, g4});
        std::vector<Tensor> out(7);
        if (needs[0]) out[0] = matmul(dg, w_ih).reshape({n, steps, in});
        out[1] = dh0;
        if (needs[2]) out[2] = gc;
        if (needs[3]) out[3] = matmul(dg.transpose(0, 1), xd.reshape({n * steps, in}));
        if (needs[4]) {
            // h_prev of every step, in the order of dg's rows: h0 at the first step processed, the
            // output of the step before at the others.
            Tensor hp = make_tensor({n, steps, hidden}, t, dev);
            const Tensor y = packed.slice(0, 0, nth).reshape({n, steps, hidden});
            if (steps > 1) {
                if (reverse) hp.slice(1, 0, steps - 1).copy_(y.slice(1, 1, steps));
                else hp.slice(1, 1, steps).copy_(y.slice(1, 0, steps - 1));
            }
            hp.select(1, reverse ? steps - 1 : 0).copy_(h_first);
            out[4] = matmul(dg.transpose(0, 1), hp.reshape({n * steps, hidden}));
        }
        if (needs[5] || needs[6]) {
            const Tensor db = sum(dg, 0);
            if (needs[5]) out[5] = db;
            if (needs[6]) out[6] = needs[5] ? db.clone() : db;  // two gradients, two buffers
        }
        return out;
    };
    const Tensor out = record("lstm", {x, h0, c0, w_ih, w_hh, b_ih, b_hh}, packed, backward);
    Tensor output = out.slice(0, 0, nth).reshape({n, steps, hidden});
    return {output, output.select(1, reverse ? 0 : steps - 1), out.slice(0, nth, nth + n * hidden).reshape({n, hidden})};
}

}  // namespace fluxion::detail
