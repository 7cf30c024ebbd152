// operators_attention.cpp — ONNX's Attention (opsets 23 to 25) as fluxion's ops, so that it
// differentiates in Q, K, V, a float mask and the past state, and runs on every device: 3-d and 4-d
// inputs, grouped-query heads, boolean and float masks, is_causal, the sliding window, scale, softcap,
// the past/present cache, nonpad_kv_seqlen, softmax_precision and every qk_matmul_output_mode.
//
// fx::scaled_dot_product_attention runs the cases it computes alike, keeping no {L, S} matrix beyond a
// block of queries: no attn_mask, softcap or scores output, f32 or f64 at the default precision. It
// takes only a boolean mask, scales the product instead of both operands (half precision then rounds
// differently from ONNX) and gives NaN where ONNX gives zeros (a query with no key to attend).
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using I = std::int64_t;
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor optional_input(const Ts& in, std::size_t i) { return i < in.size() ? in[i] : Tensor(); }

// {B, L, heads · d} -> {B, heads, L, d}.
Tensor split_heads(const Tensor& x, I heads, const Node& n, const char* what) {
    if (heads <= 0 || x.shape(2) % heads != 0)
        throw ShapeError("fx::onnx: " + n.label() + ": " + what + " of shape " + to_string(x.shape()) +
                         " does not split into " + std::to_string(heads) + " heads");
    return x.reshape({x.shape(0), x.shape(1), heads, x.shape(2) / heads}).permute({0, 2, 1, 3});
}

// Grouped queries: each key or value head {B, kv_heads, S, d} serves heads / kv_heads consecutive
// query heads.
Tensor repeat_heads(const Tensor& x, I heads, const Node& n) {
    const I kv_heads = x.shape(1);
    if (kv_heads == heads) return x;
    if (kv_heads <= 0 || heads % kv_heads != 0)
        throw ShapeError("fx::onnx: " + n.label() + ": " + std::to_string(heads) + " query heads do not group over " +
                         std::to_string(kv_heads) + " key and value heads");
    return x.unsqueeze(2)
        .expand({x.shape(0), kv_heads, heads / kv_heads, x.shape(2), x.shape(3)})
        .reshape({x.shape(0), heads, x.shape(2), x.shape(3)});
}

// {B, heads, L, d} -> {B, L, heads · d}.
Tensor merge_heads(const Tensor& y) {
    return y.permute({0, 2, 1, 3}).reshape({y.shape(0), y.shape(2), y.shape(1) * y.shape(3)});
}

// The keys each query may see by position alone (is_causal, the window, nonpad_kv_seqlen), true where
// it may, {B or 1, 1, L, S}; none where every key is seen. Queries sit at `offset` + their index:
// after the past keys, or (an external cache) after the valid keys less L. Built on the host: a few
// comparisons of indices, no values of the model.
struct Positions {
    std::vector<bool> allowed;  // empty: every key
    Shape shape;
    bool every_query_sees_a_key = true;
};
Positions positions(const Node& n, I batch, I L, I S, I past, const Tensor& nonpad) {
    const bool causal = n.i("is_causal", 0) != 0;
    const I left = n.i("left_window_size", -1), right = n.i("right_window_size", -1);
    if (!causal && left < 0 && right < 0 && !nonpad.defined()) return {};
    std::vector<I> valid;
    if (nonpad.defined()) {
        values_read_on_host(n, "nonpad_kv_seqlen (to mask the padding)");
        valid = host_ints(nonpad);
        if (I(valid.size()) != batch)
            throw ShapeError("fx::onnx: " + n.label() + ": nonpad_kv_seqlen has " + std::to_string(valid.size()) +
                             " lengths for a batch of " + std::to_string(batch));
    }
    const I rows = nonpad.defined() ? batch : 1;
    Positions p{std::vector<bool>(std::size_t(rows * L * S)), {rows, 1, L, S}};
    for (I b = 0; b < rows; ++b) {
        const I offset = nonpad.defined() ? valid[std::size_t(b)] - L : past;
        for (I i = 0; i < L; ++i) {
            bool any = false;
            for (I j = 0; j < S; ++j) {
                const I at = i + offset;
                const bool ok = (!causal || j <= at) && (left < 0 || j >= at - left) &&
                                (right < 0 || j <= at + right) && (!nonpad.defined() || j < valid[std::size_t(b)]);
                p.allowed[std::size_t((b * L + i) * S + j)] = ok;
                any = any || ok;
            }
            p.every_query_sees_a_key = p.every_query_sees_a_key && any;
        }
    }
    return p;
}

