// recurrent.cpp — the recurrent cells and layers composed from differentiable ops (linear, sigmoid,
// tanh, slice, concat, stack), so autodiff and every backend come with them. An RNN or LSTM step
// is one matmul of [x_t, h] with [W_ih, W_hh] (joined once per call) plus b_ih + b_hh, then the
// gate arithmetic; a GRU step, whose n gate needs the two products apart, one matmul of each.
// Every step reads its own input x_t (a view of x, or the previous layer's outputs at t) rather
// than a slice of one projection of all steps: a slice's gradient is a tensor of its base's full
// size, so T slices of a {T, N, 4 hidden} projection cost T full-size fills and sums in backward
// (in the LSTM benchmark, more than its matrix products). Where the backend has fused LSTM cell
// kernels, an LSTM layer runs each direction as one op over the sequence instead
// (lstm_sequence.hpp), which has its own backward pass and so none of those slices.
#include "fluxion/layers/recurrent.hpp"

#include <cmath>
#include <sstream>
#include <utility>

#include "core/layers/context.hpp"  // sample_or_batch
#include "core/layers/lstm_sequence.hpp"
#include "fluxion/layers/dropout.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

enum class Gates { rnn = 1, gru = 3, lstm = 4 };

// U(-1/√hidden, 1/√hidden), PyTorch's initialisation of every recurrent weight and bias.
Tensor uniform_init(const Shape& shape, std::int64_t hidden) {
    const double k = 1.0 / std::sqrt(double(hidden));
    return (rand(shape) * 2.0 - 1.0) * k;
}

void check_sizes(const char* name, std::int64_t in, std::int64_t hidden) {
    if (in < 1 || hidden < 1)
        throw ValueError(std::string(name) + "(" + std::to_string(in) + " => " +
                         std::to_string(hidden) + "): the input and hidden sizes must be positive");
}

std::string sizes(const char* name, const Tensor& w_ih, const Tensor& w_hh) {
    return std::string(name) + "(" + std::to_string(w_ih.shape(1)) + " => " +
           std::to_string(w_hh.shape(1));
}

Tensor gate(const Tensor& g, std::int64_t k, std::int64_t hidden) {
    return g.slice(-1, k * hidden, (k + 1) * hidden);
}

// One step of one cell, with the weights of one layer and direction. `x` is the step's input in
// parts, side by side along the last axis (the directions of a bidirectional layer below); c only
// for the LSTM.
struct Step {
    Gates kind;
    const Tensor &w_ih, &w_hh, &b_ih, &b_hh;
    const Activation& nonlinearity;
    Tensor w, b;  // RNN and LSTM: [W_ih, W_hh] and b_ih + b_hh

    Step(Gates kind, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
         const Activation& nonlinearity)
        : kind(kind), w_ih(w_ih), w_hh(w_hh), b_ih(b_ih), b_hh(b_hh), nonlinearity(nonlinearity) {
        if (kind == Gates::gru) return;
        w = concat({w_ih, w_hh}, 1);
        if (b_ih.defined()) b = b_ih + b_hh;
    }

    LSTMState operator()(std::vector<Tensor> x, const Tensor& h, const Tensor& c) const {
        const std::int64_t hidden = w_hh.shape(1);
        switch (kind) {
        case Gates::rnn: return {nonlinearity(joined(std::move(x), h)), {}};
        case Gates::lstm: {
            Tensor g = joined(std::move(x), h);
            Tensor c2 = sigmoid(gate(g, 1, hidden)) * c +
                        sigmoid(gate(g, 0, hidden)) * tanh(gate(g, 2, hidden));
            return {sigmoid(gate(g, 3, hidden)) * tanh(c2), c2};
        }
        case Gates::gru: {
            Tensor xp = linear(x.size() == 1 ? x[0] : concat(x, -1), w_ih, b_ih);
            Tensor hp = linear(h, w_hh, b_hh);
            Tensor r = sigmoid(gate(xp, 0, hidden) + gate(hp, 0, hidden));
            Tensor z = sigmoid(gate(xp, 1, hidden) + gate(hp, 1, hidden));
            Tensor n = tanh(gate(xp, 2, hidden) + r * gate(hp, 2, hidden));
            return {n + z * (h - n), {}};
        }
        }
        return {};
    }

