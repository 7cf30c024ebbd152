// operators_linear_attention.cpp — the two stateful operators of linear-attention blocks (Gated
// DeltaNet, Mamba) as fluxion's ops, differentiable in every floating input: LinearAttention, a
// recurrence over a {d_k, d_v} state per key head, and CausalConvWithState, a depthwise causal
// convolution that carries its last k - 1 inputs. Both return the state for the next call.
#include <cmath>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using I = std::int64_t;

Tensor optional_input(const Ts& in, std::size_t i) { return i < in.size() ? in[i] : Tensor(); }
Tensor as_type(const Tensor& x, DType t) { return x.dtype() == t ? x : cast(x, t); }

// {B, T, heads · d} -> {B, heads, T, d}.
Tensor unpack_heads(const Tensor& x, I heads, const Node& n, const char* what) {
    if (x.ndim() != 3 || heads <= 0 || x.shape(2) % heads != 0)
        throw ShapeError("fx::onnx: " + n.label() + ": " + what + " of shape " + to_string(x.shape()) +
                         " is no {B, T, " + std::to_string(heads) + " heads · d}");
    return x.reshape({x.shape(0), x.shape(1), heads, x.shape(2) / heads}).permute({0, 2, 1, 3});
}

// Token by token: the state decays by exp(decay) (gated rules), takes k ⊗ v, or with the delta rule
// k ⊗ beta (v - stateᵀ k); each query head reads scale · qᵀ state of its key head. Computed in f32
// for half-precision inputs, as ONNX defines it.
Ts linear_attention(const Node& n, const Ts& in) {
    const std::string rule = n.s("update_rule", "gated_delta");
    if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
        n.unsupported("update_rule='" + rule + "'");
    const bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
    const Tensor past = optional_input(in, 3), decay = optional_input(in, 4), beta = optional_input(in, 5);
    if (gated != decay.defined() || delta != beta.defined())
        throw ValueError("fx::onnx: " + n.label() + ": update_rule '" + rule + "' takes " +
                         (gated ? "a decay" : "no decay") + " and " + (delta ? "a beta" : "no beta") + " input");
    const I q_heads = n.i("q_num_heads", 0), kv_heads = n.i("kv_num_heads", 0);
    if (kv_heads <= 0 || q_heads <= 0 || q_heads % kv_heads != 0)
        throw ValueError("fx::onnx: " + n.label() + ": q_num_heads " + std::to_string(q_heads) +
                         " is no positive multiple of kv_num_heads " + std::to_string(kv_heads));

    const DType out_type = in.at(0).dtype();
    const DType work = out_type == DType::f64 ? DType::f64 : DType::f32;
    const Tensor q = as_type(unpack_heads(in.at(0), q_heads, n, "query"), work);
    const Tensor k = as_type(unpack_heads(in.at(1), kv_heads, n, "key"), work);
    const Tensor v = as_type(unpack_heads(in.at(2), kv_heads, n, "value"), work);
    const I batch = q.shape(0), steps = q.shape(2), dk = q.shape(3), dv = v.shape(3), group = q_heads / kv_heads;
    if (k.shape(3) != dk || k.shape(2) != steps || v.shape(2) != steps)
        throw ShapeError("fx::onnx: " + n.label() + ": query, key and value of shapes " + to_string(in[0].shape()) +
                         ", " + to_string(in[1].shape()) + " and " + to_string(in[2].shape()) + " do not fit together");
    // decay {B, kv_heads, T, d_k or 1}, beta {B, kv_heads or 1, T, 1}
    Tensor gate, rate;
    if (gated) {
        const I last = decay.shape(decay.ndim() - 1);
        if (decay.ndim() != 3 || (last != kv_heads && last != kv_heads * dk))
            throw ShapeError("fx::onnx: " + n.label() + ": decay of shape " + to_string(decay.shape()) +
                             " is no {B, T, kv_num_heads} nor {B, T, kv_num_heads · d_k}");
        gate = as_type(unpack_heads(decay, kv_heads, n, "decay"), work);
    }
    if (delta) {
        const I last = beta.shape(beta.ndim() - 1);
        if (beta.ndim() != 3 || (last != kv_heads && last != 1))
            throw ShapeError("fx::onnx: " + n.label() + ": beta of shape " + to_string(beta.shape()) +
                             " is no {B, T, kv_num_heads} nor {B, T, 1}");
        rate = as_type(beta.reshape({batch, steps, last, 1}).permute({0, 2, 1, 3}), work);
    }
    Tensor state =
        past.defined() ? as_type(past, work) : zeros({batch, kv_heads, dk, dv}, {.dtype = work, .device = q.device()});
    if (state.shape() != Shape{batch, kv_heads, dk, dv})
        throw ShapeError("fx::onnx: " + n.label() + ": past_state of shape " + to_string(state.shape()) + " is no " +
                         to_string(Shape{batch, kv_heads, dk, dv}));
    const double scale = n.f("scale", 0) != 0 ? n.f("scale", 0) : 1.0 / std::sqrt(double(dk));

    std::vector<Tensor> outputs;
    for (I t = 0; t < steps; ++t) {
        const Tensor k_t = k.slice(2, t, t + 1);  // {B, kv_heads, 1, d_k}
        Tensor v_t = v.slice(2, t, t + 1);
        if (gated) state = state * transpose(exp(gate.slice(2, t, t + 1)));
        if (delta) v_t = rate.slice(2, t, t + 1) * (v_t - matmul(k_t, state));
        state = state + matmul(transpose(k_t), v_t);
        const Tensor read =
            group == 1 ? state
                       : state.unsqueeze(2).expand({batch, kv_heads, group, dk, dv}).reshape({batch, q_heads, dk, dv});
        outputs.push_back(matmul(q.slice(2, t, t + 1), read) * scale);
    }
    const Tensor y = concat(outputs, 2).permute({0, 2, 1, 3}).reshape({batch, steps, q_heads * dv});
    return {as_type(y, out_type), as_type(state, past.defined() ? past.dtype() : out_type)};
}

