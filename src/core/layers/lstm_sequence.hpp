// lstm_sequence.hpp — one LSTM layer in one direction over a whole sequence as one recorded op, on
// backends with the fused cell kernels (Backend::lstm_cell): the input projection of every step in
// one product, then per step one product with W_hh and one cell kernel; backward, the weight and
// input gradients of all steps in one product each. RecurrentLayers uses it where it runs and
// composes the steps from ordinary ops elsewhere (src/core/layers/recurrent.cpp).
#pragma once
#include "fluxion/tensor.hpp"

namespace fluxion::detail {

// Whether lstm_sequence runs for these arguments: their device's backend has the cell kernels and
// they are all f32 or all f64 (undefined states and biases are left out of the test).
bool lstm_sequence_runs(const std::vector<Tensor>& args);

struct LSTMSequence {
    Tensor output;  // {N, T, hidden}: h at every step, in time order
    Tensor h, c;    // {N, hidden}: the states after the last step processed
};

// x {N, T, in}; h0, c0 {N, hidden} or undefined (zeros); w_ih {4 hidden, in}, w_hh {4 hidden,
// hidden}; b_ih, b_hh {4 hidden} or both undefined. `reverse` processes the steps from T - 1 to 0.
LSTMSequence lstm_sequence(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                           const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, bool reverse);

}  // namespace fluxion::detail
