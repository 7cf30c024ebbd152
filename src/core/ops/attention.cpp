// attention.cpp — scaled dot-product attention taken a block of queries at a time, forward and
// backward, on the backend's batched GEMM and softmax kernels, so that every backend runs it. Each
// block holds whole rows of scores, so its softmax is exact. The products read q, k, v, the output
// gradient and write the output and the gradients through their strides (a head's rows inside
// {N, L, heads · d} included), so the views that split and merge heads are never copied; the scale
// is the GEMM's alpha. On the CPU a block's batch entries go through the products and the softmax a
// run at a time (about 256 KiB of scores per thread), so that the scores stay in the cache between
// the calls. When all the queries fit in one block the forward pass keeps its weights for the
// backward pass; otherwise the backward pass recomputes a block's weights instead of keeping {L, S}
// scores for the whole batch.
#include "core/ops/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "core/backend.hpp"
#include "core/op_arguments.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr std::size_t kScoreBytesPerBlock = std::size_t{8} << 20;
constexpr std::size_t kScoreBytesPerChunk = std::size_t{256} << 10;

struct Plan {
    int rows;               // the axis of the queries (ndim - 2)
    std::int64_t l, block;  // queries, and queries per block
    double scale;
    Tensor mask;  // bool, as many dimensions as q, or undefined
};

// A {batch..., rows, cols} view as the GEMM reads it: rows `ld` apart (or, transposed, columns),
// each row dense. Anything else (a broadcast, a strided last axis) is copied first.
struct Operand {
    Tensor t;
    bool trans;
    std::int64_t ld;
};

Operand operand(const Tensor& x) {
    const std::int64_t rows = x.shape(-2), cols = x.shape(-1);
    const std::int64_t sr = x.strides()[x.ndim() - 2], sc = x.strides()[x.ndim() - 1];
    if ((sc == 1 || cols == 1) && (rows == 1 || sr >= std::max<std::int64_t>(cols, 1)))
        return {x, false, rows == 1 ? std::max<std::int64_t>(cols, 1) : sr};
    if ((sr == 1 || rows == 1) && (cols == 1 || sc >= std::max<std::int64_t>(rows, 1)))
        return {x, true, cols == 1 ? std::max<std::int64_t>(rows, 1) : sc};
    return operand(x.contiguous());
}

// c = alpha · a b + beta · c for every batch entry of a {batch..., m, k}, b {batch..., k, n} and
// c {batch..., m, n}, which share their batch axes (c's rows dense). The longest batch axis is the
// GEMM's own batch; the others are walked here, one GEMM call per entry.
void product(double alpha, const Tensor& a, const Tensor& b, double beta, Tensor c) {
    if (c.numel() == 0) return;
    const std::int64_t m = c.shape(-2), n = c.shape(-1), k = a.shape(-1);
    if (k == 0) {  // an empty sum: C = beta C, which the backends need not take as a GEMM
        if (beta == 0) c.fill_(0);
        return;
    }
    const int nb = c.ndim() - 2;
    int axis = -1;  // the GEMM's batch axis
    for (int i = 0; i < nb; ++i)
        if (axis < 0 || c.shape(i) > c.shape(axis)) axis = i;
    const Operand oa = operand(a), ob = operand(b);
    const std::int64_t count = axis < 0 ? 1 : c.shape(axis);
    auto stride = [&](const Tensor& t) { return axis < 0 ? std::int64_t{0} : t.strides()[axis]; };
    const std::int64_t others = axis < 0 ? 1 : c.numel() / (m * n * count);
    const Device dev = c.device();
    const auto& table = detail::backend_for(dev);
    for (std::int64_t e = 0; e < others; ++e) {
        // Entry e of the batch axes other than `axis`, as a view of each operand.
        Tensor ea = oa.t, eb = ob.t, ec = c;
        std::int64_t rest = e;
        for (int i = nb - 1; i >= 0; --i) {
            if (i == axis) continue;
            const std::int64_t at = rest % c.shape(i);
            rest /= c.shape(i);
            ea = ea.slice(i, at, at + 1), eb = eb.slice(i, at, at + 1), ec = ec.slice(i, at, at + 1);
        }
        table.gemm(dev.index, c.dtype(), oa.trans, ob.trans, m, n, k, alpha, ea.data_ptr(), oa.ld, stride(oa.t),
                   eb.data_ptr(), ob.ld, stride(ob.t), beta, ec.data_ptr(), c.strides()[c.ndim() - 2], stride(c),
                   count);
    }
}

// A fresh tensor of `shape` laid out in memory in the order of like's axes (by stride, the last
// axis last), so that a result or gradient of a head view of {N, L, heads · d} is such a view too.
Tensor allocate_like(const Tensor& like, const Shape& shape) {
    const int nd = like.ndim();
    std::vector<int> order(nd);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end() - 1,
                     [&](int a, int b) { return like.strides()[a] > like.strides()[b]; });
    Shape stored(nd);
    std::vector<int> back(nd);
    for (int i = 0; i < nd; ++i) stored[i] = shape[order[i]], back[order[i]] = i;
    return detail::make_tensor(stored, like.dtype(), like.device()).permute(back);
}

