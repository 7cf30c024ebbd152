// fluxion/layers/recurrent.hpp — recurrent layers with PyTorch's parameter names, layouts and gate
// orders (nn.RNNCell, nn.LSTMCell, nn.GRUCell; nn.RNN, nn.LSTM, nn.GRU with batch_first=True), so
// that weights move both ways through safetensors.
//
//   fx::LSTMCell cell(28, 128);             // weight_ih {512, 28}, weight_hh {512, 128}, biases
//   auto [h, c] = cell(x);                  // x {N, 28} -> h, c {N, 128}; cell(x, {h, c}) goes on
//   fx::LSTM lstm(28, 128, {.layers = 2});  // weight_ih_l0, weight_hh_l0, ..., bias_hh_l1
//   auto [y, hn, cn] = lstm(x);             // x {N, T, 28} -> y {N, T, 128}; hn, cn {2, N, 128}
//   fx::GRU gru(28, 64, {.bidirectional = true});
//   auto [z, h] = gru(x, h0);               // z {N, T, 128}: both directions' outputs side by side
//
// Gates are stacked along the rows of the weights in PyTorch's order: i, f, g, o for the LSTM and
// r, z, n for the GRU. Final states are {layers · directions, N, hidden} in PyTorch's order (layer
// 0 forward, layer 0 reverse, layer 1 forward, ...); initial states take the same shape and default
// to zeros. One sequence may drop the leading N ({T, F}; states {layers · directions, hidden}).
// Every weight and bias starts as U(-1/√hidden, 1/√hidden), as PyTorch's.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/layer.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

struct RecurrentCellOptions {
    bool bias = true;                // bias_ih and bias_hh
    Activation nonlinearity = tanh;  // RNNCell only: tanh or relu, as PyTorch's
};

// h' = nonlinearity(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)
class RNNCell {
public:
    Tensor weight_ih, weight_hh;  // {hidden, in}, {hidden, hidden}
    Tensor bias_ih, bias_hh;      // {hidden}, undefined without bias

    RNNCell(std::int64_t in, std::int64_t hidden, const RecurrentCellOptions& options = {});
    // x {N, in} or {in}; h as the result, zeros when undefined. Returns h'.
    Tensor operator()(const Tensor& x, const Tensor& h = {}) const;
    std::int64_t input_size() const { return weight_ih.shape(1); }
    std::int64_t hidden_size() const { return weight_hh.shape(1); }
    std::string describe() const;  // "RNNCell(3 => 4)", "RNNCell(3 => 4, relu)"

private:
    Activation nonlinearity_;
};

struct LSTMState {
    Tensor h, c;  // hidden and cell state
};

// The gates i, f, g, o (rows 0..H, H..2H, 2H..3H, 3H..4H of the weights):
// c' = σ(f) c + σ(i) tanh(g), h' = σ(o) tanh(c')
class LSTMCell {
public:
    Tensor weight_ih, weight_hh;  // {4 hidden, in}, {4 hidden, hidden}
    Tensor bias_ih, bias_hh;      // {4 hidden}, undefined without bias

    LSTMCell(std::int64_t in, std::int64_t hidden, const RecurrentCellOptions& options = {});
    // x {N, in} or {in}; the state's h and c as the results, zeros when undefined.
    LSTMState operator()(const Tensor& x, const LSTMState& state = {}) const;
    std::int64_t input_size() const { return weight_ih.shape(1); }
    std::int64_t hidden_size() const { return weight_hh.shape(1); }
    std::string describe() const;  // "LSTMCell(3 => 4)"
};

// The gates r, z, n: n = tanh(x W_inᵀ + b_in + r (h W_hnᵀ + b_hn)), h' = (1 - z) n + z h
class GRUCell {
public:
    Tensor weight_ih, weight_hh;  // {3 hidden, in}, {3 hidden, hidden}
    Tensor bias_ih, bias_hh;      // {3 hidden}, undefined without bias

    GRUCell(std::int64_t in, std::int64_t hidden, const RecurrentCellOptions& options = {});
    Tensor operator()(const Tensor& x, const Tensor& h = {}) const;
    std::int64_t input_size() const { return weight_ih.shape(1); }
    std::int64_t hidden_size() const { return weight_hh.shape(1); }
    std::string describe() const;  // "GRUCell(3 => 4)"
};

struct RecurrentOptions {
    std::int64_t layers = 1;         // stacked: layer l + 1 reads the outputs of layer l
    bool bias = true;                // bias_ih_lk and bias_hh_lk
    bool bidirectional = false;      // a second pass from the last step back (the _reverse weights)
    Activation nonlinearity = tanh;  // RNN only: tanh or relu
    double dropout = 0;              // PyTorch's: Dropout on each layer's outputs but the last's,
                                     // while training (see Mode); 0 <= dropout < 1
};

