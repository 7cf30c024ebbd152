// layers.cpp — fluxion's layers as ONNX operators (opset 17), in test mode: BatchNorm with its
// running statistics, Dropout as the identity.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/onnx/graph.hpp"
#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/conv.hpp"
#include "fluxion/layers/dense.hpp"
#include "fluxion/layers/dropout.hpp"
#include "fluxion/layers/flatten.hpp"
#include "fluxion/layers/normalise.hpp"
#include "fluxion/layers/pooling.hpp"
#include "fluxion/layers/upsample.hpp"

namespace fluxion::onnx::detail {
namespace {

using I = std::int64_t;

// A 2-d window's attributes, or a 1-d one's (fluxion keeps 1-d windows as a height of 1) on {N, C, L}.
std::vector<I> pair(const Size2& s, bool one_d) { return one_d ? std::vector<I>{s.w} : std::vector<I>{s.h, s.w}; }
std::vector<I> pads(I top, I bottom, I left, I right, bool one_d) {
    return one_d ? std::vector<I>{left, right} : std::vector<I>{top, left, bottom, right};  // ONNX: begins, then ends
}

// The same for 1, 2 or 3 spatial axes (volumes: fluxion keeps the depth's value apart).
std::vector<I> per_axis(I depth, const Size2& s, int spatial) {
    return spatial == 3 ? std::vector<I>{depth, s.h, s.w} : pair(s, spatial == 1);
}
std::vector<I> pads(I front, I back, I top, I bottom, I left, I right, int spatial) {
    return spatial == 3 ? std::vector<I>{front, top, left, back, bottom, right} : pads(top, bottom, left, right, spatial == 1);
}

// A layer's node is named by its path; at the model's root, by what it is.
std::string or_else(const std::string& path, const char* what) { return path.empty() ? what : path; }

std::string scalar(Graph& g, float v, const std::string& name) { return g.initializer({v}, {}, name); }

}  // namespace

std::string layer(Graph& g, const Activation& a, const std::string& x, const std::string& path) {
    const std::string& f = a.name();
    const std::string name = join(path, f == "σ" ? "sigmoid" : f == "hardσ" ? "hardsigmoid" : f);
    const int r = g.rank(x);
    if (a.is_identity()) return x;
    if (f == "relu") return g.node("Relu", {x}, name, r);
    if (f == "σ") return g.node("Sigmoid", {x}, name, r);
    if (f == "tanh") return g.node("Tanh", {x}, name, r);
    if (f == "softplus") return g.node("Softplus", {x}, name, r);
    if (f == "hardswish") return g.node("HardSwish", {x}, name, r);
    if (f == "gelu_erf") {  // x Φ(x) = x (1 + erf(x / √2)) / 2: opset 17 has Erf but no Gelu
        const std::string e = g.node("Erf", {g.node("Mul", {x, scalar(g, static_cast<float>(1 / std::sqrt(2.0)), name + ".c")}, name + ".scaled", r)},
                                     name + ".erf", r);
        const std::string half = g.node("Mul", {x, scalar(g, 0.5f, name + ".half")}, name + ".half_x", r);
        return g.node("Mul", {half, g.node("Add", {e, scalar(g, 1.0f, name + ".one")}, name + ".add", r)}, name, r);
    }
    if (f == "swish") return g.node("Mul", {x, g.node("Sigmoid", {x}, name + ".sigmoid", r)}, name, r);
    if (f == "hardσ")
        return g.node("HardSigmoid", {x}, name, r, [](auto& n) {
            attribute(n, "alpha", 1.0f / 6);
            attribute(n, "beta", 0.5f);
        });
    if (f == "relu6")
        return g.node("Clip", {x, scalar(g, 0, name + ".min"), scalar(g, 6, name + ".max")}, name, r);
    if (f == "leakyrelu") return g.node("LeakyRelu", {x}, name, r, [](auto& n) { attribute(n, "alpha", 0.01f); });
    if (f == "elu") return g.node("Elu", {x}, name, r, [](auto& n) { attribute(n, "alpha", 1.0f); });
    if (f == "softmax") return g.node("Softmax", {x}, name, r, [](auto& n) { attribute(n, "axis", I{-1}); });
    if (f == "logsoftmax") return g.node("LogSoftmax", {x}, name, r, [](auto& n) { attribute(n, "axis", I{-1}); });
    throw Error("fx::onnx::save: the activation " + f + (path.empty() ? "" : " at '" + path + "'") +
                " has no ONNX export (relu, σ, tanh, relu6, leakyrelu, elu, softplus, hardσ, hardswish, swish, gelu_erf, "
                "softmax and logsoftmax have)");
}

// A convolution's (or its transpose's) inputs: x, the weight and any bias, x checked to be a batch
// of the weight's rank.
template <class C>
std::vector<std::string> convolution_inputs(Graph& g, const C& c, const std::string& x, const std::string& path) {
    if (g.rank(x) != c.weight.ndim())
        throw ShapeError("fx::onnx::save: " + c.describe() + " at '" + path + "' takes a batch of rank " +
                         std::to_string(c.weight.ndim()) + ", given rank " + std::to_string(g.rank(x)));
    std::vector<std::string> in{x, g.initializer(c.weight, join(path, "weight"))};
    if (c.bias.defined()) in.push_back(g.initializer(c.bias, join(path, "bias")));
    return in;
}

std::string layer(Graph& g, const Conv& c, const std::string& x, const std::string& path) {
    const int spatial = int(c.weight.ndim()) - 2;
    const std::vector<std::string> in = convolution_inputs(g, c, x, path);
    const std::vector<I> kernel(c.weight.shape().begin() + 2, c.weight.shape().end());
    const std::string y = g.node("Conv", in, path, g.rank(x), [&](auto& n) {
        attribute(n, "kernel_shape", kernel);
        attribute(n, "strides", per_axis(c.stride_d, c.stride, spatial));
        attribute(n, "dilations", per_axis(c.dilation_d, c.dilation, spatial));
        attribute(n, "pads", pads(c.pad_front, c.pad_back, c.pad_top, c.pad_bottom, c.pad_left, c.pad_right, spatial));
        attribute(n, "group", c.groups);
    });
    return layer(g, c.activation, y, path);
}

// ONNX's ConvTranspose has PyTorch's output size, stride·(in - 1) + output_padding + dilation·(k - 1) + 1 - pads,
// and its weight layout {in, out/group, kh, kw}.
std::string layer(Graph& g, const ConvTranspose& c, const std::string& x, const std::string& path) {
    const int spatial = int(c.weight.ndim()) - 2;
    const std::vector<std::string> in = convolution_inputs(g, c, x, path);
    const std::vector<I> kernel(c.weight.shape().begin() + 2, c.weight.shape().end());
    const std::string y = g.node("ConvTranspose", in, or_else(path, "convtranspose"), g.rank(x), [&](auto& n) {
        attribute(n, "kernel_shape", kernel);
        attribute(n, "strides", per_axis(c.stride_d, c.stride, spatial));
        attribute(n, "dilations", per_axis(c.dilation_d, c.dilation, spatial));
        attribute(n, "pads", pads(c.pad_d, c.pad_d, c.pad_h, c.pad_h, c.pad_w, c.pad_w, spatial));
        attribute(n, "output_padding", per_axis(c.output_pad_d, c.output_pad, spatial));
        attribute(n, "group", c.groups);
    });
    return layer(g, c.activation, y, path);
}

std::string layer(Graph& g, const Dense& d, const std::string& x, const std::string& path) {
    const std::string w = g.initializer(d.weight, join(path, "weight"));
    const std::string b = d.bias.defined() ? g.initializer(d.bias, join(path, "bias")) : "";
    std::string y;
    if (g.rank(x) == 2) {  // one Gemm: x · Wᵀ + b
        std::vector<std::string> in{x, w};
        if (!b.empty()) in.push_back(b);
        y = g.node("Gemm", in, path, 2, [](auto& n) { attribute(n, "transB", I{1}); });
    } else {  // over the last axis of a batch of any rank
        y = g.node("MatMul", {x, g.node("Transpose", {w}, join(path, "weight_t"), 2)}, path, g.rank(x));
        if (!b.empty()) y = g.node("Add", {y, b}, join(path, "bias_add"), g.rank(x));
    }
    return layer(g, d.activation, y, path);
}

std::string layer(Graph& g, const BatchNorm& bn, const std::string& x, const std::string& path) {
    if (!bn.running_mean.defined())
        throw Error("fx::onnx::save: " + bn.describe() + " at '" + path +
                    "' keeps no running statistics (track_stats = false): its test-mode output depends on the batch, "
                    "which ONNX's BatchNormalization does not compute");
    if (bn.mode == Mode::train)
        throw Error("fx::onnx::save: " + bn.describe() + " at '" + path +
                    "' is in train mode (fx::trainmode); the export writes test mode: call fx::testmode or "
                    "fx::automode first");
    const I c = bn.channels();
    const std::string scale = bn.weight.defined() ? g.initializer(bn.weight, join(path, "weight"))
                                                  : g.initializer(std::vector<float>(c, 1.0f), {c}, join(path, "weight"));
    const std::string shift = bn.bias.defined() ? g.initializer(bn.bias, join(path, "bias"))
                                                : g.initializer(std::vector<float>(c, 0.0f), {c}, join(path, "bias"));
    const std::string y = g.node("BatchNormalization",
                                 {x, scale, shift, g.initializer(bn.running_mean, join(path, "running_mean")),
                                  g.initializer(bn.running_var, join(path, "running_var"))},
                                 path, g.rank(x), [&](auto& n) { attribute(n, "epsilon", static_cast<float>(bn.epsilon)); });
    return layer(g, bn.activation, y, path);
}

std::string layer(Graph& g, const LayerNorm& ln, const std::string& x, const std::string& path) {
    const Shape& shape = ln.normalised_shape();
    I size = 1;
    for (auto d : shape) size *= d;
    std::vector<std::string> in{x, ln.weight.defined() ? g.initializer(ln.weight, join(path, "weight"))
                                                       : g.initializer(std::vector<float>(size, 1.0f), shape, join(path, "weight"))};
    if (ln.bias.defined()) in.push_back(g.initializer(ln.bias, join(path, "bias")));
    const std::string y = g.node("LayerNormalization", in, path, g.rank(x), [&](auto& n) {
        attribute(n, "axis", -static_cast<I>(shape.size()));
        attribute(n, "epsilon", static_cast<float>(ln.epsilon));
    });
    return layer(g, ln.activation, y, path);
}

std::string layer(Graph& g, const MaxPool& p, const std::string& x, const std::string& path) {
    const int spatial = int(g.rank(x)) - 2;
    return g.node("MaxPool", {x}, or_else(path, "maxpool"), g.rank(x), [&](auto& n) {
        attribute(n, "kernel_shape", per_axis(p.depth_window, p.window, spatial));
        attribute(n, "strides", per_axis(p.depth_stride, p.stride, spatial));
        attribute(n, "pads", pads(p.depth_pad, p.depth_pad, p.pad.h, p.pad.h, p.pad.w, p.pad.w, spatial));
    });
}

std::string layer(Graph& g, const MeanPool& p, const std::string& x, const std::string& path) {
    const int spatial = int(g.rank(x)) - 2;
    return g.node("AveragePool", {x}, or_else(path, "meanpool"), g.rank(x), [&](auto& n) {
        attribute(n, "kernel_shape", per_axis(p.depth_window, p.window, spatial));
        attribute(n, "strides", per_axis(p.depth_stride, p.stride, spatial));
        attribute(n, "pads", pads(p.depth_pad, p.depth_pad, p.pad.h, p.pad.h, p.pad.w, p.pad.w, spatial));
        attribute(n, "count_include_pad", I{1});  // padded cells count as zeros in the mean
    });
}

std::string layer(Graph& g, const GlobalMeanPool&, const std::string& x, const std::string& path) {
    return g.node("GlobalAveragePool", {x}, or_else(path, "avgpool"), g.rank(x));
}

// GlobalAveragePool where every output size is 1; otherwise, where each of the input's sizes (known
// from the example input) is a multiple of the output's, an AveragePool of that ratio (none where
// they are equal).
std::string layer(Graph& g, const AdaptiveMeanPool& p, const std::string& x, const std::string& path) {
    if (p.out == Size2(1) && p.out_depth == 1) return g.node("GlobalAveragePool", {x}, or_else(path, "avgpool"), g.rank(x));
    const std::vector<I> shape = g.inferred_shape(x);
    const std::size_t axes = shape.size() - 2;
    const std::vector<I> out = axes == 1 ? std::vector<I>{p.out.w}
                               : axes == 2 ? std::vector<I>{p.out.h, p.out.w}
                                           : std::vector<I>{p.out_depth, p.out.h, p.out.w};
    std::vector<I> window;
    for (std::size_t i = 0; i < axes && i < out.size(); ++i) {
        const I in = shape[i + 2];
        if (in <= 0 || in % out[i] != 0) {
            std::string s = "{N";
            for (std::size_t k = 1; k < shape.size(); ++k) s += ", " + (shape[k] < 0 ? std::string("?") : std::to_string(shape[k]));
            throw Error("fx::onnx::save: " + p.describe() + " at '" + or_else(path, "the model's root") +
                        "' has no ONNX export for its input " + s +
                        "}: only where each input size is a multiple of the output's (an AveragePool) does it have one");
        }
        window.push_back(in / out[i]);
    }
    if (std::all_of(window.begin(), window.end(), [](I w) { return w == 1; })) return x;
    return g.node("AveragePool", {x}, or_else(path, "avgpool"), g.rank(x), [&](auto& n) {
        attribute(n, "kernel_shape", window);
        attribute(n, "strides", window);
    });
}

// A Resize by the layer's scales (ONNX places samples by 1/scale, as PyTorch does where a scale is
// given) or to its size (the batch and channels taken from the input's shape), of images {N, C, H, W}
// or volumes {N, C, D, H, W}: nearest as PyTorch's floor(out_index / scale), bilinear and trilinear
// with their corners aligned or their pixels' centres scaled (half_pixel, which clamps below 0 as
// PyTorch does).
std::string layer(Graph& g, const Upsample& u, const std::string& x, const std::string& path) {
    const std::string name = or_else(path, "upsample");
    const int rank = u.axes() + 2;
    if (g.rank(x) != rank)
        throw ShapeError("fx::onnx::save: " + u.describe() + " at '" + or_else(path, "the model's root") +
                         "' is given a batch of rank " + std::to_string(g.rank(x)) + "; it resizes " +
                         (rank == 4 ? "{N, C, H, W}" : "{N, C, D, H, W}"));
    std::vector<std::string> in{x, ""};
    if (!u.scale().empty()) {
        std::vector<float> scales{1.0f, 1.0f};
        for (const double s : u.scale()) scales.push_back(static_cast<float>(s));
        in.push_back(g.initializer(scales, {rank}, join(name, "scales")));
    } else {
        const std::string batch_channels =
            g.node("Shape", {x}, join(name, "batch_channels"), 1, [](auto& n) { attribute(n, "end", I{2}); });
        const std::string sizes =
            g.node("Concat", {batch_channels, g.initializer_i64(u.size(), {u.axes()}, join(name, "size"))},
                   join(name, "sizes"), 1, [](auto& n) { attribute(n, "axis", I{0}); });
        in.push_back("");
        in.push_back(sizes);
    }
    const bool nearest = u.mode() == UpsampleMode::nearest;
    return g.node("Resize", in, name, rank, [&](auto& n) {
        attribute(n, "mode", std::string(nearest ? "nearest" : "linear"));
        attribute(n, "coordinate_transformation_mode",
                  std::string(nearest             ? "asymmetric"
                              : u.align_corners() ? "align_corners"
                                                  : "half_pixel"));
        if (nearest) attribute(n, "nearest_mode", std::string("floor"));
    });
}

std::string layer(Graph& g, const Flatten&, const std::string& x, const std::string& path) {
    if (g.rank(x) == 2) return x;
    if (g.rank(x) != 4)
        throw ShapeError("fx::onnx::save: Flatten at '" + path + "' is given a batch of rank " +
                         std::to_string(g.rank(x)) + "; it flattens {N, C, H, W}");
    return g.node("Flatten", {x}, or_else(path, "flatten"), 2, [](auto& n) { attribute(n, "axis", I{1}); });
}

std::string layer(Graph&, const Dropout&, const std::string& x, const std::string&) { return x; }
std::string layer(Graph&, const AlphaDropout&, const std::string& x, const std::string&) { return x; }

}  // namespace fluxion::onnx::detail