// softmax(q_b kᵀ · scale, masked → −∞) for the queries [from, to) into w, a dense
// {batch..., to - from, S} tensor; q, k and the mask cover w's batch entries.
void weights_into(const Plan& p, const Tensor& q, const Tensor& k, const Tensor& mask, std::int64_t from,
                  std::int64_t to, const Tensor& w) {
    if (w.numel() == 0) return;
    Tensor scores = detail::make_tensor(w.shape(), w.dtype(), w.device());
    product(p.scale, q.slice(p.rows, from, to), transpose(k), 0, scores);
    if (mask.defined()) {
        const Tensor rows = mask.shape(p.rows) == 1 ? mask : mask.slice(p.rows, from, to);
        scores = where(
            rows,
            full({}, -std::numeric_limits<double>::infinity(), {.dtype = scores.dtype(), .device = scores.device()}),
            scores);
    }
    const std::int64_t n = w.shape(-1);
    detail::backend_of(w).softmax(w.device().index, false, w.dtype(), w.numel() / n, n, 1, scores.data_ptr(),
                                  w.data_ptr());
}

// Calls body(chunk) for runs of the batch entries whose scores for `rows` queries take about
// kScoreBytesPerChunk per CPU thread, so that each thread's share stays in its cache from the
// product that makes it through the softmax to the products that read it; chunk(t) restricts a
// tensor with q's batch axes (or one broadcast along them) to the run's entries. A run sized for one
// thread's cache left the others idle: the products walk the heads one call each, and a call over
// six images (the encoder bench's run) is below what the CPU's GEMM splits between threads, so
// attention's products ran on one thread at any thread count. The runs split the first batch axis
// longer than 1, so that a run of a dense tensor is dense. A GPU takes the whole batch in one run: its products and
// softmax cover any batch in one kernel each, and runs sized for a CPU's cache only multiplied its
// launches (a compiled encoder step replayed 373 kernels on an H100, three quarters of them
// attention's products in runs of six).
template <class Body>
void for_each_chunk(const Plan& p, const Tensor& q, std::int64_t rows, std::int64_t s, Body&& body) {
    int axis = 0;
    while (axis < p.rows && q.shape(axis) == 1) ++axis;
    if (axis == p.rows || !q.device().is_cpu()) return body([](const Tensor& t) { return t; });
    std::int64_t entry = std::max<std::int64_t>(1, rows * s * std::int64_t(itemsize(q.dtype())));
    for (int i = axis + 1; i < p.rows; ++i) entry *= q.shape(i);
    const std::int64_t bytes = static_cast<std::int64_t>(kScoreBytesPerChunk) * backend::cpu_threads();
    const std::int64_t run = std::max<std::int64_t>(1, bytes / entry);
    for (std::int64_t first = 0; first < q.shape(axis); first += run) {
        const std::int64_t last = std::min(q.shape(axis), first + run);
        body([&](const Tensor& t) { return t.shape(axis) == 1 ? t : t.slice(axis, first, last); });
    }
}

// The gradient of the scores from the weights w and their gradient dw (softmax's backward).
Tensor softmax_backward(const Tensor& w, const Tensor& dw) {
    Tensor ds = detail::make_tensor(w.shape(), w.dtype(), w.device());
    if (ds.numel() > 0) {
        const std::int64_t n = w.shape(-1);
        detail::backend_of(w).softmax_backward(w.device().index, false, w.dtype(), w.numel() / n, n, 1, w.data_ptr(),
                                               dw.data_ptr(), ds.data_ptr());
    }
    return ds;
}

// The plan for q {..., L, d} and k {..., S, d} whose shapes have been checked: the scale, the mask
// padded to q's dimensions (checked here) and the queries per block.
Plan make_plan(const Tensor& q, const Tensor& k, const AttentionOptions& o) {
    const int nd = q.ndim();
    const Shape batch(q.shape().begin(), q.shape().end() - 2);
    const std::int64_t l = q.shape(-2), s = k.shape(-2), d = q.shape(-1);
    if (o.block < 0) throw ValueError(std::string(kOp) + ": block is " + std::to_string(o.block) + "; it must be >= 0");
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
    return p;
}

struct Forward {
    Tensor out;                  // laid out like q
    std::optional<Tensor> kept;  // the weights, when one block holds every query
};

