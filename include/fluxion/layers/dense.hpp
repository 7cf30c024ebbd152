// fluxion/layers/dense.hpp — the fully connected layer: y = activation(x · weightᵀ + bias).
//
//   fx::Dense d(10, 5, fx::sigmoid);   // weight {5, 10}, bias {5}; prints Dense(10 => 5, σ)  # 55 parameters
//   d(x);                              // x {10} -> {5}, or {N, 10} -> {N, 5} (any leading axes)
#pragma once
#include <cstdint>
#include <string>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/init.hpp"

namespace fluxion {

class Dense {
public:
    Tensor weight;  // {out, in}
    Tensor bias;    // {out}, or undefined without a bias
    Activation activation;

    // weight from `init` (Glorot uniform, as Flux), bias zeros.
    Dense(std::int64_t in, std::int64_t out, Activation activation = {}, bool bias = true,
          const Init& init = glorot_uniform);
    // From existing tensors: weight {out, in}, bias {out} or undefined.
    explicit Dense(Tensor weight, Tensor bias = {}, Activation activation = {});

    Tensor operator()(const Tensor& x) const;
    std::int64_t in_features() const { return weight.shape(1); }
    std::int64_t out_features() const { return weight.shape(0); }
    std::string describe() const;  // "Dense(10 => 5, σ)"
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::Dense, weight, bias);
