// fluxion/layers/init.hpp — weight initialisers (Flux's names). Each returns a fresh f32 tensor on
// the CPU drawn from fx::rand / fx::randn, so fx::seed(n) makes a model's weights reproducible.
//
// Fans follow the weight layouts (docs/ARCHITECTURE.md, "Conventions"): for a shape {out, in, k...}
// fan_in = in·∏k and fan_out = out·∏k; a 1-dimensional shape {n} has fan_in = 1 and fan_out = n.
#pragma once
#include <functional>

#include "fluxion/tensor.hpp"

namespace fluxion {

// What layers take to initialise their weights (any function Shape -> Tensor fits).
using Init = std::function<Tensor(const Shape&)>;

Tensor glorot_uniform(const Shape& shape);   // U(-a, a), a = √(6 / (fan_in + fan_out)); the default
Tensor glorot_normal(const Shape& shape);    // N(0, σ²), σ = √(2 / (fan_in + fan_out))
Tensor kaiming_uniform(const Shape& shape);  // U(-b, b), b = √(6 / fan_in) (gain √2, for relu)
Tensor kaiming_normal(const Shape& shape);   // N(0, σ²), σ = √(2 / fan_in)
Tensor randn32(const Shape& shape);          // N(0, 1); Embedding's default, as Flux and PyTorch
Tensor zeros32(const Shape& shape);          // fx::zeros and fx::ones as initialisers
Tensor ones32(const Shape& shape);

}  // namespace fluxion
