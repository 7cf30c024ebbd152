// operators_recurrent.cpp — ONNX's RNN, GRU and LSTM as fluxion's ops, one time step at a time (so
// autodiff differentiates them and they run on any device): forward, reverse and bidirectional,
// layout 0 (time-major) and 1 (batch-major), initial states, LSTM's peepholes, `clip`, and
// sequence_lens (a batch element's steps beyond its length leave its state alone and output zeros;
// the reverse direction starts at each element's last step).
#include <algorithm>
#include <cmath>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using Ints = std::vector<std::int64_t>;

// An activation of the `activations` attribute; alpha and beta where it takes them.
struct Function {
    std::string name;
    float alpha = 0, beta = 0;
    Tensor operator()(const Tensor& x) const {
        if (name == "Sigmoid") return sigmoid(x);
        if (name == "Tanh") return tanh(x);
        if (name == "Relu") return relu(x);
        if (name == "LeakyRelu") return leakyrelu(x, alpha);
        if (name == "HardSigmoid") return clamp(x * double(alpha) + double(beta), 0, 1);
        if (name == "Elu") return elu(x, alpha);
        if (name == "Softsign") return softsign(x);
        if (name == "Softplus") return softplus(x);
        if (name == "Affine") return x * double(alpha) + double(beta);
        return tanh(x * double(beta)) * double(alpha);  // ScaledTanh
    }
};

