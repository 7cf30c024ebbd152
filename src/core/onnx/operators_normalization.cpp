// operators_normalization.cpp — ONNX's RMSNormalization, GroupNormalization and LpNormalization as
// fluxion's ops (differentiable in the input, the scale and the bias). The statistics are computed in
// stash_type's precision, as ONNX defines them, and the normalized values rounded back to X's type.
#include <onnx/onnx_pb.h>

#include <cmath>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using I = std::int64_t;

Tensor as_type(const Tensor& x, DType t) { return x.dtype() == t ? x : cast(x, t); }

DType stash_type(const Node& n) {
    using P = ::onnx::TensorProto;
    switch (n.i("stash_type", P::FLOAT)) {
        case P::FLOAT: return DType::f32;
        case P::DOUBLE: return DType::f64;
        case P::FLOAT16: return DType::f16;
        case P::BFLOAT16: return DType::bf16;
        default: n.unsupported("stash_type=" + std::to_string(n.i("stash_type", 0)));
    }
}

// x / √(mean of x² over the axes from `axis` on + epsilon) · scale.
Ts rms_normalization(const Node& n, const Ts& in) {
    const Tensor& x = in.at(0);
    const int first = axis_of(n.i("axis", -1), x.ndim(), n);
    const Tensor xs = as_type(x, stash_type(n));
    Tensor mean_square = square(xs);
    for (int a = x.ndim() - 1; a >= first; --a) mean_square = mean(mean_square, a, true);
    const Tensor normalized = as_type(xs / sqrt(mean_square + double(n.f("epsilon", 1e-5f))), x.dtype());
    return {normalized * in.at(1)};
}

// Per sample and group of channels: (x - mean) / √(variance + epsilon); then a scale and bias per
// channel (per group before opset 21, which ONNX changed because that was not what the paper does).
Ts group_normalization(const Node& n, const Ts& in) {
    const Tensor& x = in.at(0);
    const I groups = n.i("num_groups", 0);
    if (x.ndim() < 2 || groups <= 0 || x.shape(1) % groups != 0)
        throw ShapeError("fx::onnx: " + n.label() + ": " + std::to_string(groups) +
                         " groups do not divide the channels of an input of shape " + to_string(x.shape()));
    const I channels = x.shape(1);
    const Tensor grouped = as_type(x, stash_type(n)).reshape({x.shape(0), groups, -1});
    const Tensor centred = grouped - mean(grouped, 2, true);
    const Tensor variance = mean(square(centred), 2, true);
    const Tensor normalized =
        as_type(centred / sqrt(variance + double(n.f("epsilon", 1e-5f))), x.dtype()).reshape(x.shape());
    auto per_channel = [&](const Tensor& t) {
        const Tensor c = t.numel() == groups && n.opset() < 21
                             ? t.reshape({groups, 1}).expand({groups, channels / groups}).reshape({channels})
                             : t;
        if (c.numel() != channels)
            throw ShapeError("fx::onnx: " + n.label() + ": scale and bias have " + std::to_string(c.numel()) +
                             " values for " + std::to_string(channels) + " channels");
        Shape s(std::size_t(x.ndim()), 1);
        s[1] = channels;
        return c.reshape(s);
    };
    return {normalized * per_channel(in.at(1)) + per_channel(in.at(2))};
}

// x / its L1 or L2 norm along the axis; zero where the norm is (x is zero there too, so dividing by
// one instead gives it).
Ts lp_normalization(const Node& n, const Ts& in) {
    const Tensor& x = in.at(0);
    const int axis = axis_of(n.i("axis", -1), x.ndim(), n);
    const I p = n.i("p", 2);
    if (p != 1 && p != 2) n.unsupported("p=" + std::to_string(p) + " (ONNX defines 1 and 2)");
    const Tensor norm = p == 1 ? sum(abs(x), axis, true) : sqrt(sum(square(x), axis, true));
    return {x / where(eq(norm, zeros_like(norm)), ones_like(norm), norm)};
}

}  // namespace

void add_normalization_operators(std::map<std::string, Operator>& t) {
    t["RMSNormalization"] = rms_normalization;
    t["GroupNormalization"] = group_normalization;
    t["LpNormalization"] = lp_normalization;
}

}  // namespace fluxion::onnx::detail
