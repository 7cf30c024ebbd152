// attention.cpp — scaled dot-product attention taken a block of queries at a time, forward and
// backward, written with the ops (matmul, softmax, where), so that every backend runs it. Each
// block holds whole rows of scores, so its softmax is exact; the backward pass recomputes a
// block's weights instead of keeping {L, S} scores for the whole batch.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dispatch.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr std::size_t kScoreBytesPerBlock = std::size_t{8} << 20;

struct Plan {
    int rows;               // the axis of the queries (ndim - 2)
    std::int64_t l, block;  // queries, and queries per block
    double scale;
    Tensor mask;  // bool, as many dimensions as q, or undefined
};

// The block's rows of the mask (a mask broadcast along the queries has one row for all).
Tensor mask_rows(const Plan& p, std::int64_t from, std::int64_t to) {
    if (!p.mask.defined() || p.mask.shape(p.rows) == 1) return p.mask;
    return p.mask.slice(p.rows, from, to);
}

// softmax(q_b kᵀ · scale, masked → −∞) for the queries [from, to).
Tensor weights(const Plan& p, const Tensor& q, const Tensor& k, std::int64_t from, std::int64_t to) {
    Tensor scores = matmul(q.slice(p.rows, from, to), transpose(k)) * p.scale;
    if (Tensor m = mask_rows(p, from, to); m.defined())
        scores = where(
            m, full({}, -std::numeric_limits<double>::infinity(), {.dtype = scores.dtype(), .device = scores.device()}),
            scores);
    return softmax(scores, -1);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
    for (const Tensor* t : {&q, &k, &v}) {
        detail::require_defined(kOp, *t);
        detail::require_floating(kOp, *t);
    }
    detail::common_device(kOp, {q, k, v});
    const int nd = q.ndim();
    Shape batch(q.shape().begin(), q.shape().end() - std::min(nd, 2));
    auto leading = [&](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - std::min(t.ndim(), 2)); };
    if (nd < 2 || k.ndim() != nd || v.ndim() != nd || leading(k) != batch || leading(v) != batch ||
        k.shape(-1) != q.shape(-1) || k.shape(-2) != v.shape(-2))
        throw ShapeError(std::string(kOp) + ": q " + to_string(q.shape()) + ", k " + to_string(k.shape()) + " and v " +
                         to_string(v.shape()) +
                         " do not fit; expected {..., L, d}, {..., S, d} and {..., S, dv} with " +
                         "the same leading dimensions");
    if (q.dtype() != k.dtype() || q.dtype() != v.dtype())
        throw DTypeError(std::string(kOp) + ": q, k and v must have one dtype, got " + name(q.dtype()) + ", " +
                         name(k.dtype()) + " and " + name(v.dtype()));
    if (o.block < 0) throw ValueError(std::string(kOp) + ": block is " + std::to_string(o.block) + "; it must be >= 0");
    const std::int64_t l = q.shape(-2), s = k.shape(-2), d = q.shape(-1);
    Plan p{nd - 2, l, 0, o.scale > 0 ? o.scale : 1.0 / std::sqrt(double(std::max<std::int64_t>(d, 1))), Tensor()};
    if (o.mask.defined()) {
        if (o.mask.dtype() != DType::boolean)
            throw DTypeError(std::string(kOp) + ": the mask must be a bool tensor (true = masked), got " +
                             name(o.mask.dtype()));
        Shape scores = batch;
        scores.push_back(l), scores.push_back(s);
        bool fits = o.mask.ndim() <= nd;
        for (int i = 1; fits && i <= o.mask.ndim(); ++i)
            fits = o.mask.shape(-i) == 1 || o.mask.shape(-i) == scores[scores.size() - i];
        if (!fits)
            throw ShapeError(std::string(kOp) + ": a mask of shape " + to_string(o.mask.shape()) +
                             " does not broadcast to the scores " + to_string(scores));
        Shape padded(static_cast<std::size_t>(nd - o.mask.ndim()), 1);
        padded.insert(padded.end(), o.mask.shape().begin(), o.mask.shape().end());
        p.mask = o.mask.reshape(padded);
    }
    const std::int64_t rows_of_scores = std::max<std::int64_t>(1, numel(batch) * s) * std::int64_t(itemsize(q.dtype()));
    p.block = o.block > 0 ? o.block
                          : std::max<std::int64_t>(1, static_cast<std::int64_t>(kScoreBytesPerBlock) / rows_of_scores);

    Shape out_shape = batch;
    out_shape.push_back(l), out_shape.push_back(v.shape(-1));
    Tensor out = detail::make_tensor(out_shape, q.dtype(), q.device());
    {
        NoGrad no_grad;
        for (std::int64_t from = 0; from < l; from += p.block) {
            const std::int64_t to = std::min(l, from + p.block);
            out.slice(p.rows, from, to).copy_(matmul(weights(p, q, k, from, to), v));
        }
    }
    if (!detail::any_tracked({q, k, v})) return out;
    return detail::record(kOp, {q, k, v}, out, [p, q, k, v](const Tensor& g, const std::vector<bool>& needs) {
        Tensor dq = needs[0] ? zeros_like(q) : Tensor();
        Tensor dk = needs[1] ? zeros_like(k) : Tensor();
        Tensor dv = needs[2] ? zeros_like(v) : Tensor();
        for (std::int64_t from = 0; from < p.l; from += p.block) {
            const std::int64_t to = std::min(p.l, from + p.block);
            const Tensor w = weights(p, q, k, from, to), go = g.slice(p.rows, from, to);
            if (needs[2]) dv = dv + matmul(transpose(w), go);
            if (!needs[0] && !needs[1]) continue;
            const Tensor dw = matmul(go, transpose(v));
            const Tensor ds = w * (dw - sum(dw * w, -1, true)) * p.scale;  // softmax's backward, then the scale
            if (needs[0]) dq.slice(p.rows, from, to).copy_(matmul(ds, k));
            if (needs[1]) dk = dk + matmul(transpose(ds), q.slice(p.rows, from, to));
        }
        return std::vector<Tensor>{dq, dk, dv};
    });
}

}  // namespace fluxion
