// embedding.cpp — Embedding: rows of the weight selected by integer indices, a padding row masked out
// and rows rescaled in place where max_norm says so; EmbeddingBag: those rows summed, averaged or
// maxed per bag.
#include "fluxion/layers/embedding.hpp"

#include <cmath>
#include <sstream>
#include <vector>

#include "core/compile/recorder.hpp"
#include "core/layers/context.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

namespace {

void check_indices(const std::string& who, const Tensor& indices) {
    if (!indices.defined()) throw ValueError(who + ": the input is an empty tensor");
    if (!is_integral(indices.dtype()) || indices.dtype() == DType::boolean)
        throw DTypeError(who + ": indices must be an integer tensor, got " + name(indices.dtype()) +
                         "; convert with fx::cast(x, fx::DType::i64)");
}

Tensor make_weight(const std::string& who, std::int64_t vocab, std::int64_t dim, const Init& init) {
    if (vocab < 1 || dim < 1) throw ValueError(who + ": sizes must be positive");
    return init({vocab, dim});
}

}  // namespace

Embedding::Embedding(std::int64_t vocab, std::int64_t dim, const Init& init)
    : weight(make_weight("Embedding(" + std::to_string(vocab) + " => " + std::to_string(dim) + ")", vocab, dim, init)) {}

Embedding::Embedding(std::int64_t vocab, std::int64_t dim, const EmbeddingOptions& o) : Embedding(vocab, dim, o.init) {
    if (o.padding_idx) {
        const std::int64_t p = *o.padding_idx < 0 ? *o.padding_idx + vocab : *o.padding_idx;
        if (p < 0 || p >= vocab)
            throw ValueError(describe() + ": padding_idx " + std::to_string(*o.padding_idx) + " is not a row of " +
                             std::to_string(vocab));
        padding_idx = p;
        NoGrad no_grad;
        Tensor zeroed = weight * cast(ne(arange(vocab, {.dtype = DType::i64}), full({vocab}, double(p), {.dtype = DType::i64})),
                                      weight.dtype()).reshape({vocab, 1});
        weight = zeroed;
    }
    if (o.max_norm && !(*o.max_norm > 0)) throw ValueError(describe() + ": max_norm must be positive");
    if (!(o.norm_type > 0)) throw ValueError(describe() + ": norm_type must be positive");
    max_norm = o.max_norm;
    norm_type = o.norm_type;
}

std::string Embedding::describe() const {
    std::ostringstream s;
    s << "Embedding(" << vocab() << " => " << dim();
    if (padding_idx) s << ", padding_idx=" << *padding_idx;
    if (max_norm) s << ", max_norm=" << *max_norm;
    s << ")";
    return s.str();
}

Tensor Embedding::operator()(const Tensor& indices) const {
    check_indices(describe(), indices);
    return detail::in_context(*this, [&] {
        if (max_norm) {
            // PyTorch's embedding_renorm_: the rows looked up with a p-norm above max_norm are scaled
            // to max_norm (1e-7 below it), in the weight itself, outside the gradient.
            // Which rows are looked up, marked on the host: O(indices + vocab), where a one-hot sum would
            // be O(indices × vocab). A replay of a compiled step would not read the indices again.
            detail::refuse_replay("Embedding with max_norm reads its indices on the host to rescale the rows it uses");
            std::vector<double> marked(static_cast<std::size_t>(vocab()), 0.0);
            for (std::int64_t i : indices.to_vector<std::int64_t>()) {
                if (i < 0 || i >= vocab())
                    throw ValueError(describe() + ": index " + std::to_string(i) + " is outside [0, " +
                                     std::to_string(vocab()) + ")");
                marked[static_cast<std::size_t>(i)] = 1;
            }
            NoGrad no_grad;
            const Tensor used = tensor(marked, {vocab()}).to(weight.dtype()).to(weight.device());
            const Tensor norms = pow(sum(pow(abs(weight), norm_type), 1), 1 / norm_type);
            const Tensor over = gt(used * cast(gt(norms, full_like(norms, *max_norm)), weight.dtype()), zeros_like(norms));
            const Tensor scale = where(over, *max_norm / (norms + 1e-7), ones_like(norms));
            Tensor w = weight;
            w.copy_(weight * scale.reshape({vocab(), 1}));
        }
        Tensor rows = index_select(weight, 0, indices);
        if (!padding_idx) return rows;
        // The padding row reads as zeros and passes no gradient back to the weight.
        const Tensor keep = cast(ne(indices.to(DType::i64), full_like(indices.to(DType::i64), double(*padding_idx))),
                                 weight.dtype());
        Shape shape = keep.shape();
        shape.push_back(1);
        return rows * keep.reshape(shape);
    });
}

