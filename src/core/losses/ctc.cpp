// ctc.cpp — CTC as differentiable ops: the forward (alpha) recursion over time in log space, one
// step of a few {N, S} ops per frame, so that autodiff gives the gradient and every device runs it.
// Log-space zeros are a large negative finite number rather than -inf: the log-sum-exp of three
// such values stays finite (log 3 above it) where -inf would give NaN, and no alignment comes near.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/compile/recorder.hpp"
#include "fluxion/losses.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

constexpr double kLogZero = -1e30;

std::vector<std::int64_t> integers(const char* what, const Tensor& t, const Shape& shape) {
    if (!t.defined() || is_floating(t.dtype()) || t.dtype() == DType::boolean)
        throw DTypeError(std::string("ctc_loss: ") + what + " must be an integer tensor");
    if (t.shape() != shape)
        throw ShapeError(std::string("ctc_loss: ") + what + " must have shape " + to_string(shape) + ", got " +
                         to_string(t.shape()));
    return t.to_vector<std::int64_t>();
}

// log(e^a + e^b + e^c), stable for finite inputs.
Tensor logsumexp3(const Tensor& a, const Tensor& b, const Tensor& c) {
    Tensor m = maximum(maximum(a, b), c);
    return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

// x shifted right by k along the last axis, log-zero coming in.
Tensor shifted(const Tensor& x, std::int64_t k) {
    const std::int64_t s = x.shape(1);
    if (k >= s) return full_like(x, kLogZero);
    return concat({full(Shape{x.shape(0), k}, kLogZero, {.dtype = x.dtype(), .device = x.device()}), x.slice(1, 0, s - k)}, 1);
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCOptions& o) {
    if (!log_probs.defined() || log_probs.ndim() != 3 || !is_floating(log_probs.dtype()))
        throw ShapeError("ctc_loss: log_probs must be a floating {T, N, C} tensor, got " +
                         (log_probs.defined() ? to_string(log_probs.shape()) : std::string("an empty tensor")));
    const std::int64_t T = log_probs.shape(0), N = log_probs.shape(1), C = log_probs.shape(2);
    if (!targets.defined() || targets.ndim() != 2 || targets.shape(0) != N)
        throw ShapeError("ctc_loss: targets must be {N, S} with N = " + std::to_string(N) + ", got " +
                         (targets.defined() ? to_string(targets.shape()) : std::string("an empty tensor")));
    if (o.blank < 0 || o.blank >= C)
        throw ValueError("ctc_loss: blank " + std::to_string(o.blank) + " is not a class of " + std::to_string(C));
    const std::int64_t max_length = targets.shape(1);
    // The alignment's structure is built on the host from the targets and lengths, which a replay of
    // a compiled step would not read again: such steps run eagerly.
    detail::refuse_replay("ctc_loss reads its targets and lengths on the host, which a compiled step's replay would not "
                          "read again");
    const auto in_len = integers("input_lengths", input_lengths, {N});
    const auto tgt_len = integers("target_lengths", target_lengths, {N});
    const auto labels = integers("targets", targets, {N, max_length});
    for (std::int64_t n = 0; n < N; ++n) {
        if (in_len[n] < 0 || in_len[n] > T)
            throw ValueError("ctc_loss: input_lengths[" + std::to_string(n) + "] = " + std::to_string(in_len[n]) +
                             " is outside [0, " + std::to_string(T) + "]");
        if (tgt_len[n] < 0 || tgt_len[n] > max_length)
            throw ValueError("ctc_loss: target_lengths[" + std::to_string(n) + "] = " + std::to_string(tgt_len[n]) +
                             " is outside [0, " + std::to_string(max_length) + "]");
        for (std::int64_t i = 0; i < tgt_len[n]; ++i) {
            const std::int64_t l = labels[static_cast<std::size_t>(n * max_length + i)];
            if (l < 0 || l >= C || l == o.blank)
                throw ValueError("ctc_loss: targets[" + std::to_string(n) + ", " + std::to_string(i) + "] = " +
                                 std::to_string(l) + " is not a class other than the blank (" + std::to_string(o.blank) +
                                 ") among " + std::to_string(C));
        }
    }

    // The extended labels (a blank before, between and after the targets), which transitions skip a
    // blank, where each sequence starts and where it may end.
    const std::int64_t S = 2 * max_length + 1;
    std::vector<std::int64_t> ext(static_cast<std::size_t>(N * S), o.blank);
    std::vector<double> skip(static_cast<std::size_t>(N * S), kLogZero), start(ext.size(), kLogZero),
        end(ext.size(), kLogZero), active(static_cast<std::size_t>(N * T), 0.0);
    for (std::int64_t n = 0; n < N; ++n) {
        auto at = [&](std::int64_t s) { return static_cast<std::size_t>(n * S + s); };
        for (std::int64_t i = 0; i < tgt_len[n]; ++i) ext[at(2 * i + 1)] = labels[static_cast<std::size_t>(n * max_length + i)];
        for (std::int64_t s = 2; s < S; ++s)
            if (ext[at(s)] != o.blank && ext[at(s)] != ext[at(s - 2)]) skip[at(s)] = 0;
        start[at(0)] = 0;
        if (tgt_len[n] > 0) start[at(1)] = 0;
        end[at(2 * tgt_len[n])] = 0;
        if (tgt_len[n] > 0) end[at(2 * tgt_len[n] - 1)] = 0;
        for (std::int64_t t = 0; t < in_len[n]; ++t) active[static_cast<std::size_t>(n * T + t)] = 1;
    }
    const TensorOptions on{.dtype = log_probs.dtype(), .device = log_probs.device()};
    auto host = [&](const std::vector<double>& v, const Shape& shape) { return tensor(v, shape).to(on.dtype).to(on.device); };
    const Tensor skip_t = host(skip, {N, S}), start_t = host(start, {N, S}), end_t = host(end, {N, S});
    const Tensor running = gt(host(active, {N, T}), zeros({N, T}, on));

    // Emissions {N, T, S}: each frame's log-probability of each extended label, one batched product
    // with the labels' one-hot rows (exact: one term of each sum is not zero).
    const Tensor hot = onehot(tensor(ext, {N, S}).to(on.device), C, on.dtype);                  // {N, S, C}
    const Tensor emit = matmul(log_probs.permute({1, 0, 2}), hot.transpose(1, 2));               // {N, T, S}
    // Before any frame only the empty prefix has probability 1; a sequence of no frames stays there.
    std::vector<double> none(static_cast<std::size_t>(N * S), kLogZero);
    for (std::int64_t n = 0; n < N; ++n) none[static_cast<std::size_t>(n * S)] = 0;
    Tensor alpha = host(none, {N, S});
    if (T > 0) alpha = where(running.slice(1, 0, 1), emit.select(1, 0) + start_t, alpha);
    for (std::int64_t t = 1; t < T; ++t) {
        Tensor next = logsumexp3(alpha, shifted(alpha, 1), shifted(alpha, 2) + skip_t) + emit.select(1, t);
        alpha = where(running.slice(1, t, t + 1), next, alpha);
    }
    Tensor likelihood = logsumexp(alpha + end_t, 1);  // {N}
    Tensor losses = -likelihood;
    const Tensor impossible = gt(losses, full_like(losses, 1e29));
    losses = where(impossible, full_like(losses, o.zero_infinity ? 0.0 : std::numeric_limits<double>::infinity()), losses);
    switch (o.agg) {
        case Agg::mean: {
            std::vector<double> lengths(tgt_len.begin(), tgt_len.end());
            for (double& l : lengths) l = std::max(l, 1.0);
            return mean(losses / host(lengths, {N}));
        }
        case Agg::sum: return sum(losses);
        case Agg::none: return losses;
    }
    throw ValueError("ctc_loss: unknown aggregation");
}

}  // namespace fluxion
