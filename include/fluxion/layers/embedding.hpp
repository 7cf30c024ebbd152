// fluxion/layers/embedding.hpp — Embedding and EmbeddingBag, PyTorch's layouts (weight {vocab, dim}).
//
//   fx::Embedding e(100, 8);                         // indices of any shape S -> {S..., 8}
//   fx::Embedding p(100, 8, {.padding_idx = 0});     // row 0 starts at zeros, reads as zeros, learns nothing
//   fx::Embedding m(100, 8, {.max_norm = 1.0});      // rows looked up are first scaled to norm <= 1, in place
//   fx::EmbeddingBag bag(100, 8, fx::BagMode::mean);
//   bag(fx::tensor(ids, {B, L}));                    // B bags of L indices -> {B, 8}
//   bag(flat_ids, offsets);                          // bags of any length: bag b starts at offsets[b]
//
// max_norm changes the weight as PyTorch's does (no gradient flows through the rescaling); it reads
// the indices on the host, so fx::compile runs such steps eagerly.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "fluxion/layers/init.hpp"
#include "fluxion/layers/layer.hpp"

namespace fluxion {

struct EmbeddingOptions {
    std::optional<std::int64_t> padding_idx = {};  // may be negative (from the end), as PyTorch's
    std::optional<double> max_norm = {};
    double norm_type = 2;  // the p of the p-norm max_norm bounds
    Init init = randn32;
};

class Embedding {
public:
    Tensor weight;  // {vocab, dim}
    std::optional<std::int64_t> padding_idx;  // in [0, vocab)
    std::optional<double> max_norm = {};
    double norm_type = 2;

    Embedding(std::int64_t vocab, std::int64_t dim, const Init& init = randn32);
    Embedding(std::int64_t vocab, std::int64_t dim, const EmbeddingOptions& options);
    Tensor operator()(const Tensor& indices) const;  // i32/i64 indices in [0, vocab)
    std::int64_t vocab() const { return weight.shape(0); }
    std::int64_t dim() const { return weight.shape(1); }
    std::string describe() const;  // "Embedding(100 => 8)", "Embedding(100 => 8, padding_idx=0)"
};

enum class BagMode { sum, mean, max };

class EmbeddingBag {
public:
    Tensor weight;  // {vocab, dim}
    BagMode mode;

    EmbeddingBag(std::int64_t vocab, std::int64_t dim, BagMode mode = BagMode::mean, const Init& init = randn32);
    // Fixed-size bags: indices {B, L} -> {B, dim}.
    Tensor operator()(const Tensor& indices) const;
    // Bags of any length: indices {n}, offsets {B} (ascending, from 0): bag b holds
    // indices[offsets[b], offsets[b + 1]). An empty bag gives zeros. The offsets are read on the host,
    // so fx::compile runs such steps eagerly.
    Tensor operator()(const Tensor& indices, const Tensor& offsets) const;
    std::string describe() const;  // "EmbeddingBag(100 => 8, mean)"
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::Embedding, weight);
FLUXION_FUNCTOR(fluxion::EmbeddingBag, weight);
