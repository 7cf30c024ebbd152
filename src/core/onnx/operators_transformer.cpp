// operators_transformer.cpp — the parts of a transformer block beside attention and its norms:
// ONNX's RotaryEmbedding and SwiGLU, as fluxion's ops (differentiable in the input and the caches).
#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using I = std::int64_t;

// Rotates pairs of each head's first rotary_embedding_dim features by the angles of the token's
// position: the two halves paired, or neighbours (interleaved). cos and sin come from the caches'
// rows at position_ids {B, L}, or are given per token {B, L, rotary/2}.
Ts rotary_embedding(const Node& n, const Ts& in) {
    const Tensor& input = in.at(0);
    const Tensor position_ids = in.size() > 3 ? in[3] : Tensor();
    Tensor x;  // {B, L, heads, d}
    if (input.ndim() == 4) {
        x = input.permute({0, 2, 1, 3});
    } else if (input.ndim() == 3) {
        const I heads = n.i("num_heads", 0);
        if (heads <= 0 || input.shape(2) % heads != 0)
            throw ShapeError("fx::onnx: " + n.label() + ": an input of shape " + to_string(input.shape()) +
                             " needs num_heads dividing its " + std::to_string(input.shape(2)) + " features");
        x = input.reshape({input.shape(0), input.shape(1), heads, input.shape(2) / heads});
    } else {
        throw ShapeError("fx::onnx: " + n.label() + ": the input has shape " + to_string(input.shape()) +
                         "; RotaryEmbedding takes {B, heads, L, d} or {B, L, hidden}");
    }
    const I batch = x.shape(0), length = x.shape(1), d = x.shape(3);
    const I rotary = n.i("rotary_embedding_dim", 0) > 0 ? n.i("rotary_embedding_dim", 0) : d;
    if (rotary > d || rotary % 2 != 0)
        throw ShapeError("fx::onnx: " + n.label() + ": rotary_embedding_dim " + std::to_string(rotary) +
                         " is odd or beyond the head size " + std::to_string(d));

    auto angles = [&](const Tensor& cache) {  // -> {B, L, 1, rotary/2}
        Tensor c = cache;
        if (position_ids.defined()) {
            values_read_on_host(n, "position_ids (to pick the caches' rows)");
            std::vector<I> rows = host_ints(position_ids);
            for (const I r : rows)
                if (r < 0 || r >= cache.shape(0))
                    throw ValueError("fx::onnx: " + n.label() + ": position " + std::to_string(r) +
                                     " is beyond the cache's " + std::to_string(cache.shape(0)) + " rows");
            const Tensor index = tensor(rows, {I(rows.size())}).to(cache.device());
            c = index_select(cache, 0, index).reshape({batch, length, cache.shape(-1)});
        }
        if (c.ndim() != 3 || c.shape(-1) != rotary / 2)
            throw ShapeError("fx::onnx: " + n.label() + ": a cache of shape " + to_string(cache.shape()) +
                             " does not give {B, L, " + std::to_string(rotary / 2) + "} angles");
        return c.unsqueeze(2);
    };
    const Tensor cos = angles(in.at(1)), sin = angles(in.at(2));

    const bool interleaved = n.i("interleaved", 0) != 0;
    const Tensor turned = x.slice(3, 0, rotary);
    const Tensor x1 = interleaved ? turned.slice(3, 0, rotary, 2) : turned.slice(3, 0, rotary / 2);
    const Tensor x2 = interleaved ? turned.slice(3, 1, rotary, 2) : turned.slice(3, rotary / 2, rotary);
    const Tensor real = cos * x1 - sin * x2, imaginary = sin * x1 + cos * x2;
    Tensor y = interleaved ? stack({real, imaginary}, 4).reshape(turned.shape()) : concat({real, imaginary}, 3);
    if (rotary < d) y = concat({y, x.slice(3, rotary, d)}, 3);
    return {input.ndim() == 4 ? y.permute({0, 2, 1, 3}) : y.reshape(input.shape())};
}

// swish(A, alpha) · B, the gated feed-forward's activation.
Ts swiglu(const Node& n, const Ts& in) {
    const Tensor &a = in.at(0), &b = in.at(1);
    if (a.shape() != b.shape())
        throw ShapeError("fx::onnx: " + n.label() + ": A " + to_string(a.shape()) + " and B " + to_string(b.shape()) +
                         " differ; SwiGLU does not broadcast");
    return {a * sigmoid(a * double(n.f("alpha", 1))) * b};
}

}  // namespace

void add_transformer_operators(std::map<std::string, Operator>& t) {
    t["RotaryEmbedding"] = rotary_embedding;
    t["SwiGLU"] = swiglu;
}

}  // namespace fluxion::onnx::detail
