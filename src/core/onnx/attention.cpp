// attention.cpp — MultiHeadAttention (self-attention, no masks) and PyTorch's Transformer encoder
// as ONNX operators on batch-first {N, L, E} values; the axes other than the embedding come from
// the input (Reshape's 0), so any batch size and sequence length runs.
#include <cmath>

#include "core/onnx/graph.hpp"
#include "fluxion/layers/attention.hpp"

namespace fluxion::onnx::detail {
namespace {
using I = std::int64_t;
}

std::string layer(Graph& g, const MultiHeadAttention& a, const std::string& x, const std::string& path) {
    if (g.rank(x) != 3)
        throw ShapeError("fx::onnx::save: " + a.describe() + " at '" + path + "' is given a batch of rank " +
                         std::to_string(g.rank(x)) + "; it exports on {N, L, E}");
    const I e = a.embed(), h = a.heads(), d = e / h;
    // One projection for q, k and v: x · in_proj_weightᵀ + in_proj_bias, {N, L, 3E} -> {3, N, h, L, d}.
    const std::string wt = g.node("Transpose", {g.initializer(a.in_proj_weight, join(path, "in_proj_weight"))},
                                  join(path, "in_proj_weight_t"), 2);
    std::string qkv = g.node("MatMul", {x, wt}, join(path, "in_proj"), 3);
    if (a.in_proj_bias.defined())
        qkv = g.node("Add", {qkv, g.initializer(a.in_proj_bias, join(path, "in_proj_bias"))}, join(path, "in_proj_bias_add"), 3);
    qkv = g.node("Reshape", {qkv, g.initializer_i64({0, 0, 3, h, d}, {5}, join(path, "heads_shape"))},
                 join(path, "split_heads"), 5);
    qkv = g.node("Transpose", {qkv}, join(path, "qkv"), 5, [](auto& n) { attribute(n, "perm", std::vector<I>{2, 0, 3, 1, 4}); });
    auto part = [&](I i, const char* name) {
        return g.node("Gather", {qkv, g.initializer_i64({i}, {}, join(path, std::string(name) + "_index"))}, join(path, name), 4);
    };
    const std::string q = part(0, "q"), k = part(1, "k"), v = part(2, "v");
    const std::string kt = g.node("Transpose", {k}, join(path, "k_t"), 4, [](auto& n) { attribute(n, "perm", std::vector<I>{0, 1, 3, 2}); });
    std::string s = g.node("MatMul", {q, kt}, join(path, "scores"), 4);
    s = g.node("Mul", {s, g.initializer({static_cast<float>(1.0 / std::sqrt(double(d)))}, {}, join(path, "scale"))},
               join(path, "scaled"), 4);
    s = g.node("Softmax", {s}, join(path, "softmax"), 4, [](auto& n) { attribute(n, "axis", I{-1}); });
    std::string y = g.node("MatMul", {s, v}, join(path, "attend"), 4);  // {N, h, L, d}
    y = g.node("Transpose", {y}, join(path, "merge_heads_t"), 4, [](auto& n) { attribute(n, "perm", std::vector<I>{0, 2, 1, 3}); });
    y = g.node("Reshape", {y, g.initializer_i64({0, 0, e}, {3}, join(path, "embed_shape"))}, join(path, "merge_heads"), 3);
    return layer(g, a.out_proj, y, join(path, "out_proj"));
}

std::string layer(Graph& g, const TransformerEncoderLayer& t, const std::string& x, const std::string& path) {
    auto add = [&](const std::string& a, const std::string& b, const char* name) {
        return g.node("Add", {a, b}, join(path, name), g.rank(a));
    };
    auto attend = [&](const std::string& v) { return layer(g, t.self_attn, v, join(path, "self_attn")); };
    auto feed = [&](const std::string& v) {
        const std::string hidden = layer(g, t.activation(), layer(g, t.linear1, v, join(path, "linear1")), join(path, "linear1"));
        return layer(g, t.linear2, hidden, join(path, "linear2"));
    };
    if (t.norm_first) {
        const std::string y = add(x, attend(layer(g, t.norm1, x, join(path, "norm1"))), "add1");
        return add(y, feed(layer(g, t.norm2, y, join(path, "norm2"))), "add2");
    }
    const std::string y = layer(g, t.norm1, add(x, attend(x), "add1"), join(path, "norm1"));
    return layer(g, t.norm2, add(y, feed(y), "add2"), join(path, "norm2"));
}

std::string layer(Graph& g, const TransformerEncoder& t, const std::string& x, const std::string& path) {
    return layer(g, t.norm, layer(g, t.layers, x, join(path, "layers")), join(path, "norm"));
}

}  // namespace fluxion::onnx::detail
