// operators_loss.cpp — ONNX's NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (PyTorch's
// nll_loss and cross_entropy): each sample's log-probability of its class picked by a host-computed
// index, weighted by its class's weight (0 for ignore_index), then reduced. Differentiable in the
// input (scores) and the weights; every reduction, weight, ignore_index, and the log_prob output.
#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;

// -w[t]·x[n, t, d...] for every sample (n, d...) of x {N, C, d...} and target t {N, d...}, reduced.
Tensor nll(const Node& n, const Tensor& x, const Tensor& target, const Tensor& weight) {
    if (x.ndim() < 2 || target.ndim() != x.ndim() - 1 || target.shape(0) != x.shape(0))
        throw ShapeError("fx::onnx: " + n.label() + ": input " + to_string(x.shape()) + " and target " +
                         to_string(target.shape()) + " do not fit: the input is {N, C, d...}, the target {N, d...}");
    for (int a = 1; a < target.ndim(); ++a)
        if (target.shape(a) != x.shape(a + 1))
            throw ShapeError("fx::onnx: " + n.label() + ": input " + to_string(x.shape()) + " and target " +
                             to_string(target.shape()) + " differ past the class axis");
    const std::string reduction = n.s("reduction", "mean");
    if (reduction != "mean" && reduction != "sum" && reduction != "none")
        n.unsupported("reduction='" + reduction + "'");
    const bool ignoring = n.has("ignore_index");
    const std::int64_t ignore = n.i("ignore_index", 0), classes = x.shape(1);
    const std::int64_t inner = x.numel() / (x.shape(0) * classes);  // the d... of one sample
    // The picked elements' flat indices, each sample's class (0 where ignored) and whether it counts.
    std::vector<std::int64_t> flat, cls, counted;
    values_read_on_host(n, "its targets");
    const std::vector<std::int64_t> t = host_ints(target);
    for (std::size_t s = 0; s < t.size(); ++s) {
        const bool ignored = ignoring && t[s] == ignore;
        if (!ignored && (t[s] < 0 || t[s] >= classes))
            throw ValueError("fx::onnx: " + n.label() + ": target " + std::to_string(t[s]) + " is out of range for " +
                             std::to_string(classes) + " classes");
        const std::int64_t c = ignored ? 0 : t[s], sample = std::int64_t(s) / inner, at = std::int64_t(s) % inner;
        flat.push_back((sample * classes + c) * inner + at);
        cls.push_back(c);
        counted.push_back(ignored ? 0 : 1);
    }
    const Tensor mask = tensor(counted, target.shape()).to(x.dtype()).to(x.device());
    const Tensor w =
        weight.defined()
            ? index_select(weight, 0, tensor(cls, {std::int64_t(cls.size())}).to(x.device())).reshape(target.shape()) *
                  mask
            : mask;
    const Tensor loss = -(gather_flat(x, flat, target.shape()) * w);
    if (reduction == "none") return loss;
    if (reduction == "sum") return sum(loss);
    return sum(loss) / sum(w);
}

Ts negative_log_likelihood(const Node& n, const Ts& in) {
    return {nll(n, in[0], in[1], in.size() > 2 ? in[2] : Tensor())};
}

Ts softmax_cross_entropy(const Node& n, const Ts& in) {
    if (in[0].ndim() < 2)
        throw ShapeError("fx::onnx: " + n.label() + ": scores " + to_string(in[0].shape()) + " are not {N, C, d...}");
    const Tensor log_prob = logsoftmax(in[0], 1);
    return {nll(n, log_prob, in[1], in.size() > 2 ? in[2] : Tensor()), log_prob};
}

}  // namespace

void add_loss_operators(std::map<std::string, Operator>& t) {
    t["NegativeLogLikelihoodLoss"] = negative_log_likelihood;
    t["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy;
}

}  // namespace fluxion::onnx::detail