DType softmax_type(const Node& n, DType otherwise) {
    using P = ::onnx::TensorProto;
    if (!n.has("softmax_precision")) return otherwise;
    switch (n.i("softmax_precision", 0)) {
        case P::FLOAT: return DType::f32;
        case P::DOUBLE: return DType::f64;
        case P::FLOAT16: return DType::f16;
        case P::BFLOAT16: return DType::bf16;
        default: n.unsupported("softmax_precision=" + std::to_string(n.i("softmax_precision", 0)));
    }
}

Tensor as_type(const Tensor& x, DType t) { return x.dtype() == t ? x : cast(x, t); }

// Softmax over the keys. In f16 and bf16 op by op as ONNX's function body computes it, each result
// rounded to the type (exp(x - max) / sum): the node suite's half-precision references round so, and
// fluxion's softmax, which rounds once, differs from them by an ulp in places.
Tensor softmax_over_keys(const Tensor& x) {
    if (x.dtype() != DType::f16 && x.dtype() != DType::bf16) return softmax(x, -1);
    const Tensor e = exp(x - max(x, -1, true).detach());
    return e / sum(e, -1, true);
}

// Outputs: Y, present_key, present_value, qk_matmul_output.
Ts attention(const Node& n, const Ts& in) {
    Tensor q = in.at(0), k = in.at(1), v = in.at(2);
    const Tensor mask = optional_input(in, 3), past_key = optional_input(in, 4), past_value = optional_input(in, 5),
                 nonpad = optional_input(in, 6);
    const int rank = q.ndim();
    if ((rank != 3 && rank != 4) || k.ndim() != rank || v.ndim() != rank)
        throw ShapeError("fx::onnx: " + n.label() + ": Q, K and V are " + to_string(q.shape()) + ", " +
                         to_string(k.shape()) + " and " + to_string(v.shape()) +
                         "; Attention takes all three 3-d {B, L, hidden} or all 4-d {B, heads, L, d}");
    if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
        throw DTypeError("fx::onnx: " + n.label() + ": Q, K and V are " + name(q.dtype()) + ", " + name(k.dtype()) +
                         " and " + name(v.dtype()) + "; Attention takes one floating type");
    if (past_key.defined() != past_value.defined())
        throw ValueError("fx::onnx: " + n.label() + ": past_key and past_value are given together or not at all");
    if (past_key.defined() && nonpad.defined())
        throw ValueError("fx::onnx: " + n.label() +
                         ": nonpad_kv_seqlen (an external cache) and past_key (the "
                         "operator's own cache) do not go together");
    const I mode = n.i("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3) n.unsupported("qk_matmul_output_mode=" + std::to_string(mode));

    if (rank == 3) {
        if (!n.has("q_num_heads") || !n.has("kv_num_heads"))
            throw ValueError("fx::onnx: " + n.label() +
                             ": 3-d Q, K and V need the attributes q_num_heads and kv_num_heads");
        const I kv_heads = n.i("kv_num_heads", 0);
        q = split_heads(q, n.i("q_num_heads", 0), n, "Q");
        k = split_heads(k, kv_heads, n, "K");
        v = split_heads(v, kv_heads, n, "V");
    }
    const I past = past_key.defined() ? past_key.shape(2) : 0;
    if (past_key.defined()) k = concat({past_key, k}, 2), v = concat({past_value, v}, 2);
    const Tensor present_key = k, present_value = v;

    const I batch = q.shape(0), heads = q.shape(1), L = q.shape(2), S = k.shape(2), kv_heads = k.shape(1);
    if (k.shape(3) != q.shape(3) || v.shape(1) != kv_heads || v.shape(2) != S)
        throw ShapeError("fx::onnx: " + n.label() + ": Q, K and V as {B, heads, L, d} are " + to_string(q.shape()) +
                         ", " + to_string(k.shape()) + " and " + to_string(v.shape()) +
                         "; K needs Q's d, and V K's heads and length");
    k = repeat_heads(k, heads, n), v = repeat_heads(v, heads, n);

    const double scale = n.has("scale") ? n.f("scale", 0) : 1.0 / std::sqrt(double(q.shape(3)));
    const Positions by_position = positions(n, batch, L, S, past, nonpad);
    if (!mask.defined() && n.f("softcap", 0) <= 0 && n.outputs() < 4 && !n.has("softmax_precision") &&
        (q.dtype() == DType::f32 || q.dtype() == DType::f64) && by_position.every_query_sees_a_key) {
        std::vector<bool> blocked(by_position.allowed.size());
        for (std::size_t i = 0; i < blocked.size(); ++i) blocked[i] = !by_position.allowed[i];
        const Tensor mask_out =
            blocked.empty() ? Tensor()
                            : tensor(blocked, by_position.shape, {.dtype = DType::boolean, .device = q.device()});
        const Tensor y = scaled_dot_product_attention(q, k, v, {.mask = mask_out, .scale = scale});
        return {rank == 3 ? merge_heads(y) : y, present_key, present_value};
    }

    // The scale as √scale on each operand, rounded to their type, as ONNX's definition does (half
    // precision rounds differently otherwise).
    const TensorOptions like_q = {.dtype = q.dtype(), .device = q.device()};
    const Tensor root = full({}, std::sqrt(scale), like_q);
    const Tensor product = matmul(q * root, transpose(k * root));  // {B, heads, L, S}
    Tensor scores = product;
    if (const double cap = n.f("softcap", 0); cap > 0) scores = tanh(scores / cap) * cap;

    // The additive bias: the float mask, or 0 / -inf for a boolean one, padded to S with -inf; then
    // -inf wherever the position rules out the key.
    const Tensor zero = full({}, 0, like_q), minus_inf = full({}, -kInf, like_q);
    Tensor bias;
    if (mask.defined()) {
        if (mask.dtype() != DType::boolean && !is_floating(mask.dtype()))
            throw DTypeError("fx::onnx: " + n.label() + ": attn_mask is " + name(mask.dtype()) +
                             "; it is boolean (true where a query attends) or floating (added to the scores)");
        bias = mask.dtype() == DType::boolean ? where(mask, zero, minus_inf) : as_type(mask, q.dtype());
        const I length = bias.ndim() > 0 ? bias.shape(bias.ndim() - 1) : 1;
        if (bias.ndim() == 0 || length > S)
            throw ShapeError("fx::onnx: " + n.label() + ": attn_mask of shape " + to_string(mask.shape()) +
                             " does not fit the " + std::to_string(S) + " keys (its last axis is at most as long)");
        bias = pad_axis(bias, bias.ndim() - 1, 0, S - length, -kInf);
    }
    if (!by_position.allowed.empty()) {
        const Tensor allowed =
            tensor(by_position.allowed, by_position.shape, {.dtype = DType::boolean, .device = q.device()});
        bias = where(allowed, bias.defined() ? bias : zero, minus_inf);
    }
    const Tensor logits = bias.defined() ? scores + bias : scores;

    // A query with no key to attend (its every bias -inf) gets zero weights, not NaN: its logits are
    // replaced before the softmax and its weights after, by where, so no NaN reaches a gradient.
    Tensor weights;
    const DType precision = softmax_type(n, q.dtype());
    if (bias.defined()) {
        const Tensor unattended = eq(max(bias, -1, true), minus_inf);
        weights = softmax_over_keys(as_type(where(unattended, zero, logits), precision));
        weights = where(unattended, full({}, 0, {.dtype = precision, .device = q.device()}), weights);
    } else {
        weights = softmax_over_keys(as_type(logits, precision));
    }
    weights = as_type(weights, q.dtype());

    const Tensor y = matmul(weights, v);
    // Mode 0 is the product before softcap, as the operator's definition says (ONNX's reference
    // returns it after; no node case has both).
    const Tensor qk_output = mode == 0 ? product : mode == 1 ? scores : mode == 2 ? logits : weights;
    return {rank == 3 ? merge_heads(y) : y, present_key, present_value, qk_output};
}

// ai.onnx.preview's FlexAttention on {B, heads, L, d}: softmax(score_mod(q kᵀ · scale)), then prob_mod,
// times v, in f32 for half-precision inputs (or softmax_precision). The modifiers are graphs of their
// own, run on fluxion's ops too, so the whole node differentiates.
Tensor modified(const Node& n, const char* attribute, const Tensor& x) {
    for (const auto& a : n.proto().attribute()) {
        if (a.name() != attribute) continue;
        const Model m = subgraph(a.g(), n.opset(), n.label() + "'s " + attribute);
        const std::vector<Tensor> ys = m(std::vector<Tensor>{x});
        if (ys.size() != 1 || ys[0].shape() != x.shape())
            throw ShapeError("fx::onnx: " + n.label() + ": its " + attribute + " gives " + std::to_string(ys.size()) +
                             " outputs; it gives one of its input's shape " + to_string(x.shape()));
        return as_type(ys[0], x.dtype());
    }
    return x;
}

Ts flex_attention(const Node& n, const Ts& in) {
    const Tensor &q = in.at(0), &k = in.at(1), &v = in.at(2);
    if (q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4 || k.shape(3) != q.shape(3) || v.shape(1) != k.shape(1) ||
        v.shape(2) != k.shape(2))
        throw ShapeError("fx::onnx: " + n.label() + ": Q, K and V are " + to_string(q.shape()) + ", " +
                         to_string(k.shape()) + " and " + to_string(v.shape()) +
                         "; FlexAttention takes {B, heads, L, d}, {B, kv_heads, S, d} and {B, kv_heads, S, dv}");
    if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
        throw DTypeError("fx::onnx: " + n.label() + ": Q, K and V are " + name(q.dtype()) + ", " + name(k.dtype()) +
                         " and " + name(v.dtype()) + "; FlexAttention takes one floating type");
    const I heads = q.shape(1);
    const double scale = n.has("scale") ? n.f("scale", 0) : 1.0 / std::sqrt(double(q.shape(3)));
    const Tensor root = full({}, std::sqrt(float(scale)), {.dtype = q.dtype(), .device = q.device()});
    const DType precision = softmax_type(n, q.dtype() == DType::f64 ? DType::f64 : DType::f32);
    Tensor scores = as_type(matmul(q * root, transpose(repeat_heads(k, heads, n) * root)), precision);
    scores = modified(n, "score_mod", scores);
    const Tensor weights = modified(n, "prob_mod", softmax(scores, -1));
    return {as_type(matmul(weights, as_type(repeat_heads(v, heads, n), precision)), v.dtype())};
}

}  // namespace

void add_attention_operators(std::map<std::string, Operator>& t) {
    t["Attention"] = attention;
    t["ai.onnx.preview.FlexAttention"] = flex_attention;  // as load() looks up the preview domain's operators
}

}  // namespace fluxion::onnx::detail
