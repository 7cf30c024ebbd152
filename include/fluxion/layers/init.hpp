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

// N(mean, std²) restricted to [lo, hi] (absolute bounds, as Flux's and PyTorch's trunc_normal_):
// values outside are drawn again. `fx::TruncatedNormal{.std = 0.02}` is an Init.
struct TruncatedNormal {
    double mean = 0, std = 1, lo = -2, hi = 2;
    Tensor operator()(const Shape& shape) const;  // ValueError unless std > 0 and lo < hi around mean's reach
};
Tensor truncated_normal(const Shape& shape);  // TruncatedNormal{}
Tensor lecun_normal(const Shape& shape);      // TruncatedNormal{.std = √(1 / fan_in)}, bounds ±2 (Flux's)

// A (semi-)orthogonal matrix: the weight seen as {shape[0], rest} (PyTorch's orthogonal_) has
// orthonormal rows (or columns, where it has more rows than columns), times gain. From the QR
// factorisation of a Gaussian matrix, signs fixed by R's diagonal so that the draw is uniform.
struct Orthogonal {
    double gain = 1;
    Tensor operator()(const Shape& shape) const;  // ShapeError for fewer than 2 dimensions
};
Tensor orthogonal(const Shape& shape);  // Orthogonal{}

// A {rows, cols} matrix whose every column has ⌈sparsity · rows⌉ zeros at random rows, the other
// entries N(0, std²) (Flux's sparse_init, PyTorch's sparse_). ValueError unless 0 ≤ sparsity ≤ 1.
Init sparse_init(double sparsity, double std = 0.01);

// The identity: {n, m} has ones on its diagonal; a convolution's {out, in, k...} passes channel i to
// output i through the kernel's centre (PyTorch's eye_ and dirac_, Flux's identity_init).
Tensor identity_init(const Shape& shape);

}  // namespace fluxion
