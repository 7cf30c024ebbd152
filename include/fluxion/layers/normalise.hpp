// fluxion/layers/normalise.hpp — BatchNorm, LayerNorm, GroupNorm and InstanceNorm, with PyTorch's
// conventions and weight names.
//
//   fx::BatchNorm(16)                 // over {N, 16}, {N, 16, H, W}, or one sample {16} / {16, H, W}
//   fx::BatchNorm(16, fx::relu, {.momentum = 0.1})
//   fx::LayerNorm(64)                 // over the last axis; LayerNorm({8, 8}) over the last two
//   fx::GroupNorm(32, 4)              // 32 channels in 4 groups (Flux's order; PyTorch's GroupNorm(4, 32))
//   fx::InstanceNorm(16)              // each channel of each sample; affine and track_stats off by default
//
// GroupNorm normalises each sample over each group of channels and its spatial values, InstanceNorm
// each channel of each sample over its spatial values (biased variance, in training and testing:
// neither depends on the batch). With track_stats, InstanceNorm also keeps running statistics as
// BatchNorm does (the batch's mean of the per-instance ones) and uses them while testing. Both take
// {N, C}, {N, C, H, W} or one sample {C} / {C, H, W}, as BatchNorm.
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

struct GroupNormOptions {
    double epsilon = 1e-5;
    bool affine = true;  // learn weight (ones) and bias (zeros), one per channel
};

class GroupNorm {
public:
    Tensor weight, bias;  // {C}, undefined without affine
    Activation activation;
    double epsilon;

    GroupNorm(std::int64_t channels, std::int64_t groups, Activation activation = {},
              const GroupNormOptions& options = {});
    GroupNorm(std::int64_t channels, std::int64_t groups, const GroupNormOptions& options);

    Tensor operator()(const Tensor& x) const;
    std::int64_t channels() const { return channels_; }
    std::int64_t groups() const { return groups_; }
    std::string describe() const;  // "GroupNorm(32, 4)"

private:
    std::int64_t channels_, groups_;
};

struct InstanceNormOptions {
    double momentum = 0.1;
    double epsilon = 1e-5;
    bool affine = false;       // learn weight (ones) and bias (zeros), one per channel
    bool track_stats = false;  // keep running statistics and use them while testing
};

class InstanceNorm {
public:
    Tensor weight, bias;               // {C}, undefined without affine
    Tensor running_mean, running_var;  // {C}, undefined without track_stats
    Activation activation;
    double momentum, epsilon;
    Mode mode = Mode::automatic;

    explicit InstanceNorm(std::int64_t channels, Activation activation = {}, const InstanceNormOptions& options = {});
    InstanceNorm(std::int64_t channels, const InstanceNormOptions& options);

    Tensor operator()(const Tensor& x) const;
    std::int64_t channels() const { return channels_; }
    std::string describe() const;  // "InstanceNorm(16, affine=true)"

private:
    std::int64_t channels_;
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::BatchNorm, weight, bias, running_mean, running_var);
FLUXION_TRAINABLE(fluxion::BatchNorm, weight, bias);
FLUXION_FUNCTOR(fluxion::LayerNorm, weight, bias);
FLUXION_FUNCTOR(fluxion::GroupNorm, weight, bias);
FLUXION_FUNCTOR(fluxion::InstanceNorm, weight, bias, running_mean, running_var);
FLUXION_TRAINABLE(fluxion::InstanceNorm, weight, bias);
