// attention.cpp — MultiHeadAttention and TransformerEncoderLayer composed from differentiable ops
// (linear, matmul, softmax, where), so autodiff and every backend come with them.
#include "fluxion/layers/attention.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "core/layers/context.hpp"
#include "core/ops/attention.hpp"
#include "fluxion/layers/init.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

std::string shape_text(const Tensor& t) { return t.defined() ? to_string(t.shape()) : std::string("an empty tensor"); }

// {N, L, E} -> {N, heads, L, E / heads}
Tensor split_heads(const Tensor& x, std::int64_t heads) {
    return x.reshape({x.shape(0), x.shape(1), heads, x.shape(2) / heads}).permute({0, 2, 1, 3});
}

// {N, heads, L, d} -> {N, L, heads · d}
Tensor merge_heads(const Tensor& x) {
    return x.permute({0, 2, 1, 3}).reshape({x.shape(0), x.shape(2), x.shape(1) * x.shape(3)});
}

// The bool masks (true: query l may not look at key s), each broadcastable to {N, heads, L, S}.
// Errors name the mask; the layer's name is added by in_context.
std::vector<Tensor> masks_of(const AttentionMasks& m, std::int64_t n, std::int64_t l, std::int64_t s,
                             const Device& device) {
    std::vector<Tensor> out;
    auto check = [&](const Tensor& t, const Shape& want, const char* name) {
        if (t.dtype() != DType::boolean)
            throw DTypeError(std::string(name) + " must be a bool tensor (true = masked), got " +
                             fluxion::name(t.dtype()));
        if (t.shape() != want)
            throw ShapeError(std::string(name) + " has shape " + to_string(t.shape()) + ", expected " +
                             to_string(want));
        if (!(t.device() == device))
            throw DeviceError(std::string(name) + " is on " + t.device().str() + " but the inputs are on " +
                              device.str());
    };
    if (m.key_padding.defined()) {
        check(m.key_padding, {n, s}, "key_padding");
        out.push_back(m.key_padding.reshape({n, 1, 1, s}));
    }
    if (m.mask.defined()) {
        check(m.mask, {l, s}, "mask");
        out.push_back(m.mask.reshape({1, 1, l, s}));
    }
    if (m.causal) {
        if (l != s)
            throw ShapeError("a causal mask needs as many queries as keys, got " + std::to_string(l) + " queries and " +
                             std::to_string(s) + " keys");
        Tensor rows = arange(l, {.dtype = DType::i64, .device = device}).reshape({l, 1});
        Tensor cols = arange(s, {.dtype = DType::i64, .device = device}).reshape({1, s});
        out.push_back((cols > rows).reshape({1, 1, l, s}));
    }
    return out;
}

