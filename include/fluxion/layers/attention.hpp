// fluxion/layers/attention.hpp — multi-head attention and the Transformer encoder layer, with
// PyTorch's parameter names and layouts (nn.MultiheadAttention and nn.TransformerEncoderLayer with
// batch_first=True), so that weights move both ways through safetensors.
//
//   fx::MultiHeadAttention mha(64, 4);        // embed 64, 4 heads of 16; in_proj_weight {192, 64}
//   fx::Tensor y = mha(x);                    // self-attention: x {N, L, 64} -> {N, L, 64}
//   y = mha(q, k, v, {.key_padding = pad, .causal = true});   // q {N, L, E}, k and v {N, S, E}
//   fx::TransformerEncoderLayer enc(64, 4, {.feedforward = 128, .dropout = 0.1});
//   y = enc(x);                               // {N, L, 64} -> {N, L, 64}
//   fx::TransformerEncoder stack(64, 4, 6, {.feedforward = 128}, true);   // 6 layers, then a LayerNorm
//   fx::TransformerDecoder dec(64, 4, 6, {.feedforward = 128});
//   y = dec(tgt, memory, {.self = {.causal = true}, .memory = {.key_padding = pad}});
//
// One sample drops the leading N ({L, E}). Attention is softmax(q kᵀ / √d) v per head, d = E / heads;
// masked positions get no weight. A query whose every key is masked gets NaN, as in PyTorch.
// Without dropout on the weights (p = 0, or testing) it runs fx::scaled_dot_product_attention, which
// keeps no {N, heads, L, S} scores; with it, the scores are kept for the backward pass.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/dense.hpp"
#include "fluxion/layers/dropout.hpp"
#include "fluxion/layers/layer.hpp"
#include "fluxion/layers/normalise.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

// Positions that take no attention (PyTorch's convention: true means "masked").
struct AttentionMasks {
    Tensor key_padding = {};  // bool {N, S} (or {S} for one sample): true for the keys to ignore
    Tensor mask = {};         // bool {L, S}: true where query l may not attend to key s
    bool causal = false;      // query l attends only to keys s <= l (needs L == S)
};

struct MultiHeadAttentionOptions {
    double dropout = 0.0;  // on the attention weights, while training (see Mode)
    bool bias = true;      // in_proj_bias and out_proj.bias
};

class MultiHeadAttention {
public:
    Tensor in_proj_weight;  // {3E, E}: the query, key and value projections stacked
    Tensor in_proj_bias;    // {3E}, undefined without bias
    Dense out_proj;         // E => E
    Dropout dropout;        // on the attention weights

    MultiHeadAttention(std::int64_t embed, std::int64_t heads, const MultiHeadAttentionOptions& options = {});

    Tensor operator()(const Tensor& x, const AttentionMasks& masks = {}) const;  // self-attention
    Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                      const AttentionMasks& masks = {}) const;
    std::int64_t embed() const { return in_proj_weight.shape(1); }
    std::int64_t heads() const { return heads_; }
    std::string describe() const;  // "MultiHeadAttention(64, heads = 4)"

private:
    std::int64_t heads_;
};

struct TransformerEncoderOptions {
    std::int64_t feedforward = 2048;  // the hidden width of the feed-forward block (PyTorch's default)
    double dropout = 0.1;             // after attention, inside and after the feed-forward block
    Activation activation = relu;     // relu (PyTorch's default) or gelu_erf, ...
    double epsilon = 1e-5;            // of both LayerNorms
    bool norm_first = false;          // pre-norm (x + f(norm(x))) instead of post-norm (norm(x + f(x)))
};

// PyTorch's nn.TransformerEncoderLayer: self-attention and a two-layer feed-forward block, each
// with a residual connection and a LayerNorm.
class TransformerEncoderLayer {
public:
    MultiHeadAttention self_attn;
    Dense linear1, linear2;  // E => feedforward => E
    Dropout dropout, dropout1, dropout2;
    LayerNorm norm1, norm2;
    bool norm_first;

    TransformerEncoderLayer(std::int64_t embed, std::int64_t heads, const TransformerEncoderOptions& options = {});

    Tensor operator()(const Tensor& x, const AttentionMasks& masks = {}) const;
    std::string describe() const;  // "TransformerEncoderLayer(64, heads = 4, feedforward = 128)"
    const Activation& activation() const { return activation_; }  // the feed-forward block's

private:
    Activation activation_;
};

// PyTorch's nn.TransformerEncoder: layers in sequence, then an optional LayerNorm ("norm"). Each
// layer draws its own weights (PyTorch copies one layer's); names layers.<i>.self_attn..., norm.weight.
class TransformerEncoder {
public:
    std::vector<TransformerEncoderLayer> layers;
    std::optional<LayerNorm> norm;

    TransformerEncoder(std::int64_t embed, std::int64_t heads, std::int64_t num_layers,
                       const TransformerEncoderOptions& options = {}, bool final_norm = false);

    Tensor operator()(const Tensor& x, const AttentionMasks& masks = {}) const;
    std::string describe() const;  // "TransformerEncoder(6 × TransformerEncoderLayer(64, heads = 4, ...), norm)"
};

// The decoder's two kinds of attention: over the target itself, and over the encoder's output.
struct DecoderMasks {
    AttentionMasks self = {};    // PyTorch's tgt_mask, tgt_key_padding_mask, tgt_is_causal
    AttentionMasks memory = {};  // PyTorch's memory_mask, memory_key_padding_mask
};

// PyTorch's nn.TransformerDecoderLayer: self-attention, attention over `memory` (cross-attention),
// and the feed-forward block, each with a residual connection and a LayerNorm.
class TransformerDecoderLayer {
public:
    MultiHeadAttention self_attn, multihead_attn;
    Dense linear1, linear2;  // E => feedforward => E
    Dropout dropout, dropout1, dropout2, dropout3;
    LayerNorm norm1, norm2, norm3;
    bool norm_first;

    TransformerDecoderLayer(std::int64_t embed, std::int64_t heads, const TransformerEncoderOptions& options = {});

    // tgt {N, L, E}, memory {N, S, E} (or one sample each) -> {N, L, E}
    Tensor operator()(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {}) const;
    std::string describe() const;  // "TransformerDecoderLayer(64, heads = 4, feedforward = 128)"

private:
    Activation activation_;
};

// PyTorch's nn.TransformerDecoder: decoder layers in sequence over one memory, then an optional LayerNorm.
class TransformerDecoder {
public:
    std::vector<TransformerDecoderLayer> layers;
    std::optional<LayerNorm> norm;

    TransformerDecoder(std::int64_t embed, std::int64_t heads, std::int64_t num_layers,
                       const TransformerEncoderOptions& options = {}, bool final_norm = false);

    Tensor operator()(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {}) const;
    std::string describe() const;
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::TransformerEncoder, layers, norm);
FLUXION_FUNCTOR(fluxion::TransformerDecoderLayer, self_attn, multihead_attn, linear1, dropout, linear2, norm1, norm2,
                norm3, dropout1, dropout2, dropout3);
FLUXION_FUNCTOR(fluxion::TransformerDecoder, layers, norm);
FLUXION_FUNCTOR(fluxion::MultiHeadAttention, in_proj_weight, in_proj_bias, out_proj, dropout);
FLUXION_FUNCTOR(fluxion::TransformerEncoderLayer, self_attn, linear1, dropout, linear2, norm1, norm2, dropout1,
                dropout2);