    // [x, h] [W_ih, W_hh]ᵀ + b_ih + b_hh: both products in one.
    Tensor joined(std::vector<Tensor> x, const Tensor& h) const {
        x.push_back(h);
        return linear(concat(x, -1), w, b);
    }
};

// A cell's checks: x {N, in} or {in}; a given state {N, hidden} or {hidden} to match.
template <class Cell>
void check_cell_input(const Cell& cell, const Tensor& x, const Tensor& h, const char* what) {
    if (!x.defined() || (x.ndim() != 1 && x.ndim() != 2) || x.shape(-1) != cell.input_size())
        throw ShapeError(cell.describe() + ": input has shape " +
                         (x.defined() ? to_string(x.shape()) : std::string("an empty tensor")) +
                         ", expected " + detail::sample_or_batch({cell.input_size()}));
    if (!h.defined()) return;
    Shape want = x.ndim() == 2 ? Shape{x.shape(0), cell.hidden_size()} : Shape{cell.hidden_size()};
    if (h.shape() != want)
        throw ShapeError(cell.describe() + ": the state " + what + " has shape " +
                         to_string(h.shape()) + ", expected " + to_string(want) +
                         " to go with the input " + to_string(x.shape()));
}

// As detail::in_context, for any result: errors of the ops inside re-raised with the layer's name.
template <class F> auto with_name(const std::string& name, F&& f) {
    try {
        return std::forward<F>(f)();
    } catch (const ShapeError& e) {
        throw ShapeError(name + ": " + e.what());
    } catch (const DTypeError& e) {
        throw DTypeError(name + ": " + e.what());
    } catch (const DeviceError& e) {
        throw DeviceError(name + ": " + e.what());
    }
}

Tensor zero_state(const Tensor& x, std::int64_t hidden) {
    Shape s = x.shape();
    s.back() = hidden;
    return zeros(s, {.dtype = x.dtype(), .device = x.device()});
}

std::string cell_describe(const char* name, const Tensor& w_ih, const Tensor& w_hh,
                          const Tensor& bias) {
    return sizes(name, w_ih, w_hh) + (bias.defined() ? ")" : "; bias=false)");
}

}  // namespace

// ---- cells ----

RNNCell::RNNCell(std::int64_t in, std::int64_t hidden, const RecurrentCellOptions& o)
    : nonlinearity_(o.nonlinearity) {
    check_sizes("RNNCell", in, hidden);
    weight_ih = uniform_init({hidden, in}, hidden);
    weight_hh = uniform_init({hidden, hidden}, hidden);
    if (o.bias) bias_ih = uniform_init({hidden}, hidden), bias_hh = uniform_init({hidden}, hidden);
}

std::string RNNCell::describe() const {
    std::string s = sizes("RNNCell", weight_ih, weight_hh);
    if (nonlinearity_.name() != "tanh") s += ", " + nonlinearity_.name();
    return s + (bias_ih.defined() ? ")" : "; bias=false)");
}

Tensor RNNCell::operator()(const Tensor& x, const Tensor& h) const {
    check_cell_input(*this, x, h, "h");
    return with_name(describe(), [&] {
        Tensor h0 = h.defined() ? h : zero_state(x, hidden_size());
        const Step step(Gates::rnn, weight_ih, weight_hh, bias_ih, bias_hh, nonlinearity_);
        return step({x}, h0, {}).h;
    });
}

LSTMCell::LSTMCell(std::int64_t in, std::int64_t hidden, const RecurrentCellOptions& o) {
    check_sizes("LSTMCell", in, hidden);
    weight_ih = uniform_init({4 * hidden, in}, hidden);
    weight_hh = uniform_init({4 * hidden, hidden}, hidden);
    if (o.bias)
        bias_ih = uniform_init({4 * hidden}, hidden), bias_hh = uniform_init({4 * hidden}, hidden);
}

