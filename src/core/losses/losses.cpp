// losses.cpp — each loss is a few differentiable ops and one aggregation (the cross-entropies are in
// cross_entropy.cpp, CTC in ctc.cpp).
#include "fluxion/losses.hpp"

#include "core/losses/aggregate.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

using detail::aggregate;
using detail::check_pair;
using detail::class_loss;

Tensor mse(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("mse", yhat, y);
    return aggregate(square(yhat - y), o.agg);
}

Tensor mae(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("mae", yhat, y);
    return aggregate(abs(yhat - y), o.agg);
}

Tensor huber_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("huber_loss", yhat, y);
    if (!(o.delta > 0)) throw ValueError("huber_loss: delta must be positive, got " + std::to_string(o.delta));
    Tensor err = abs(yhat - y);
    // min(|e|, δ) is the quadratic part; what lies beyond δ grows linearly.
    Tensor quadratic = clamp(err, 0, o.delta);
    Tensor linear = err - quadratic;
    return aggregate(square(quadratic) * 0.5 + linear * o.delta, o.agg);
}

Tensor binarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("binarycrossentropy", yhat, y);
    return aggregate(-(y * log(yhat + o.epsilon)) - (1 - y) * log(1 - yhat + o.epsilon), o.agg);
}

Tensor logitbinarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("logitbinarycrossentropy", yhat, y);
    return aggregate((1 - y) * yhat + softplus(-yhat), o.agg);
}

Tensor kldivergence(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("kldivergence", yhat, y);
    // y·log(y) with 0·log 0 = 0: the log of a zero target is taken at 1 instead.
    Tensor positive = gt(y, zeros_like(y));
    Tensor entropy = y * log(where(positive, y, ones_like(y)));
    return class_loss(entropy - y * log(yhat + o.epsilon), o);
}

Tensor msle(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("msle", yhat, y);
    return aggregate(square(log((yhat + o.epsilon) / (y + o.epsilon))), o.agg);
}

Tensor poisson_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("poisson_loss", yhat, y);
    // y·log(ŷ) with 0·log(ŷ) = 0 (xlogy): the log is taken at 1 where y is 0.
    Tensor zero = eq(y, zeros_like(y));
    return aggregate(yhat - where(zero, zeros_like(y), y * log(where(zero, ones_like(yhat), yhat))), o.agg);
}

Tensor hinge_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("hinge_loss", yhat, y);
    return aggregate(relu(1 - yhat * y), o.agg);
}

Tensor squared_hinge_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("squared_hinge_loss", yhat, y);
    return aggregate(square(relu(1 - yhat * y)), o.agg);
}

Tensor dice_coeff_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("dice_coeff_loss", yhat, y);
    return 1 - (2 * sum(y * yhat) + o.smooth) / (sum(square(y)) + sum(square(yhat)) + o.smooth);
}

Tensor tversky_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("tversky_loss", yhat, y);
    Tensor overlap = y * yhat;
    Tensor denominator = sum(overlap + o.beta * ((1 - y) * yhat) + (1 - o.beta) * (y * (1 - yhat))) + 1;
    return 1 - (sum(overlap) + 1) / denominator;
}

Tensor focal_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("focal_loss", yhat, y);
    Tensor p = yhat + o.epsilon;
    return class_loss(-(y * pow(1 - p, o.gamma) * log(p)), o);
}

Tensor binary_focal_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("binary_focal_loss", yhat, y);
    Tensor p = yhat + o.epsilon;
    Tensor p_t = y * p + (1 - y) * (1 - p);
    return aggregate(-(pow(1 - p_t, o.gamma) * log(p_t)), o.agg);
}

Tensor siamese_contrastive_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("siamese_contrastive_loss", yhat, y);
    if (!(o.margin >= 0))
        throw ValueError("siamese_contrastive_loss: margin must be non-negative, got " + std::to_string(o.margin));
    return aggregate((1 - y) * square(yhat) + y * square(relu(o.margin - yhat)), o.agg);
}

}  // namespace fluxion
