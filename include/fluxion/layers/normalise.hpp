// fluxion/layers/normalise.hpp — BatchNorm and LayerNorm, with PyTorch's conventions.
//
//   fx::BatchNorm(16)                 // over {N, 16}, {N, 16, H, W}, or one sample {16} / {16, H, W}
//   fx::BatchNorm(16, fx::relu, {.momentum = 0.1})
//   fx::LayerNorm(64)                 // over the last axis; LayerNorm({8, 8}) over the last two
//
// BatchNorm while training normalises with the batch's mean and biased variance and updates the
// running statistics: running = (1 - momentum)·running + momentum·batch, with the unbiased variance
// for running_var (as PyTorch). While testing it uses the running statistics. See Mode for when a
// layer trains. running_mean and running_var are not trainable (FLUXION_TRAINABLE).
#pragma once
#include <cstdint>
#include <string>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/layer.hpp"

namespace fluxion {

struct BatchNormOptions {
    double momentum = 0.1;
    double epsilon = 1e-5;
    bool affine = true;       // learn weight (γ, ones) and bias (β, zeros)
    bool track_stats = true;  // keep running statistics; without them, batch statistics always
};

class BatchNorm {
public:
    Tensor weight, bias;                // {C}, undefined without affine
    Tensor running_mean, running_var;   // {C}, undefined without track_stats
    Activation activation;
    double momentum, epsilon;
    Mode mode = Mode::automatic;

    explicit BatchNorm(std::int64_t channels, Activation activation = {}, const BatchNormOptions& options = {});
    BatchNorm(std::int64_t channels, const BatchNormOptions& options);

    Tensor operator()(const Tensor& x) const;
    std::int64_t channels() const { return channels_; }
    std::string describe() const;  // "BatchNorm(16, relu)"

private:
    std::int64_t channels_;
};

struct LayerNormOptions {
    double epsilon = 1e-5;
    bool affine = true;  // learn weight (ones) and bias (zeros) of the normalised shape
};

class LayerNorm {
public:
    Tensor weight, bias;  // the normalised shape, undefined without affine
    Activation activation;
    double epsilon;

    explicit LayerNorm(std::int64_t features, Activation activation = {}, const LayerNormOptions& options = {});
    explicit LayerNorm(Shape normalised_shape, Activation activation = {}, const LayerNormOptions& options = {});

    Tensor operator()(const Tensor& x) const;  // x must end with the normalised shape
    const Shape& normalised_shape() const { return shape_; }
    std::string describe() const;  // "LayerNorm(64)", "LayerNorm((8, 8))"

private:
    Shape shape_;
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::BatchNorm, weight, bias, running_mean, running_var);
FLUXION_TRAINABLE(fluxion::BatchNorm, weight, bias);
FLUXION_FUNCTOR(fluxion::LayerNorm, weight, bias);