std::string LSTMCell::describe() const {
    return cell_describe("LSTMCell", weight_ih, weight_hh, bias_ih);
}

LSTMState LSTMCell::operator()(const Tensor& x, const LSTMState& state) const {
    check_cell_input(*this, x, state.h, "h");
    check_cell_input(*this, x, state.c, "c");
    return with_name(describe(), [&] {
        Tensor h = state.h.defined() ? state.h : zero_state(x, hidden_size());
        Tensor c = state.c.defined() ? state.c : zero_state(x, hidden_size());
        return Step(Gates::lstm, weight_ih, weight_hh, bias_ih, bias_hh, {})({x}, h, c);
    });
}

GRUCell::GRUCell(std::int64_t in, std::int64_t hidden, const RecurrentCellOptions& o) {
    check_sizes("GRUCell", in, hidden);
    weight_ih = uniform_init({3 * hidden, in}, hidden);
    weight_hh = uniform_init({3 * hidden, hidden}, hidden);
    if (o.bias)
        bias_ih = uniform_init({3 * hidden}, hidden), bias_hh = uniform_init({3 * hidden}, hidden);
}

std::string GRUCell::describe() const {
    return cell_describe("GRUCell", weight_ih, weight_hh, bias_ih);
}

Tensor GRUCell::operator()(const Tensor& x, const Tensor& h) const {
    check_cell_input(*this, x, h, "h");
    return with_name(describe(), [&] {
        Tensor h0 = h.defined() ? h : zero_state(x, hidden_size());
        return Step(Gates::gru, weight_ih, weight_hh, bias_ih, bias_hh, {})({x}, h0, {}).h;
    });
}

// ---- sequence layers ----