// What RNN and GRU return: every step's output of the last layer, and every layer's final state.
struct RecurrentOutput {
    Tensor output;  // {N, T, directions · hidden}
    Tensor h;       // {layers · directions, N, hidden}
};

struct LSTMOutput {
    Tensor output;  // {N, T, directions · hidden}
    Tensor h, c;    // {layers · directions, N, hidden}
};

namespace detail {

// What RNN, LSTM and GRU share: the weights of every layer and direction under PyTorch's names,
// kept flat in PyTorch's order (for each layer, forward then reverse: weight_ih, weight_hh,
// bias_ih, bias_hh), and the loop over time. Not used on its own.
class RecurrentLayers {
public:
    std::vector<Tensor>
        parameters;  // in PyTorch's order, as `names`; biases undefined without bias
    std::vector<std::string> names;  // "weight_ih_l0", ..., "bias_hh_l1_reverse"
    Mode mode = Mode::automatic;     // whether the dropout between layers applies (trainmode, ...)

    std::int64_t input_size() const { return input_; }
    std::int64_t hidden_size() const { return hidden_; }
    std::int64_t layers() const { return layers_; }
    bool bidirectional() const { return directions_ == 2; }
    // The weight or bias by layer and direction, e.g. weight_ih(0) is PyTorch's weight_ih_l0.
    const Tensor& weight_ih(std::int64_t layer, bool reverse = false) const {
        return at(layer, reverse, 0);
    }
    const Tensor& weight_hh(std::int64_t layer, bool reverse = false) const {
        return at(layer, reverse, 1);
    }
    const Tensor& bias_ih(std::int64_t layer, bool reverse = false) const {
        return at(layer, reverse, 2);
    }
    const Tensor& bias_hh(std::int64_t layer, bool reverse = false) const {
        return at(layer, reverse, 3);
    }

protected:
    enum class Kind { rnn, lstm, gru };
    RecurrentLayers(Kind kind, std::int64_t in, std::int64_t hidden,
                    const RecurrentOptions& options);
    std::string describe_as(const char* name) const;
    // Runs every layer and direction over x {N, T, F} (or {T, F}); c0 and the returned c only for
    // the LSTM. Each step multiplies its own input and state with the joined weights, or, for an
    // LSTM on a backend with fused cells, each layer and direction is one op over the sequence.
    LSTMOutput run(const char* name, const Tensor& x, const Tensor& h0, const Tensor& c0) const;

private:
    // The LSTM's layers as one op per layer and direction, where the device has fused LSTM cells.
    LSTMOutput run_sequences(const Tensor& x, const Tensor& h_init, const Tensor& c_init, bool one) const;
    static LSTMOutput finish(LSTMOutput out, bool one);
    const Tensor& at(std::int64_t layer, bool reverse, int which) const;
    Kind kind_;
    std::int64_t input_, hidden_, layers_, directions_;
    bool bias_;
    double dropout_;
    Activation nonlinearity_;
};

}  // namespace detail

class RNN : public detail::RecurrentLayers {
public:
    RNN(std::int64_t in, std::int64_t hidden, const RecurrentOptions& options = {});
    // x {N, T, in} (batch first) or {T, in}; h0 {layers · directions, N, hidden}, else zeros.
    RecurrentOutput operator()(const Tensor& x, const Tensor& h0 = {}) const;
    std::string describe() const;  // "RNN(28 => 64, relu, layers = 2, bidirectional)"
};

class LSTM : public detail::RecurrentLayers {
public:
    LSTM(std::int64_t in, std::int64_t hidden, const RecurrentOptions& options = {});
    LSTMOutput operator()(const Tensor& x, const LSTMState& initial = {}) const;
    std::string describe() const;  // "LSTM(28 => 128)"
};

class GRU : public detail::RecurrentLayers {
public:
    GRU(std::int64_t in, std::int64_t hidden, const RecurrentOptions& options = {});
    RecurrentOutput operator()(const Tensor& x, const Tensor& h0 = {}) const;
    std::string describe() const;  // "GRU(28 => 64)"
};

// RNN, LSTM and GRU walk their parameters under PyTorch's flat names ("weight_ih_l0", not
// "parameters.0"), so that save, load, fmap, gpu and the optimisers see PyTorch's state_dict.
template <class T>
struct functor<T, std::enable_if_t<std::is_base_of_v<detail::RecurrentLayers, T>>> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        for (std::size_t i = 0; i < x.parameters.size(); ++i)
            f(x.names[i].c_str(), x.parameters[i]);
    }
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::RNNCell, weight_ih, weight_hh, bias_ih, bias_hh);
FLUXION_FUNCTOR(fluxion::LSTMCell, weight_ih, weight_hh, bias_ih, bias_hh);
FLUXION_FUNCTOR(fluxion::GRUCell, weight_ih, weight_hh, bias_ih, bias_hh);
