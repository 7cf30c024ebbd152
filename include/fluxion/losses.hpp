// fluxion/losses.hpp — loss functions (Flux's names), written with the ops of ops.hpp so that
// gradients and every device come for free.
//
//   fx::mse(yhat, y)                                   // mean over every element
//   fx::mse(yhat, y, {.agg = fx::Agg::sum})            // or sum, or none (elementwise)
//   fx::logitcrossentropy(logits, fx::onehot(labels, 10))
//   fx::huber_loss(yhat, y, {.delta = 0.5})
//
// Prediction and target must have the same shape (ShapeError otherwise). The class losses
// (crossentropy, logitcrossentropy, kldivergence) sum over the class axis (`axis`, default -1, the
// feature axis of {N, classes}) and then aggregate over the samples, so Agg::none gives one loss per
// sample; the others aggregate elementwise losses. The logit forms are stable for any logits
// (logsoftmax and softplus), also for |logits| ~ 1e4.
#pragma once
#include "fluxion/tensor.hpp"

namespace fluxion {

enum class Agg { mean, sum, none };

// Each loss reads the fields it uses.
struct LossOptions {
    Agg agg = Agg::mean;
    int axis = -1;                   // the class axis of the class losses
    double delta = 1.0;              // huber_loss: where the quadratic part ends
    double epsilon = 1.1920929e-7;   // crossentropy, binarycrossentropy, kldivergence: log(p + epsilon)
};

Tensor mse(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});  // (ŷ - y)²
Tensor mae(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});  // |ŷ - y|
// ½(ŷ - y)² where |ŷ - y| ≤ δ, else δ(|ŷ - y| - ½δ)
Tensor huber_loss(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// -Σ y·log(ŷ + ε) over the class axis; ŷ are probabilities (e.g. after softmax), y one-hot or soft
Tensor crossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// -Σ y·logsoftmax(ŷ) over the class axis; ŷ are logits
Tensor logitcrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// -y·log(ŷ + ε) - (1 - y)·log(1 - ŷ + ε); ŷ are probabilities (after sigmoid)
Tensor binarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// (1 - y)·ŷ + softplus(-ŷ), the same from logits
Tensor logitbinarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// Σ y·log(y) - Σ y·log(ŷ + ε) over the class axis (0·log 0 = 0); both are distributions
Tensor kldivergence(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});

}  // namespace fluxion