namespace detail {

RecurrentLayers::RecurrentLayers(Kind kind, std::int64_t in, std::int64_t hidden,
                                 const RecurrentOptions& o)
    : kind_(kind),
      input_(in),
      hidden_(hidden),
      layers_(o.layers),
      directions_(o.bidirectional ? 2 : 1),
      bias_(o.bias),
      dropout_(o.dropout),
      nonlinearity_(o.nonlinearity) {
    const char* name = kind == Kind::rnn ? "RNN" : kind == Kind::lstm ? "LSTM" : "GRU";
    check_sizes(name, in, hidden);
    if (o.layers < 1)
        throw ValueError(std::string(name) + "(" + std::to_string(in) + " => " +
                         std::to_string(hidden) + "): layers must be at least 1, got " +
                         std::to_string(o.layers));
    if (!(o.dropout >= 0 && o.dropout < 1))
        throw ValueError(describe_as(name) + ": dropout must be in [0, 1), got " + std::to_string(o.dropout));
    const std::int64_t gates = kind == Kind::rnn ? 1 : kind == Kind::lstm ? 4 : 3;
    for (std::int64_t l = 0; l < layers_; ++l) {
        for (std::int64_t d = 0; d < directions_; ++d) {
            const std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
            const std::int64_t layer_in = l == 0 ? in : directions_ * hidden;
            parameters.push_back(uniform_init({gates * hidden, layer_in}, hidden));
            parameters.push_back(uniform_init({gates * hidden, hidden}, hidden));
            parameters.push_back(o.bias ? uniform_init({gates * hidden}, hidden) : Tensor());
            parameters.push_back(o.bias ? uniform_init({gates * hidden}, hidden) : Tensor());
            for (const char* p : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"})
                names.push_back(p + suffix);
        }
    }
}

const Tensor& RecurrentLayers::at(std::int64_t layer, bool reverse, int which) const {
    if (layer < 0 || layer >= layers_ || (reverse && directions_ == 1))
        throw ValueError("no " + std::string(reverse ? "reverse " : "") + "layer " +
                         std::to_string(layer) + " in " +
                         describe_as(kind_ == Kind::rnn    ? "RNN"
                                     : kind_ == Kind::lstm ? "LSTM"
                                                           : "GRU"));
    return parameters[std::size_t(4 * (layer * directions_ + (reverse ? 1 : 0)) + which)];
}

std::string RecurrentLayers::describe_as(const char* name) const {
    std::string s =
        std::string(name) + "(" + std::to_string(input_) + " => " + std::to_string(hidden_);
    if (kind_ == Kind::rnn && nonlinearity_.name() != "tanh") s += ", " + nonlinearity_.name();
    if (layers_ > 1) s += ", layers = " + std::to_string(layers_);
    if (directions_ == 2) s += ", bidirectional";
    if (dropout_ > 0) {
        std::ostringstream p;
        p << dropout_;
        s += ", dropout = " + p.str();
    }
    return s + (bias_ ? ")" : "; bias=false)");
}

LSTMOutput RecurrentLayers::run(const char* name, const Tensor& x, const Tensor& h0,
                                const Tensor& c0) const {
    const std::string me = describe_as(name);
    const std::string in = std::to_string(input_);
    if (!x.defined() || (x.ndim() != 2 && x.ndim() != 3) || x.shape(-1) != input_ ||
        x.shape(-2) < 1)
        throw ShapeError(me + ": input has shape " +
                         (x.defined() ? to_string(x.shape()) : "an empty tensor") +
                         ", expected {N, T, " + in + "} (batch first) or {T, " + in +
                         "} for one sequence, T >= 1");
    const bool one = x.ndim() == 2;
    const std::int64_t n = one ? 1 : x.shape(0), steps = x.shape(-2),
                       stack_size = layers_ * directions_;
    const Shape want = one ? Shape{stack_size, hidden_} : Shape{stack_size, n, hidden_};
    for (const auto& [state, what] : {std::pair{&h0, "h0"}, std::pair{&c0, "c0"}}) {
        if (state->defined() && state->shape() != want)
            throw ShapeError(me + ": the initial state " + what + " has shape " +
                             to_string(state->shape()) +
                             ", expected {layers · directions, N, hidden} = " + to_string(want) +
                             " for the input " + to_string(x.shape()));
    }
    const Gates gates = kind_ == Kind::rnn    ? Gates::rnn
                        : kind_ == Kind::lstm ? Gates::lstm
                                              : Gates::gru;
    auto body = [&] {
        const Tensor input = one ? x.unsqueeze(0) : x;
        const Tensor h_init = h0.defined() && one ? h0.unsqueeze(1) : h0;
        const Tensor c_init = c0.defined() && one ? c0.unsqueeze(1) : c0;
        if (kind_ == Kind::lstm && n > 0) {
            std::vector<Tensor> args{input, h_init, c_init};
            args.insert(args.end(), parameters.begin(), parameters.end());
            if (detail::lstm_sequence_runs(args)) return run_sequences(input, h_init, c_init, one);
        }
        const Tensor zero = zeros({n, hidden_}, {.dtype = x.dtype(), .device = x.device()});
        // Each step's input in parts: x_t, then the previous layer's directions at t.
        std::vector<std::vector<Tensor>> inputs(static_cast<std::size_t>(steps));
        for (std::int64_t t = 0; t < steps; ++t) inputs[std::size_t(t)] = {input.select(1, t)};
        std::vector<Tensor> hn, cn, directions;
        for (std::int64_t l = 0; l < layers_; ++l) {
            std::vector<std::vector<Tensor>> outputs(static_cast<std::size_t>(steps));
            for (std::int64_t d = 0; d < directions_; ++d) {
                const std::int64_t k = l * directions_ + d;
                const auto p = [&](int which) -> const Tensor& {
                    return parameters[std::size_t(4 * k + which)];
                };
                const Step step(gates, p(0), p(1), p(2), p(3), nonlinearity_);
                Tensor h = h_init.defined() ? h_init.select(0, k) : zero;
                Tensor c = kind_ != Kind::lstm ? Tensor()
                           : c_init.defined()  ? c_init.select(0, k)
                                               : zero;
                std::vector<Tensor> hs(static_cast<std::size_t>(steps));
                for (std::int64_t s = 0; s < steps; ++s) {
                    const auto t = std::size_t(d == 1 ? steps - 1 - s : s);
                    LSTMState next = step(inputs[t], h, c);
                    h = next.h, c = next.c;
                    outputs[t].push_back(hs[t] = h);
                }
                if (l + 1 == layers_) directions.push_back(stack(hs, 1));
                hn.push_back(h);
                if (kind_ == Kind::lstm) cn.push_back(c);
            }
            if (dropout_ > 0 && l + 1 < layers_) {  // what the next layer reads, as PyTorch's
                Dropout between(dropout_);
                between.mode = mode;
                for (auto& parts : outputs)
                    for (Tensor& part : parts) part = between(part);
            }
            inputs = std::move(outputs);
        }
        return finish({directions_ == 1 ? directions[0] : concat(directions, 2), stack(hn, 0),
                       kind_ == Kind::lstm ? stack(cn, 0) : Tensor()},
                      one);
    };
    return with_name(me, body);
}

// An LSTM's layers where the device has the fused cell kernels: each layer and direction one op
// over the whole sequence (lstm_sequence.hpp).
LSTMOutput RecurrentLayers::run_sequences(const Tensor& x, const Tensor& h_init, const Tensor& c_init,
                                          bool one) const {
    Tensor input = x;
    std::vector<Tensor> hn, cn;
    for (std::int64_t l = 0; l < layers_; ++l) {
        std::vector<Tensor> outputs;
        for (std::int64_t d = 0; d < directions_; ++d) {
            const std::int64_t k = l * directions_ + d;
            const auto p = [&](int which) -> const Tensor& { return parameters[std::size_t(4 * k + which)]; };
            detail::LSTMSequence r =
                detail::lstm_sequence(input, h_init.defined() ? h_init.select(0, k) : Tensor(),
                                      c_init.defined() ? c_init.select(0, k) : Tensor(), p(0), p(1), p(2), p(3), d == 1);
            outputs.push_back(r.output);
            hn.push_back(r.h);
            cn.push_back(r.c);
        }
        input = directions_ == 1 ? outputs[0] : concat(outputs, 2);
        if (dropout_ > 0 && l + 1 < layers_) {  // what the next layer reads, as PyTorch's
            Dropout between(dropout_);
            between.mode = mode;
            input = between(input);
        }
    }
    return finish({input, stack(hn, 0), stack(cn, 0)}, one);
}

// The result for a batch of one sequence ({T, in}) loses its batch axis again.
LSTMOutput RecurrentLayers::finish(LSTMOutput out, bool one) {
    if (one) {
        out.output = out.output.squeeze(0);
        out.h = out.h.squeeze(1);
        if (out.c.defined()) out.c = out.c.squeeze(1);
    }
    return out;
}

}  // namespace detail

RNN::RNN(std::int64_t in, std::int64_t hidden, const RecurrentOptions& o)
    : RecurrentLayers(Kind::rnn, in, hidden, o) {}
std::string RNN::describe() const { return describe_as("RNN"); }
RecurrentOutput RNN::operator()(const Tensor& x, const Tensor& h0) const {
    LSTMOutput r = run("RNN", x, h0, {});
    return {r.output, r.h};
}

LSTM::LSTM(std::int64_t in, std::int64_t hidden, const RecurrentOptions& o)
    : RecurrentLayers(Kind::lstm, in, hidden, o) {}
std::string LSTM::describe() const { return describe_as("LSTM"); }
LSTMOutput LSTM::operator()(const Tensor& x, const LSTMState& initial) const {
    return run("LSTM", x, initial.h, initial.c);
}

GRU::GRU(std::int64_t in, std::int64_t hidden, const RecurrentOptions& o)
    : RecurrentLayers(Kind::gru, in, hidden, o) {}
std::string GRU::describe() const { return describe_as("GRU"); }
RecurrentOutput GRU::operator()(const Tensor& x, const Tensor& h0) const {
    LSTMOutput r = run("GRU", x, h0, {});
    return {r.output, r.h};
}

}  // namespace fluxion
