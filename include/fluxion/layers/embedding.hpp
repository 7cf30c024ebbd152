// fluxion/layers/embedding.hpp — Embedding(vocab, dim): integer indices to rows of a weight
// {vocab, dim} (PyTorch's layout), via fx::index_select. Indices of any shape S give {S..., dim}.
#pragma once
#include <cstdint>
#include <string>

#include "fluxion/layers/init.hpp"
#include "fluxion/layers/layer.hpp"

namespace fluxion {

class Embedding {
public:
    Tensor weight;  // {vocab, dim}

    Embedding(std::int64_t vocab, std::int64_t dim, const Init& init = randn32);
    Tensor operator()(const Tensor& indices) const;  // i32/i64 indices in [0, vocab)
    std::int64_t vocab() const { return weight.shape(0); }
    std::int64_t dim() const { return weight.shape(1); }
    std::string describe() const;  // "Embedding(100 => 8)"
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::Embedding, weight);