std::string number(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(std::int64_t embed, std::int64_t heads, const MultiHeadAttentionOptions& options)
    : out_proj(embed > 0 ? embed : 1, embed > 0 ? embed : 1, {}, options.bias),
      dropout(options.dropout),
      heads_(heads) {
    if (embed < 1 || heads < 1 || embed % heads != 0)
        throw ValueError("MultiHeadAttention(" + std::to_string(embed) + ", heads = " + std::to_string(heads) +
                         "): the embedding size must be a positive multiple of the number of heads");
    in_proj_weight = glorot_uniform({3 * embed, embed});
    if (options.bias) in_proj_bias = zeros({3 * embed});
}

std::string MultiHeadAttention::describe() const {
    std::string s = "MultiHeadAttention(" + std::to_string(embed()) + ", heads = " + std::to_string(heads_);
    if (dropout.p > 0) s += ", dropout = " + number(dropout.p);
    if (!in_proj_bias.defined()) s += "; bias=false";
    return s + ")";
}

Tensor MultiHeadAttention::operator()(const Tensor& x, const AttentionMasks& masks) const {
    return (*this)(x, x, x, masks);
}

Tensor MultiHeadAttention::operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const AttentionMasks& masks) const {
    const std::int64_t e = embed();
    if (!query.defined() || !key.defined() || !value.defined())
        throw ValueError(describe() + ": an input is an empty tensor");
    const int nd = query.ndim();
    const bool ok = (nd == 2 || nd == 3) && key.ndim() == nd && value.ndim() == nd && query.shape(-1) == e &&
                    key.shape(-1) == e && value.shape(-1) == e && key.shape(-2) == value.shape(-2) &&
                    (nd == 2 || (key.shape(0) == query.shape(0) && value.shape(0) == query.shape(0)));
    if (!ok)
        throw ShapeError(describe() + ": query " + shape_text(query) + ", key " + shape_text(key) + " and value " +
                         shape_text(value) + " do not fit; expected {N, L, " + std::to_string(e) + "}, {N, S, " +
                         std::to_string(e) + "} and {N, S, " + std::to_string(e) + "} (or one sample without N)");
    if (nd == 2) {  // one sample: a batch of one, and the masks likewise (one input stays one)
        AttentionMasks m = masks;
        if (m.key_padding.defined() && m.key_padding.ndim() == 1) m.key_padding = m.key_padding.unsqueeze(0);
        const Tensor q = query.unsqueeze(0);
        const Tensor k = key.is_same(query) ? q : key.unsqueeze(0);
        const Tensor v = value.is_same(query) ? q : value.is_same(key) ? k : value.unsqueeze(0);
        return (*this)(q, k, v, m).reshape(query.shape());
    }
    return detail::in_context(*this, [&] {
        const std::int64_t n = query.shape(0), l = query.shape(1), s = key.shape(1), h = heads_;
        auto project = [&](const Tensor& x, std::int64_t part) {
            Tensor w = in_proj_weight.slice(0, part * e, (part + 1) * e);
            Tensor b = in_proj_bias.defined() ? in_proj_bias.slice(0, part * e, (part + 1) * e) : Tensor();
            return split_heads(linear(x, w, b), h);
        };
        const double scale = 1.0 / std::sqrt(double(e / h));
        const std::vector<Tensor> masked_by = masks_of(masks, n, l, s, query.device());
        if (dropout.p == 0 || !training(dropout.mode)) {
            // No dropout on the weights: the memory-efficient op, which keeps no {N, heads, L, S} scores
            // beyond a block's. A self-attention projects queries, keys and values in one product.
            Tensor masked;
            for (const Tensor& m : masked_by) masked = masked.defined() ? where(masked, masked, m) : m;  // or
            const AttentionOptions o{.mask = masked, .scale = scale};
            if (key.is_same(query) && value.is_same(query))
                return out_proj(merge_heads(detail::packed_attention(
                    linear(query, in_proj_weight, in_proj_bias).reshape({n, l, 3, h, e / h}), o)));
            return out_proj(
                merge_heads(scaled_dot_product_attention(project(query, 0), project(key, 1), project(value, 2), o)));
        }
        Tensor q = project(query, 0) * scale, k = project(key, 1), v = project(value, 2);
        Tensor scores = matmul(q, k.transpose(-2, -1));  // {N, heads, L, S}
        for (const Tensor& masked : masked_by) {
            Tensor minus_inf = full({}, -std::numeric_limits<double>::infinity(),
                                    {.dtype = scores.dtype(), .device = scores.device()});
            scores = where(masked, minus_inf, scores);
        }
        Tensor weights = dropout(softmax(scores, -1));
        return out_proj(merge_heads(matmul(weights, v)));
    });
}

TransformerEncoderLayer::TransformerEncoderLayer(std::int64_t embed, std::int64_t heads,
                                                 const TransformerEncoderOptions& o)
    : self_attn(embed, heads, {.dropout = o.dropout}),
      linear1(embed, o.feedforward > 0 ? o.feedforward : 1),
      linear2(o.feedforward > 0 ? o.feedforward : 1, embed),
      dropout(o.dropout),
      dropout1(o.dropout),
      dropout2(o.dropout),
      norm1(embed, {}, {.epsilon = o.epsilon}),
      norm2(embed, {}, {.epsilon = o.epsilon}),
      norm_first(o.norm_first),
      activation_(o.activation) {
    if (o.feedforward < 1)
        throw ValueError("TransformerEncoderLayer(" + std::to_string(embed) + ", heads = " + std::to_string(heads) +
                         "): feedforward must be positive, got " + std::to_string(o.feedforward));
}

std::string TransformerEncoderLayer::describe() const {
    std::string s = "TransformerEncoderLayer(" + std::to_string(self_attn.embed()) +
                    ", heads = " + std::to_string(self_attn.heads()) +
                    ", feedforward = " + std::to_string(linear1.out_features());
    if (!activation_.is_identity() && activation_.name() != "relu") s += ", " + activation_.name();
    if (norm_first) s += ", norm_first";
    return s + ")";
}

Tensor TransformerEncoderLayer::operator()(const Tensor& x, const AttentionMasks& masks) const {
    auto attend = [&](const Tensor& t) { return dropout1(self_attn(t, masks)); };
    auto feed = [&](const Tensor& t) { return dropout2(linear2(dropout(activation_(linear1(t))))); };
    if (norm_first) {
        Tensor y = x + attend(norm1(x));
        return y + feed(norm2(y));
    }
    Tensor y = norm1(x + attend(x));
    return norm2(y + feed(y));
}