EmbeddingBag::EmbeddingBag(std::int64_t vocab, std::int64_t dim, BagMode m, const Init& init)
    : weight(make_weight("EmbeddingBag(" + std::to_string(vocab) + " => " + std::to_string(dim) + ")", vocab, dim, init)),
      mode(m) {}

std::string EmbeddingBag::describe() const {
    const char* m = mode == BagMode::sum ? "sum" : mode == BagMode::mean ? "mean" : "max";
    return "EmbeddingBag(" + std::to_string(weight.shape(0)) + " => " + std::to_string(weight.shape(1)) + ", " + m + ")";
}

Tensor EmbeddingBag::operator()(const Tensor& indices) const {
    check_indices(describe(), indices);
    if (indices.ndim() != 2)
        throw ShapeError(describe() + ": fixed-size bags are {B, L}, got " + to_string(indices.shape()) +
                         "; for bags of any length give indices {n} and offsets {B}");
    return detail::in_context(*this, [&] {
        const Tensor rows = index_select(weight, 0, indices);  // {B, L, dim}
        if (mode == BagMode::sum) return sum(rows, 1);
        if (mode == BagMode::mean) return mean(rows, 1);
        return max(rows, 1);
    });
}

Tensor EmbeddingBag::operator()(const Tensor& indices, const Tensor& offsets) const {
    check_indices(describe(), indices);
    check_indices(describe() + " offsets", offsets);
    if (indices.ndim() != 1 || offsets.ndim() != 1)
        throw ShapeError(describe() + ": indices {n} and offsets {B}, got " + to_string(indices.shape()) + " and " +
                         to_string(offsets.shape()));
    const std::int64_t n = indices.shape(0), bags = offsets.shape(0);
    const auto starts = offsets.to_vector<std::int64_t>();
    for (std::int64_t b = 0; b < bags; ++b)
        if (starts[b] < 0 || starts[b] > n || (b == 0 && starts[b] != 0) || (b > 0 && starts[b] < starts[b - 1]))
            throw ValueError(describe() + ": offsets must start at 0 and ascend within [0, " + std::to_string(n) +
                             "]; offsets[" + std::to_string(b) + "] = " + std::to_string(starts[b]));
    detail::refuse_replay("EmbeddingBag reads its offsets on the host, which a compiled step's replay would not read again");
    return detail::in_context(*this, [&] {
        const Tensor rows = index_select(weight, 0, indices);  // {n, dim}
        const TensorOptions o{.dtype = weight.dtype(), .device = weight.device()};
        if (mode == BagMode::max) {
            std::vector<Tensor> out;
            for (std::int64_t b = 0; b < bags; ++b) {
                const std::int64_t end = b + 1 < bags ? starts[b + 1] : n;
                out.push_back(end > starts[b] ? max(rows.slice(0, starts[b], end), 0) : zeros({weight.shape(1)}, o));
            }
            return stack(out, 0);
        }
        // Sums as one product with the bags' membership matrix {B, n}; means divide by the sizes.
        std::vector<double> member(static_cast<std::size_t>(bags * n), 0.0), size(static_cast<std::size_t>(bags), 1.0);
        for (std::int64_t b = 0; b < bags; ++b) {
            const std::int64_t end = b + 1 < bags ? starts[b + 1] : n;
            for (std::int64_t i = starts[b]; i < end; ++i) member[static_cast<std::size_t>(b * n + i)] = 1;
            if (mode == BagMode::mean && end > starts[b]) size[static_cast<std::size_t>(b)] = double(end - starts[b]);
        }
        Tensor y = matmul(tensor(member, {bags, n}).to(o.dtype).to(o.device), rows);
        if (mode == BagMode::mean) y = y / tensor(size, {bags, 1}).to(o.dtype).to(o.device);
        return y;
    });
}

}  // namespace fluxion
