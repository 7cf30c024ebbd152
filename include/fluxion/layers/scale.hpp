// fluxion/layers/scale.hpp — Flux's Scale and Bilinear.
//
//   fx::Scale s(4, fx::tanh);            // y = tanh(scale .* x .+ bias), scale and bias {4}; Scale(4, tanh)
//   fx::Scale s2({3, 1, 1});             // per channel of {N, 3, H, W}: shapes broadcast from the right
//   fx::Bilinear b(5, 4, 3);              // y_k = x1ᵀ W_k x2 + b_k, weight {3, 5, 4} (PyTorch's nn.Bilinear)
//   b(x1, x2);                            // {N, 5}, {N, 4} -> {N, 3};  b(x) = b(x, x) when in1 = in2
#pragma once
#include <cstdint>
#include <string>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/init.hpp"

namespace fluxion {

class Scale {
public:
    Tensor scale;  // the given shape, ones unless `init` says otherwise
    Tensor bias;   // the same shape, zeros, or undefined without a bias
    Activation activation;

    explicit Scale(Shape shape, Activation activation = {}, bool bias = true, const Init& init = ones32);
    explicit Scale(std::int64_t size, Activation activation = {}, bool bias = true, const Init& init = ones32)
        : Scale(Shape{size}, std::move(activation), bias, init) {}

    Tensor operator()(const Tensor& x) const;  // ShapeError unless the shape broadcasts against x's last axes
    std::string describe() const;              // "Scale(4, tanh)", "Scale(3, 1, 1)"
};

class Bilinear {
public:
    Tensor weight;  // {out, in1, in2}
    Tensor bias;    // {out}, or undefined
    Activation activation;

    Bilinear(std::int64_t in1, std::int64_t in2, std::int64_t out, Activation activation = {}, bool bias = true,
             const Init& init = glorot_uniform);

    Tensor operator()(const Tensor& x1, const Tensor& x2) const;  // {N, in1}, {N, in2} (or one sample each)
    Tensor operator()(const Tensor& x) const { return (*this)(x, x); }
    std::string describe() const;  // "Bilinear((5, 4) => 3)"
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::Scale, scale, bias);
FLUXION_FUNCTOR(fluxion::Bilinear, weight, bias);
