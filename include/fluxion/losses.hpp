// fluxion/losses.hpp — loss functions (Flux's names), written with the ops of ops.hpp so that
// gradients and every device come for free.
//
//   fx::mse(yhat, y)                                   // mean over every element
//   fx::mse(yhat, y, {.agg = fx::Agg::sum})            // or sum, or none (elementwise)
//   fx::logitcrossentropy(logits, fx::onehot(labels, 10))
//   fx::logitcrossentropy(logits, labels)              // class indices (i64), as PyTorch's cross_entropy
//   fx::logitcrossentropy(logits, labels, {.weight = w, .ignore_index = -100, .label_smoothing = 0.1})
//   fx::huber_loss(yhat, y, {.delta = 0.5})
//
// Prediction and target have the same shape (ShapeError otherwise), except class-index targets of
// the cross-entropies: the prediction's shape without its class axis (`axis`: -1 for {N, classes},
// 1 for PyTorch's spatial {N, C, d...}). The class losses (crossentropy, logitcrossentropy,
// kldivergence, focal_loss) sum over the class axis and then aggregate over the samples, so
// Agg::none gives one loss per sample; the others aggregate elementwise losses. The cross-entropies
// follow PyTorch's CrossEntropyLoss with class weights, ignored labels and label smoothing: the
// mean of index targets divides by the summed weights of the labels counted, that of one-hot or
// soft targets by the number of samples. The logit forms are stable for any logits (logsoftmax and
// softplus), also for |logits| ~ 1e4. dice_coeff_loss and tversky_loss are one number for the whole
// batch, as Flux's.
#pragma once
#include "fluxion/tensor.hpp"

namespace fluxion {

enum class Agg { mean, sum, none };

// Each loss reads the fields it uses.
struct LossOptions {
    Agg agg = Agg::mean;
    int axis = -1;                   // the class axis of the class losses
    double delta = 1.0;              // huber_loss: where the quadratic part ends
    double epsilon = 1.1920929e-7;   // crossentropy, binarycrossentropy, kldivergence, msle, focal: p + epsilon
    Tensor weight = {};              // cross-entropies: a weight per class, {C} (PyTorch's weight)
    std::int64_t ignore_index = -100;  // cross-entropies with class indices: this label counts for nothing
    double label_smoothing = 0;      // cross-entropies: the target becomes (1 - s)·y + s / C
    double gamma = 2;                // focal_loss, binary_focal_loss: the focusing exponent
    double beta = 0.7;               // tversky_loss: the weight of false positives (1 - β of false negatives)
    double margin = 1;               // siamese_contrastive_loss
    double smooth = 1;               // dice_coeff_loss
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

// log((ŷ + ε) / (y + ε))²: errors on a log scale
Tensor msle(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// ŷ - y·log(ŷ) (0 where y = 0): ŷ is a Poisson rate
Tensor poisson_loss(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// max(0, 1 - ŷ·y) and its square; y is ±1
Tensor hinge_loss(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
Tensor squared_hinge_loss(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// 1 - (2 Σ y·ŷ + smooth) / (Σ y² + Σ ŷ² + smooth), over the whole batch (segmentation)
Tensor dice_coeff_loss(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// 1 - (Σ y·ŷ + 1) / (Σ (y·ŷ + β (1 - y)·ŷ + (1 - β) y·(1 - ŷ)) + 1), over the whole batch
Tensor tversky_loss(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// -Σ y·(1 - ŷ)^γ·log(ŷ) over the class axis, ŷ = p + ε probabilities (Flux's focal_loss)
Tensor focal_loss(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// -(1 - p_t)^γ·log(p_t), p_t = y·ŷ + (1 - y)(1 - ŷ), ŷ = p + ε probabilities (Flux's binary_focal_loss)
Tensor binary_focal_loss(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});
// (1 - y)·ŷ² + y·max(0, margin - ŷ)²: ŷ a distance, y 1 for a dissimilar pair, 0 for a similar one
Tensor siamese_contrastive_loss(const Tensor& yhat, const Tensor& y, const LossOptions& options = {});

// Connectionist temporal classification (PyTorch's ctc_loss, its layouts and reductions):
// log_probs {T, N, C} (log-softmax over C), targets {N, S} of class indices (0 < label < C with
// blank 0; only the first target_lengths[n] of row n are read), input_lengths and target_lengths
// {N}, integers. mean: each sequence's loss divided by its target length, then the mean over the
// batch. An impossible alignment costs +inf (0 with zero_infinity). Differentiable in log_probs.
// The alignments are laid out on the host from targets and lengths, so a step with ctc_loss is
// not replayed by fx::compile: it runs eagerly (fx::train does so by itself).
struct CTCOptions {
    std::int64_t blank = 0;
    Agg agg = Agg::mean;
    bool zero_infinity = false;
};
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCOptions& options = {});

}  // namespace fluxion
