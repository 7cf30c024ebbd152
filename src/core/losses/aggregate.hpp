// aggregate.hpp — what every loss shares: checking its pair of arguments and aggregating.
#pragma once
#include <string>

#include "fluxion/losses.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::detail {

inline void check_pair(const char* loss, const Tensor& yhat, const Tensor& y) {
    if (!yhat.defined() || !y.defined()) throw ValueError(std::string(loss) + ": an argument is an empty tensor");
    if (yhat.shape() != y.shape())
        throw ShapeError(std::string(loss) + ": prediction has shape " + to_string(yhat.shape()) +
                         " but target has shape " + to_string(y.shape()) +
                         "; they must match (one-hot encode class labels with fx::onehot)");
}

inline Tensor aggregate(const Tensor& losses, Agg agg) {
    switch (agg) {
        case Agg::mean: return mean(losses);
        case Agg::sum: return sum(losses);
        case Agg::none: return losses;
    }
    throw ValueError("loss: unknown aggregation");
}

// Σ over the class axis of the elementwise terms, then the aggregation over samples.
inline Tensor class_loss(const Tensor& terms, const LossOptions& o) { return aggregate(sum(terms, o.axis), o.agg); }

}  // namespace fluxion::detail
