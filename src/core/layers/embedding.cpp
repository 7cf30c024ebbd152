// embedding.cpp — Embedding: rows of the weight selected by integer indices.
#include "fluxion/layers/embedding.hpp"

#include "core/layers/context.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

Embedding::Embedding(std::int64_t vocab, std::int64_t dim, const Init& init) {
    if (vocab < 1 || dim < 1)
        throw ValueError("Embedding(" + std::to_string(vocab) + " => " + std::to_string(dim) + "): sizes must be positive");
    weight = init({vocab, dim});
}

std::string Embedding::describe() const { return "Embedding(" + std::to_string(vocab()) + " => " + std::to_string(dim()) + ")"; }

Tensor Embedding::operator()(const Tensor& indices) const {
    if (!indices.defined()) throw ValueError(describe() + ": the input is an empty tensor");
    if (!is_integral(indices.dtype()) || indices.dtype() == DType::boolean)
        throw DTypeError(describe() + ": indices must be an integer tensor, got " + name(indices.dtype()) +
                         "; convert with fx::cast(x, fx::DType::i64)");
    return detail::in_context(*this, [&] { return index_select(weight, 0, indices); });
}

}  // namespace fluxion