Forward attend(const Plan& p, const Tensor& q, const Tensor& k, const Tensor& v) {
    NoGrad no_grad;
    Shape out_shape = q.shape();
    out_shape.back() = v.shape(-1);
    Forward f{allocate_like(q, out_shape), std::nullopt};
    for (std::int64_t from = 0; from < p.l; from += p.block) {
        const std::int64_t to = std::min(p.l, from + p.block);
        Shape shape = q.shape();
        shape[p.rows] = to - from, shape.back() = k.shape(p.rows);
        const Tensor w = detail::make_tensor(shape, q.dtype(), q.device()), out = f.out.slice(p.rows, from, to);
        for_each_chunk(p, q, to - from, k.shape(p.rows), [&](auto&& chunk) {
            const Tensor wc = chunk(w);
            weights_into(p, chunk(q), chunk(k), p.mask.defined() ? chunk(p.mask) : Tensor(), from, to, wc);
            product(1, wc, chunk(v), 0, chunk(out));
        });
        if (to - from == p.l) f.kept = w;
    }
    return f;
}

// The gradients for the output gradient g, written into dq, dk and dv (each left out when
// undefined): views whose rows the GEMM can write.
void attend_backward(const Plan& p, const Tensor& q, const Tensor& k, const Tensor& v,
                     const std::optional<Tensor>& kept, const Tensor& g, const Tensor& dq, Tensor dk, Tensor dv) {
    if (p.l == 0) {  // no query: nothing reached k or v
        for (Tensor* t : {&dk, &dv})
            if (t->defined()) t->fill_(0);
    }
    for (std::int64_t from = 0; from < p.l; from += p.block) {
        const std::int64_t to = std::min(p.l, from + p.block);
        const double accumulate = from == 0 ? 0 : 1;  // beta: the first block writes dk and dv
        for_each_chunk(p, q, to - from, k.shape(p.rows), [&](auto&& chunk) {
            const Tensor qc = chunk(q).slice(p.rows, from, to), kc = chunk(k), vc = chunk(v);
            const Tensor go = chunk(g).slice(p.rows, from, to);
            Tensor w;
            if (kept) {
                w = chunk(*kept);
            } else {
                Shape shape = qc.shape();
                shape.back() = kc.shape(p.rows);
                w = detail::make_tensor(shape, q.dtype(), q.device());
                weights_into(p, chunk(q), kc, p.mask.defined() ? chunk(p.mask) : Tensor(), from, to, w);
            }
            if (dv.defined()) product(1, transpose(w), go, accumulate, chunk(dv));
            if (!dq.defined() && !dk.defined()) return;
            Tensor dw = detail::make_tensor(w.shape(), w.dtype(), w.device());
            product(1, go, transpose(vc), 0, dw);
            const Tensor ds = softmax_backward(w, dw);
            if (dq.defined()) product(p.scale, ds, kc, 0, chunk(dq).slice(p.rows, from, to));
            if (dk.defined()) product(p.scale, transpose(ds), qc, accumulate, chunk(dk));
        });
    }
}

// Queries, keys or values (part 0, 1, 2) of qkv {N, L, 3, heads, d} as {N, heads, L, d}.
Tensor packed_part(const Tensor& qkv, int part) { return qkv.select(2, part).permute({0, 2, 1, 3}); }

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
    for (const Tensor* t : {&q, &k, &v}) {
        detail::require_defined(kOp, *t);
        detail::require_floating(kOp, *t);
    }
    detail::common_device(kOp, {q, k, v});
    const int nd = q.ndim();
    const Shape batch(q.shape().begin(), q.shape().end() - std::min(nd, 2));
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
    const Plan p = make_plan(q, k, o);
    Forward f = attend(p, q, k, v);
    if (!detail::any_tracked({q, k, v})) return f.out;
    return detail::record(kOp, {q, k, v}, f.out,
                          [p, q, k, v, kept = f.kept](const Tensor& g, const std::vector<bool>& needs) {
                              Tensor dq = needs[0] ? allocate_like(q, q.shape()) : Tensor();
                              Tensor dk = needs[1] ? allocate_like(k, k.shape()) : Tensor();
                              Tensor dv = needs[2] ? allocate_like(v, v.shape()) : Tensor();
                              attend_backward(p, q, k, v, kept, g, dq, dk, dv);
                              return std::vector<Tensor>{dq, dk, dv};
                          });
}

namespace detail {

Tensor packed_attention(const Tensor& qkv, const AttentionOptions& o) {
    Tensor q, k, v;
    {
        NoGrad no_grad;  // views of qkv's storage, off the tape: the op's gradient is qkv's
        q = packed_part(qkv, 0), k = packed_part(qkv, 1), v = packed_part(qkv, 2);
    }
    const Plan p = make_plan(q, k, o);
    Forward f = attend(p, q, k, v);
    if (!any_tracked({qkv})) return f.out;
    return record(kOp, {qkv}, f.out, [p, q, k, v, kept = f.kept](const Tensor& g, const std::vector<bool>&) {
        const Tensor d = make_tensor(Shape{q.shape(0), q.shape(2), 3, q.shape(1), q.shape(3)}, q.dtype(), q.device());
        attend_backward(p, q, k, v, kept, g, packed_part(d, 0), packed_part(d, 1), packed_part(d, 2));
        return std::vector<Tensor>{d};
    });
}

}  // namespace detail
}  // namespace fluxion