// input {B, C, T} after the carried {B, C, k - 1} (zeros without past_state), convolved per channel
// with weight {C, 1, k}, plus bias; SiLU where asked. The new state is the last k - 1 of that sequence.
Ts causal_conv_with_state(const Node& n, const Ts& in) {
    const Tensor &x = in.at(0), &w = in.at(1);
    const Tensor bias = optional_input(in, 2), past = optional_input(in, 3);
    const std::string activation = n.s("activation", "none");
    if (activation != "none" && activation != "silu" && activation != "swish")
        n.unsupported("activation='" + activation + "'");
    if (x.ndim() != 3 || w.ndim() != 3 || w.shape(0) != x.shape(1) || w.shape(1) != 1)
        throw ShapeError("fx::onnx: " + n.label() + ": input " + to_string(x.shape()) + " and weight " +
                         to_string(w.shape()) + " are no {B, C, T} and {C, 1, k}");
    const I batch = x.shape(0), channels = x.shape(1), k = w.shape(2);
    const Tensor carried =
        past.defined() ? past : zeros({batch, channels, k - 1}, {.dtype = x.dtype(), .device = x.device()});
    if (carried.shape() != Shape{batch, channels, k - 1})
        throw ShapeError("fx::onnx: " + n.label() + ": past_state of shape " + to_string(carried.shape()) + " is no " +
                         to_string(Shape{batch, channels, k - 1}));
    const Tensor padded = concat({carried, x}, 2);
    Tensor y = conv2d(padded.unsqueeze(2), w.unsqueeze(2), {.groups = channels}).squeeze(2);
    if (bias.defined()) y = y + bias.reshape({1, channels, 1});
    if (activation != "none") y = swish(y);
    return {y, padded.slice(2, padded.shape(2) - (k - 1), padded.shape(2))};
}

}  // namespace

void add_linear_attention_operators(std::map<std::string, Operator>& t) {
    t["LinearAttention"] = linear_attention;
    t["CausalConvWithState"] = causal_conv_with_state;
}

}  // namespace fluxion::onnx::detail
