// cross_entropy.cpp — crossentropy and logitcrossentropy on one-hot or soft targets and on class
// indices, with PyTorch's class weights, ignored labels and label smoothing. Both take the log of
// the prediction first (log(ŷ + ε), or logsoftmax of logits) and share the rest.
#include <numeric>
#include <string>
#include <vector>

#include "core/losses/aggregate.hpp"
#include "fluxion/losses.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

int normalised_axis(const char* loss, int axis, int ndim) {
    const int a = axis < 0 ? axis + ndim : axis;
    if (a < 0 || a >= ndim)
        throw ValueError(std::string(loss) + ": class axis " + std::to_string(axis) + " is out of range for a " +
                         std::to_string(ndim) + "-dimensional prediction");
    return a;
}

// The class weights shaped to broadcast along the class axis of `like`.
Tensor class_weights(const char* loss, const Tensor& weight, const Tensor& like, int axis) {
    const std::int64_t classes = like.shape(axis);
    if (weight.shape() != Shape{classes})
        throw ShapeError(std::string(loss) + ": weight must hold one number per class, {" + std::to_string(classes) +
                         "}, got " + to_string(weight.shape()));
    Shape shape(static_cast<std::size_t>(like.ndim()), 1);
    shape[static_cast<std::size_t>(axis)] = classes;
    return weight.to(like.dtype()).reshape(shape);
}

// One-hot or soft targets of the prediction's shape.
Tensor soft_targets(const char* loss, const Tensor& logp, const Tensor& y, const LossOptions& o, int axis) {
    detail::check_pair(loss, logp, y);
    Tensor target = y;
    if (o.label_smoothing > 0) target = target * (1 - o.label_smoothing) + o.label_smoothing / double(logp.shape(axis));
    Tensor terms = target * logp;
    if (o.weight.defined()) terms = terms * class_weights(loss, o.weight, logp, axis);
    // Negated before the sum: an elementwise chain that a compiled step fuses into one kernel.
    return detail::class_loss(-terms, o);
}

// Class indices: the prediction's shape without its class axis.
Tensor index_targets(const char* loss, const Tensor& logp, const Tensor& labels, const LossOptions& o, int axis) {
    Shape expected = logp.shape();
    expected.erase(expected.begin() + axis);
    if (labels.shape() != expected)
        throw ShapeError(std::string(loss) + ": class-index targets have the prediction's shape without its class axis (" +
                         "axis " + std::to_string(axis) + " of " + to_string(logp.shape()) + "), " + to_string(expected) +
                         ", got " + to_string(labels.shape()));
    const std::int64_t classes = logp.shape(axis);
    const Tensor labels64 = labels.to(DType::i64);
    const Tensor counted = ne(labels64, full_like(labels64, double(o.ignore_index)));
    const Tensor safe = where(counted, labels64, zeros_like(labels64));  // ignored labels read class 0, then count 0
    // onehot puts the classes last; move them to the class axis.
    Tensor hot = onehot(safe, classes, logp.dtype());
    if (axis != logp.ndim() - 1) {
        std::vector<int> perm(static_cast<std::size_t>(logp.ndim() - 1));
        std::iota(perm.begin(), perm.end(), 0);
        perm.insert(perm.begin() + axis, logp.ndim() - 1);  // {label axes..., classes} -> classes at `axis`
        hot = hot.permute(perm);
    }
    const Tensor mask = cast(counted, logp.dtype());
    Tensor w = mask;  // each label's weight; 0 where ignored
    Tensor weight;
    if (o.weight.defined()) {
        weight = class_weights(loss, o.weight, logp, axis);
        w = index_select(o.weight.to(logp.dtype()), 0, safe.reshape({-1})).reshape(safe.shape()) * mask;
    }
    Tensor losses = -sum(hot * logp, axis) * w;
    if (o.label_smoothing > 0) {
        Tensor spread = weight.defined() ? logp * weight : logp;
        losses = losses * (1 - o.label_smoothing) - sum(spread, axis) * mask * (o.label_smoothing / double(classes));
    }
    switch (o.agg) {
        case Agg::mean: return sum(losses) / sum(w);
        case Agg::sum: return sum(losses);
        case Agg::none: return losses;
    }
    throw ValueError(std::string(loss) + ": unknown aggregation");
}

Tensor cross_entropy(const char* loss, const Tensor& yhat, const Tensor& y, const LossOptions& o, bool logits) {
    if (!yhat.defined() || !y.defined()) throw ValueError(std::string(loss) + ": an argument is an empty tensor");
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1))
        throw ValueError(std::string(loss) + ": label_smoothing must lie in [0, 1], got " + std::to_string(o.label_smoothing));
    const int axis = normalised_axis(loss, o.axis, yhat.ndim());
    const Tensor logp = logits ? logsoftmax(yhat, axis) : log(yhat + o.epsilon);
    if (is_integral(y.dtype()) && y.dtype() != DType::boolean) return index_targets(loss, logp, y, o, axis);
    return soft_targets(loss, logp, y, o, axis);
}

}  // namespace

Tensor crossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    return cross_entropy("crossentropy", yhat, y, o, false);
}

Tensor logitcrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o) {
    return cross_entropy("logitcrossentropy", yhat, y, o, true);
}

}  // namespace fluxion