// The node's activations, `per_direction` for each of `directions`, defaults `defaults`.
std::vector<Function> activations_of(const Node& n, std::size_t directions, const std::vector<std::string>& defaults) {
    std::vector<std::string> names;
    std::vector<float> alphas, betas;
    for (const auto& a : n.proto().attribute()) {
        if (a.name() == "activations") names.assign(a.strings().begin(), a.strings().end());
        if (a.name() == "activation_alpha") alphas.assign(a.floats().begin(), a.floats().end());
        if (a.name() == "activation_beta") betas.assign(a.floats().begin(), a.floats().end());
    }
    if (names.empty())
        for (std::size_t d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
    if (names.size() != defaults.size() * directions)
        n.unsupported(std::to_string(names.size()) + " activations; expected " +
                      std::to_string(defaults.size() * directions));
    // Defaults where alpha or beta are not given (ONNX's own for each function).
    const std::map<std::string, std::pair<float, float>> known = {{"Sigmoid", {0, 0}},
                                                                  {"Tanh", {0, 0}},
                                                                  {"Relu", {0, 0}},
                                                                  {"LeakyRelu", {0.01f, 0}},
                                                                  {"HardSigmoid", {0.2f, 0.5f}},
                                                                  {"Elu", {1, 0}},
                                                                  {"Softsign", {0, 0}},
                                                                  {"Softplus", {0, 0}},
                                                                  {"Affine", {1, 0}},
                                                                  {"ScaledTanh", {1, 1}}};
    std::vector<Function> out;
    std::size_t k = 0;
    for (const auto& name : names) {
        const auto it = known.find(name);
        if (it == known.end()) n.unsupported("the activation " + name);
        Function a{name, it->second.first, it->second.second};
        const bool takes_parameters =
            name == "LeakyRelu" || name == "HardSigmoid" || name == "Elu" || name == "Affine" || name == "ScaledTanh";
        if (takes_parameters) {
            if (k < alphas.size()) a.alpha = alphas[k];
            if (k < betas.size()) a.beta = betas[k];
            ++k;
        }
        out.push_back(a);
    }
    return out;
}

// The gates' pre-activations clipped to [-clip, clip] where the node says so.
struct Clip {
    float limit = 0;
    Tensor operator()(const Tensor& x) const { return limit > 0 ? clamp(x, -limit, limit) : x; }
};

// Rows of x {T, N, ...} in each batch element's own reverse order: its first len steps reversed,
// the rest where they are.
Tensor reverse_each(const Tensor& x, const Ints& lens) {
    const std::int64_t steps = x.shape(0), batch = x.shape(1);
    Ints index;
    for (std::int64_t t = 0; t < steps; ++t)
        for (std::int64_t b = 0; b < batch; ++b) index.push_back((t < lens[b] ? lens[b] - 1 - t : t) * batch + b);
    Shape flat = x.shape();
    flat.erase(flat.begin(), flat.begin() + 1);
    flat[0] = steps * batch;
    return index_select(x.reshape(flat), 0, tensor(index, {std::int64_t(index.size())}).to(x.device()))
        .reshape(x.shape());
}

// One direction's inputs: weights and biases split by gate, the initial states.
struct Direction {
    Tensor w, r, wb, rb, h0, c0, p;  // w {G·H, I}, r {G·H, H}, wb and rb {G·H} or undefined, p {3H} or undefined
};

enum class Cell { rnn, gru, lstm };

// The step of one cell: from the input's projection xw {N, G·H} (x·Wᵀ + Wb) and the states, the
// new states (h, and c for an LSTM).
struct CellStep {
    Cell cell;
    std::int64_t hidden;
    bool linear_before_reset;
    std::vector<Function> f;  // this direction's activations
    Clip clip;

    Tensor gate(const Tensor& t, std::int64_t k) const { return t.slice(1, k * hidden, (k + 1) * hidden); }

    std::pair<Tensor, Tensor> operator()(const Direction& d, const Tensor& xw, const Tensor& h, const Tensor& c) const {
        if (cell == Cell::rnn) {
            Tensor pre = xw + matmul(h, d.r.transpose(0, 1));
            if (d.rb.defined()) pre = pre + d.rb;
            return {f[0](clip(pre)), {}};
        }
        if (cell == Cell::gru) {  // gates z, r, h
            const Tensor rz = d.r.slice(0, 0, 2 * hidden), rh = d.r.slice(0, 2 * hidden, 3 * hidden);
            Tensor zr = xw.slice(1, 0, 2 * hidden) + matmul(h, rz.transpose(0, 1));
            if (d.rb.defined()) zr = zr + d.rb.slice(0, 0, 2 * hidden);
            const Tensor z = f[0](clip(zr.slice(1, 0, hidden))), r = f[0](clip(zr.slice(1, hidden, 2 * hidden)));
            const Tensor rbh = d.rb.defined() ? d.rb.slice(0, 2 * hidden, 3 * hidden) : Tensor{};
            Tensor recurrent;
            if (linear_before_reset) {
                Tensor hr = matmul(h, rh.transpose(0, 1));
                if (rbh.defined()) hr = hr + rbh;
                recurrent = r * hr;
            } else {
                recurrent = matmul(r * h, rh.transpose(0, 1));
                if (rbh.defined()) recurrent = recurrent + rbh;
            }
            const Tensor candidate = f[1](clip(gate(xw, 2) + recurrent));
            return {(1.0 - z) * candidate + z * h, {}};
        }
        // LSTM: gates i, o, f, c; peepholes i, o, f
        Tensor pre = xw + matmul(h, d.r.transpose(0, 1));
        if (d.rb.defined()) pre = pre + d.rb;
        Tensor pi = gate(pre, 0), po = gate(pre, 1), pf = gate(pre, 2);
        if (d.p.defined()) {
            pi = pi + d.p.slice(0, 0, hidden) * c;
            pf = pf + d.p.slice(0, 2 * hidden, 3 * hidden) * c;
        }
        const Tensor i = f[0](clip(pi)), forget = f[0](clip(pf)), candidate = f[1](clip(gate(pre, 3)));
        const Tensor c_new = forget * c + i * candidate;
        if (d.p.defined()) po = po + d.p.slice(0, hidden, 2 * hidden) * c_new;
        return {f[0](clip(po)) * f[2](c_new), c_new};
    }
};

// The part of an optional input {D, ...} for direction `k`, or undefined.
Tensor part(const Ts& in, std::size_t i, std::int64_t k) {
    return i < in.size() && in[i].defined() ? in[i].select(0, k) : Tensor{};
}

Ts recurrent(const Node& n, const Ts& in, Cell cell) {
    const std::int64_t gates = cell == Cell::rnn ? 1 : cell == Cell::gru ? 3 : 4;
    const std::string direction = n.s("direction", "forward");
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
        n.unsupported("direction=" + direction);
    const std::int64_t dirs = direction == "bidirectional" ? 2 : 1;
    if (cell == Cell::lstm && n.i("input_forget", 0)) n.unsupported("input_forget=1");
    const bool batch_major = n.i("layout", 0) != 0;
    const Tensor x = batch_major ? in[0].transpose(0, 1) : in[0];  // {T, N, I}
    const std::int64_t steps = x.shape(0), batch = x.shape(1);
    const std::int64_t hidden = n.i("hidden_size", in[2].shape(2));
    if (in[1].ndim() != 3 || in[1].shape(0) != dirs || in[1].shape(1) != gates * hidden)
        n.unsupported("W of shape " + to_string(in[1].shape()) + " for " + std::to_string(dirs) +
                      " direction(s) of hidden size " + std::to_string(hidden));
    Ints lens(std::size_t(batch), steps);
    if (in.size() > 4 && in[4].defined()) lens = host_ints(in[4]);
    const bool ragged = std::any_of(lens.begin(), lens.end(), [&](auto l) { return l != steps; });
    auto state = [&](std::size_t i) {  // an initial state, as {D, N, H}
        return i < in.size() && in[i].defined() ? (batch_major ? in[i].transpose(0, 1) : in[i]) : Tensor{};
    };
    const Tensor h0 = state(5), c0 = cell == Cell::lstm ? state(6) : Tensor{};
    const std::vector<std::string> defaults = cell == Cell::rnn   ? std::vector<std::string>{"Tanh"}
                                              : cell == Cell::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                  : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    const std::vector<Function> all = activations_of(n, std::size_t(dirs), defaults);
    Ts ys, hs, cs;
    for (std::int64_t k = 0; k < dirs; ++k) {
        Direction d{in[1].select(0, k), in[2].select(0, k), {}, {}, {}, {}, {}};
        if (const Tensor b = part(in, 3, k); b.defined())
            d.wb = b.slice(0, 0, gates * hidden), d.rb = b.slice(0, gates * hidden, 2 * gates * hidden);
        const Shape zero{batch, hidden};
        d.h0 = h0.defined() ? h0.select(0, k) : zeros(zero, {.dtype = x.dtype(), .device = x.device()});
        d.c0 = c0.defined() ? c0.select(0, k) : zeros(zero, {.dtype = x.dtype(), .device = x.device()});
        if (cell == Cell::lstm) d.p = part(in, 7, k);
        const CellStep step{
            cell, hidden, n.i("linear_before_reset", 0) != 0,
            std::vector<Function>(all.begin() + std::ptrdiff_t(k * std::int64_t(defaults.size())),
                                  all.begin() + std::ptrdiff_t((k + 1) * std::int64_t(defaults.size()))),
            Clip{n.f("clip", 0)}};
        const bool backwards = direction == "reverse" || k == 1;
        const Tensor seq = backwards ? reverse_each(x, lens) : x;
        Tensor xw = matmul(seq, d.w.transpose(0, 1));  // every step's input projection at once
        if (d.wb.defined()) xw = xw + d.wb;
        Tensor h = d.h0, c = d.c0;
        Ts outputs;
        for (std::int64_t t = 0; t < steps; ++t) {
            auto [h_new, c_new] = step(d, xw.select(0, t), h, c);
            if (ragged) {  // elements whose sequence has ended keep their state and output zeros
                std::vector<float> live(static_cast<std::size_t>(batch));
                for (std::int64_t b = 0; b < batch; ++b) live[std::size_t(b)] = t < lens[b] ? 1.0f : 0.0f;
                const Tensor m = tensor(live, {batch, 1}).to(x.dtype()).to(x.device());
                h_new = m * h_new + (1.0 - m) * h;
                if (c_new.defined()) c_new = m * c_new + (1.0 - m) * c;
                outputs.push_back(m * h_new);
            } else {
                outputs.push_back(h_new);
            }
            h = h_new, c = c_new;
        }
        Tensor y = stack(outputs, 0);  // {T, N, H}
        if (backwards) y = reverse_each(y, lens);
        ys.push_back(y), hs.push_back(h), cs.push_back(c);
    }
    Tensor y = stack(ys, 1), yh = stack(hs, 0);  // {T, D, N, H}, {D, N, H}
    Tensor yc = cell == Cell::lstm ? stack(cs, 0) : Tensor{};
    if (batch_major) {  // {N, T, D, H}, {N, D, H}
        y = y.permute({2, 0, 1, 3}), yh = yh.transpose(0, 1);
        if (yc.defined()) yc = yc.transpose(0, 1);
    }
    return cell == Cell::lstm ? Ts{y, yh, yc} : Ts{y, yh};
}

Ts rnn(const Node& n, const Ts& in) { return recurrent(n, in, Cell::rnn); }
Ts gru(const Node& n, const Ts& in) { return recurrent(n, in, Cell::gru); }
Ts lstm(const Node& n, const Ts& in) { return recurrent(n, in, Cell::lstm); }

}  // namespace

void add_recurrent_operators(std::map<std::string, Operator>& t) {
    t["RNN"] = rnn;
    t["GRU"] = gru;
    t["LSTM"] = lstm;
}

}  // namespace fluxion::onnx::detail