namespace {

std::vector<TransformerEncoderLayer> encoder_layers(std::int64_t embed, std::int64_t heads, std::int64_t n,
                                                    const TransformerEncoderOptions& o) {
    if (n < 1) throw ValueError("TransformerEncoder: num_layers must be positive, got " + std::to_string(n));
    std::vector<TransformerEncoderLayer> out;
    for (std::int64_t i = 0; i < n; ++i) out.emplace_back(embed, heads, o);
    return out;
}

std::vector<TransformerDecoderLayer> decoder_layers(std::int64_t embed, std::int64_t heads, std::int64_t n,
                                                    const TransformerEncoderOptions& o) {
    if (n < 1) throw ValueError("TransformerDecoder: num_layers must be positive, got " + std::to_string(n));
    std::vector<TransformerDecoderLayer> out;
    for (std::int64_t i = 0; i < n; ++i) out.emplace_back(embed, heads, o);
    return out;
}

template <class Layer>
std::string stack_name(const char* name, const std::vector<Layer>& layers, const std::optional<LayerNorm>& norm) {
    return std::string(name) + "(" + std::to_string(layers.size()) + " × " + layers.front().describe() +
           (norm ? ", norm" : "") + ")";
}

}  // namespace

TransformerEncoder::TransformerEncoder(std::int64_t embed, std::int64_t heads, std::int64_t num_layers,
                                       const TransformerEncoderOptions& o, bool final_norm)
    : layers(encoder_layers(embed, heads, num_layers, o)) {
    if (final_norm) norm.emplace(embed, Activation{}, LayerNormOptions{.epsilon = o.epsilon});
}

std::string TransformerEncoder::describe() const { return stack_name("TransformerEncoder", layers, norm); }

Tensor TransformerEncoder::operator()(const Tensor& x, const AttentionMasks& masks) const {
    Tensor y = x;
    for (const auto& layer : layers) y = layer(y, masks);
    return norm ? (*norm)(y) : y;
}

TransformerDecoderLayer::TransformerDecoderLayer(std::int64_t embed, std::int64_t heads,
                                                 const TransformerEncoderOptions& o)
    : self_attn(embed, heads, {.dropout = o.dropout}),
      multihead_attn(embed, heads, {.dropout = o.dropout}),
      linear1(embed, o.feedforward > 0 ? o.feedforward : 1),
      linear2(o.feedforward > 0 ? o.feedforward : 1, embed),
      dropout(o.dropout),
      dropout1(o.dropout),
      dropout2(o.dropout),
      dropout3(o.dropout),
      norm1(embed, {}, {.epsilon = o.epsilon}),
      norm2(embed, {}, {.epsilon = o.epsilon}),
      norm3(embed, {}, {.epsilon = o.epsilon}),
      norm_first(o.norm_first),
      activation_(o.activation) {
    if (o.feedforward < 1)
        throw ValueError("TransformerDecoderLayer(" + std::to_string(embed) + ", heads = " + std::to_string(heads) +
                         "): feedforward must be positive, got " + std::to_string(o.feedforward));
}

std::string TransformerDecoderLayer::describe() const {
    std::string s = "TransformerDecoderLayer(" + std::to_string(self_attn.embed()) +
                    ", heads = " + std::to_string(self_attn.heads()) +
                    ", feedforward = " + std::to_string(linear1.out_features());
    if (!activation_.is_identity() && activation_.name() != "relu") s += ", " + activation_.name();
    if (norm_first) s += ", norm_first";
    return s + ")";
}

Tensor TransformerDecoderLayer::operator()(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks) const {
    if (!memory.defined() || memory.ndim() != tgt.ndim())
        throw ShapeError(describe() + ": memory must be {N, S, E} as tgt is {N, L, E} (or one sample each), got tgt " +
                         to_string(tgt.shape()) + " and memory " +
                         (memory.defined() ? to_string(memory.shape()) : std::string("an empty tensor")));
    auto attend = [&](const Tensor& t) { return dropout1(self_attn(t, masks.self)); };
    auto cross = [&](const Tensor& t) { return dropout2(multihead_attn(t, memory, memory, masks.memory)); };
    auto feed = [&](const Tensor& t) { return dropout3(linear2(dropout(activation_(linear1(t))))); };
    if (norm_first) {
        Tensor y = tgt + attend(norm1(tgt));
        y = y + cross(norm2(y));
        return y + feed(norm3(y));
    }
    Tensor y = norm1(tgt + attend(tgt));
    y = norm2(y + cross(y));
    return norm3(y + feed(y));
}

TransformerDecoder::TransformerDecoder(std::int64_t embed, std::int64_t heads, std::int64_t num_layers,
                                       const TransformerEncoderOptions& o, bool final_norm)
    : layers(decoder_layers(embed, heads, num_layers, o)) {
    if (final_norm) norm.emplace(embed, Activation{}, LayerNormOptions{.epsilon = o.epsilon});
}

std::string TransformerDecoder::describe() const { return stack_name("TransformerDecoder", layers, norm); }

Tensor TransformerDecoder::operator()(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks) const {
    Tensor y = tgt;
    for (const auto& layer : layers) y = layer(y, memory, masks);
    return norm ? (*norm)(y) : y;
}

}  // namespace fluxion
