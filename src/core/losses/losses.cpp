// losses.cpp — each loss is a few differentiable ops and one aggregation.
#include "fluxion/losses.hpp"

#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

void check_pair(const char* loss, const Tensor& yhat, const Tensor& y) {
    if (!yhat.defined() || !y.defined()) throw ValueError(std::string(loss) + ": an argument is an empty tensor");
    if (yhat.shape() != y.shape())
        throw ShapeError(std::string(loss) + ": prediction has shape " + to_string(yhat.shape()) +
                         " but target has shape " + to_string(y.shape()) +
                         "; they must match (one-hot encode class labels with fx::onehot)");
}

Tensor aggregate(const Tensor& losses, Agg agg) {
    switch (agg) {
        case Agg::mean: return mean(losses);
        case Agg::sum: return sum(losses);
        case Agg::none: return losses;
    }
    throw ValueError("loss: unknown aggregation");
}

// Σ over the class axis of the elementwise terms, then the aggregation over samples.
Tensor class_loss(const Tensor& terms, const LossOptions& o) { return aggregate(sum(terms, o.axis), o.agg); }

}  // namespace

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

Tensor crossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("crossentropy", yhat, y);
    return class_loss(-(y * log(yhat + o.epsilon)), o);
}

Tensor logitcrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    check_pair("logitcrossentropy", yhat, y);
    return class_loss(-(y * logsoftmax(yhat, o.axis)), o);
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

}  // namespace fluxion
