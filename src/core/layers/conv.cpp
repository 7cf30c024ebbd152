// conv.cpp — Conv and ConvTranspose: resolving padding once, then conv2d / conv_transpose2d, the
// bias and the activation. Asymmetric padding (given per side, or SamePad with an even kernel) pads
// with zeros first.
// The 1-d layers are 2-d ones of height 1; the 3-d ones run one 2-d op over the depth slices.
#include "fluxion/layers/conv.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "core/layers/context.hpp"
#include "core/layers/image.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

std::string sizes(std::int64_t in, std::int64_t out) { return std::to_string(in) + " => " + std::to_string(out); }

// Zeros around the spatial axes of x {N, C, H, W}.
Tensor pad_zeros(const Tensor& x, std::int64_t top, std::int64_t bottom, std::int64_t left, std::int64_t right) {
    TensorOptions o{.dtype = x.dtype(), .device = x.device()};
    auto n = x.shape(0), c = x.shape(1), h = x.shape(2), w = x.shape(3);
    Tensor rows = concat({zeros({n, c, top, w}, o), x, zeros({n, c, bottom, w}, o)}, 2);
    h += top + bottom;
    return concat({zeros({n, c, h, left}, o), rows, zeros({n, c, h, right}, o)}, 3);
}

using Axes = std::array<std::int64_t, 3>;  // {d, h, w}; the axes a 1-d or 2-d layer lacks hold 1 or 0

// "Conv((3, 3, 3), 1 => 8)": a layer's name in its messages, before its options are known.
std::string layer_name(const char* layer, const Axes& kernel, int dims, std::int64_t in, std::int64_t out) {
    return std::string(layer) + "(" + detail::tuple_text(detail::spatial(dims, kernel)) + ", " + sizes(in, out) + ")";
}

// The checks Conv and ConvTranspose share, before anything is drawn from the random generator.
void check_sizes(const std::string& name, const Axes& kernel, std::int64_t in, std::int64_t out, const Axes& stride,
                 const Axes& dilation, std::int64_t groups) {
    auto below_one = [](const Axes& v) {
        return std::any_of(v.begin(), v.end(), [](std::int64_t x) { return x < 1; });
    };
    if (below_one(kernel) || in < 1 || out < 1)
        throw ValueError(name + ": the kernel size and channel counts must be positive");
    if (below_one(stride) || below_one(dilation)) throw ValueError(name + ": stride and dilation must be at least 1");
    if (groups < 1 || in % groups || out % groups)
        throw ValueError(name + ": groups = " + std::to_string(groups) + " must divide both channel counts");
}

// Padding for `dims` spatial axes as {front, back, top, bottom, left, right} (the axes the layer
// lacks get none): one value, one per axis or one per side; ValueError naming the layer otherwise.
std::array<std::int64_t, 6> per_side(const Pad& p, int dims, const std::string& name) {
    const std::vector<std::int64_t>& v = p.values();
    const std::size_t n = v.size(), d = std::size_t(dims);
    if (n != 1 && n != d && n != 2 * d)
        throw ValueError(name + ": pad takes one value for every side, " +
                         (dims == 1 ? std::string("or 2 (its beginning, its end)")
                                    : std::to_string(dims) + " (one per axis) or " + std::to_string(2 * dims) +
                                          " (each axis's beginning and end)") +
                         ", given " + std::to_string(n) + ": " + detail::tuple_text(v));
    std::array<std::int64_t, 6> sides{};
    for (std::size_t a = 0; a < d; ++a) {
        const std::size_t at = 2 * (3 - d + a);
        sides[at] = n == 1 ? v[0] : n == d ? v[a] : v[2 * a];
        sides[at + 1] = n == 1 ? v[0] : n == d ? v[a] : v[2 * a + 1];
        if (sides[at] < 0 || sides[at + 1] < 0) throw ValueError(name + ": padding must be >= 0");
    }
    return sides;
}

// Zeros before and after the depth of x {N, C, D, H, W}.
Tensor pad_depth(const Tensor& x, std::int64_t front, std::int64_t back) {
    if (front == 0 && back == 0) return x;
    TensorOptions o{.dtype = x.dtype(), .device = x.device()};
    auto n = x.shape(0), c = x.shape(1), h = x.shape(3), w = x.shape(4);
    return concat({zeros({n, c, front, h, w}, o), x, zeros({n, c, back, h, w}, o)}, 2);
}

// conv3d of x {N, C, D, H, W} (its depth padded) with w {O, C/g, kd, kh, kw}: the kd depth slices that
// each output depth reads, side by side as the channels of one conv2d over {N·D', kd·C, H, W}.
Tensor conv_volume(const Tensor& x, const Tensor& w, std::int64_t stride, std::int64_t dilation,
                   const Conv2dOptions& o) {
    auto n = x.shape(0), c = x.shape(1), d = x.shape(2), h = x.shape(3), wd = x.shape(4);
    auto out = w.shape(0), kd = w.shape(2), g = o.groups;
    const std::int64_t span = dilation * (kd - 1) + 1;
    if (d < span)
        throw ShapeError("conv3d: the padded depth " + std::to_string(d) + " is smaller than the kernel's span " +
                         std::to_string(span) + " (dilation·(kd - 1) + 1); input " + to_string(x.shape()));
    const std::int64_t od = (d - span) / stride + 1;
    std::vector<Tensor> slices;
    for (std::int64_t i = 0; i < kd; ++i)
        slices.push_back(x.slice(2, i * dilation, i * dilation + stride * (od - 1) + 1, stride));
    Tensor cols = stack(slices, 3)  // {N, C, D', kd, H, W}, channels in groups as conv2d takes them
                      .reshape({n, g, c / g, od, kd, h, wd})
                      .permute({0, 3, 1, 4, 2, 5, 6})
                      .reshape({n * od, c * kd, h, wd});
    Tensor w2 = w.permute({0, 2, 1, 3, 4}).reshape({out, kd * w.shape(1), w.shape(3), w.shape(4)});
    Tensor y = conv2d(cols, w2, o);
    return y.reshape({n, od, out, y.shape(2), y.shape(3)}).permute({0, 2, 1, 3, 4});
}

// conv_transpose3d of x {N, Cin, D, H, W} with w {Cin, O/g, kd, kh, kw}: one conv_transpose2d over the
// depth slices gives slice j's kd contributions, the i-th landing at depth j·stride + i·dilation - pad.
Tensor conv_transpose_volume(const Tensor& x, const Tensor& w, std::int64_t stride, std::int64_t dilation,
                             std::int64_t pad, std::int64_t output_pad, const Conv2dOptions& o,
                             const std::vector<std::int64_t>& output_pad_hw) {
    auto n = x.shape(0), cin = x.shape(1), d = x.shape(2);
    auto og = w.shape(1), kd = w.shape(2), g = o.groups, out = og * g;
    Tensor w2 = w.permute({0, 2, 1, 3, 4}).reshape({cin, kd * og, w.shape(3), w.shape(4)});
    Tensor z = conv_transpose2d(x.permute({0, 2, 1, 3, 4}).reshape({n * d, cin, x.shape(3), x.shape(4)}), w2, o,
                                output_pad_hw);
    auto h = z.shape(2), wd = z.shape(3);
    z = z.reshape({n, d, g, kd, og, h, wd}).permute({0, 2, 4, 1, 3, 5, 6}).reshape({n, out, d, kd, h, wd});
    TensorOptions to{.dtype = x.dtype(), .device = x.device()};
    const std::int64_t spread = (d - 1) * stride + 1, full = spread + dilation * (kd - 1) + output_pad;
    if (full - 2 * pad < 1)
        throw ShapeError("conv_transpose3d: the output depth " + std::to_string(full - 2 * pad) +
                         " is not positive; input " + to_string(x.shape()));
    Tensor y;
    for (std::int64_t i = 0; i < kd; ++i) {
        Tensor zi = z.select(3, i);  // {N, O, D, H', W'}
        if (stride > 1)              // stride - 1 zeros after each slice
            zi = concat({zi.unsqueeze(3), zeros({n, out, d, stride - 1, h, wd}, to)}, 3)
                     .reshape({n, out, d * stride, h, wd})
                     .slice(2, 0, spread);
        std::vector<Tensor> parts;
        if (i > 0) parts.push_back(zeros({n, out, i * dilation, h, wd}, to));
        parts.push_back(zi);
        if (full - spread - i * dilation > 0) parts.push_back(zeros({n, out, full - spread - i * dilation, h, wd}, to));
        zi = parts.size() == 1 ? zi : concat(parts, 2);
        y = i == 0 ? zi : y + zi;
    }
    return y.slice(2, pad, full - pad);
}

}  // namespace

// ---- Conv ----

Conv::Conv(Axes k, std::int64_t in, std::int64_t out, Activation act, const ConvOptions& o, int dims)
    : activation(std::move(act)), groups(o.groups) {
    const std::string name = layer_name("Conv", k, dims, in, out);
    const Axes s = detail::per_axis(o.stride, dims, 1, name, "stride");
    const Axes dl = detail::per_axis(o.dilation, dims, 1, name, "dilation");
    check_sizes(name, k, in, out, s, dl, groups);
    std::array<std::int64_t, 6> p{};
    if (o.pad.same()) {  // the odd one at the end, as PyTorch's padding="same"
        for (int a = 0; a < 3; ++a) {
            const std::int64_t total = dl[a] * (k[a] - 1);
            p[2 * a] = total / 2, p[2 * a + 1] = total - total / 2;
        }
    } else {
        p = per_side(o.pad, dims, name);
    }
    stride = {s[1], s[2]}, dilation = {dl[1], dl[2]}, stride_d = s[0], dilation_d = dl[0];
    pad_front = p[0], pad_back = p[1], pad_top = p[2], pad_bottom = p[3], pad_left = p[4], pad_right = p[5];
    Shape shape{out, in / groups};
    for (std::int64_t v : detail::spatial(dims, k)) shape.push_back(v);
    weight = o.init(shape);
    if (o.bias) bias = zeros({out}, {.dtype = weight.dtype(), .device = weight.device()});
}

namespace {

// ", pad=1", ", pad=(0, 1, 1)" (one per axis) or ", pad=(0, 1, 0, 1, 1, 1)" (one per side) of a layer
// over `dims` spatial axes with padding {front, back, top, bottom, left, right}.
std::string pad_text(const std::array<std::int64_t, 6>& p, int dims) {
    std::vector<std::int64_t> begins, sides;
    bool symmetric = true;
    for (int a = 3 - dims; a < 3; ++a) {
        begins.push_back(p[2 * a]), sides.push_back(p[2 * a]), sides.push_back(p[2 * a + 1]);
        symmetric = symmetric && p[2 * a] == p[2 * a + 1];
    }
    if (symmetric) return detail::option_text("pad", begins, std::vector<std::int64_t>(begins.size(), 0));
    return ", pad=" + detail::tuple_text(sides);
}

}  // namespace

std::string Conv::describe() const {
    const int dims = int(weight.ndim()) - 2;
    auto axes = [&](std::int64_t d, Size2 hw) { return detail::spatial(dims, {d, hw.h, hw.w}); };
    const std::vector<std::int64_t> ones(std::size_t(dims), 1);
    std::string s =
        "Conv(" + detail::tuple_text(std::vector<std::int64_t>(weight.shape().begin() + 2, weight.shape().end()));
    s += ", " + sizes(in_channels(), out_channels());
    if (!activation.is_identity()) s += ", " + activation.name();
    s += pad_text({pad_front, pad_back, pad_top, pad_bottom, pad_left, pad_right}, dims);
    s += detail::option_text("stride", axes(stride_d, stride), ones) +
         detail::option_text("dilation", axes(dilation_d, dilation), ones);
    if (groups != 1) s += ", groups=" + std::to_string(groups);
    if (!bias.defined()) s += "; bias=false";
    return s + ")";
}

Tensor Conv::operator()(const Tensor& x) const {
    const bool one_d = weight.ndim() == 3, three_d = weight.ndim() == 5;
    Tensor xb = one_d     ? detail::as_sequence_batch(describe(), x, in_channels())
                : three_d ? detail::as_volume_batch(describe(), x, in_channels())
                          : detail::as_image_batch(describe(), x, in_channels());
    return detail::in_context(*this, [&] {
        bool symmetric = pad_top == pad_bottom && pad_left == pad_right;
        Conv2dOptions o{
            .stride = {stride.h, stride.w},
            .padding = symmetric ? std::vector<std::int64_t>{pad_top, pad_left} : std::vector<std::int64_t>{0, 0},
            .dilation = {dilation.h, dilation.w},
            .groups = groups};
        if (three_d) {
            Tensor v = pad_depth(xb, pad_front, pad_back);
            if (!symmetric) {  // the image padding of every depth slice
                auto n = v.shape(0), c = v.shape(1), d = v.shape(2);
                Tensor p =
                    pad_zeros(v.reshape({n, c * d, v.shape(3), v.shape(4)}), pad_top, pad_bottom, pad_left, pad_right);
                v = p.reshape({n, c, d, p.shape(2), p.shape(3)});
            }
            Tensor y = conv_volume(v, weight, stride_d, dilation_d, o);
            if (bias.defined()) y = y + bias.reshape({1, out_channels(), 1, 1, 1});
            return detail::like_volume(x, activation(y));
        }
        const Tensor w = one_d ? weight.unsqueeze(2) : weight;
        Tensor input = symmetric ? xb : pad_zeros(xb, pad_top, pad_bottom, pad_left, pad_right);
        Tensor y = conv2d(input, w, o);
        if (bias.defined()) y = y + bias.reshape({1, out_channels(), 1, 1});
        return one_d ? detail::like_sequence(x, activation(y)) : detail::like_input(x, activation(y));
    });
}

// ---- ConvTranspose ----

namespace {

// SamePad of a transpose along one axis: output = input·stride needs 2·pad - output_pad =
// dilation·(k - 1) + 1 - stride; false where no output_pad below the stride or dilation meets it.
bool resolve_same(std::int64_t k, std::int64_t stride, std::int64_t dilation, std::int64_t& pad,
                  std::int64_t& output_pad) {
    std::int64_t total = dilation * (k - 1) + 1 - stride;
    pad = total > 0 ? (total + 1) / 2 : 0;
    output_pad = 2 * pad - total;
    return output_pad < std::max(stride, dilation);
}

}  // namespace

ConvTranspose::ConvTranspose(Axes k, std::int64_t in, std::int64_t out, Activation act, const ConvTransposeOptions& o,
                             int dims)
    : activation(std::move(act)), groups(o.groups) {
    const std::string name = layer_name("ConvTranspose", k, dims, in, out);
    const Axes s = detail::per_axis(o.stride, dims, 1, name, "stride");
    const Axes dl = detail::per_axis(o.dilation, dims, 1, name, "dilation");
    Axes op = detail::per_axis(o.output_pad, dims, 0, name, "output_pad");
    check_sizes(name, k, in, out, s, dl, groups);
    Axes p{};
    if (o.pad.same()) {
        if (op != Axes{}) throw ValueError(name + ": SamePad sets output_pad itself; leave it 0");
        for (int a = 0; a < 3; ++a)
            if (!resolve_same(k[a], s[a], dl[a], p[a], op[a]))
                throw ValueError(name + ": SamePad cannot be met with stride " +
                                 detail::tuple_text(detail::spatial(dims, s)) + "; give the padding explicitly");
    } else {
        const auto sides = per_side(o.pad, dims, name);
        for (int a = 0; a < 3; ++a) {
            if (sides[2 * a] != sides[2 * a + 1])
                throw ValueError(name + ": padding must be the same at both ends of an axis, as PyTorch's");
            p[a] = sides[2 * a];
            if (op[a] < 0 || op[a] >= std::max(s[a], dl[a]))
                throw ValueError(name + ": output_pad must be >= 0 and smaller than the stride or the dilation");
        }
    }
    stride = {s[1], s[2]}, dilation = {dl[1], dl[2]}, output_pad = {op[1], op[2]};
    stride_d = s[0], dilation_d = dl[0], output_pad_d = op[0], pad_d = p[0], pad_h = p[1], pad_w = p[2];
    Shape shape{in, out / groups};
    for (std::int64_t v : detail::spatial(dims, k)) shape.push_back(v);
    weight = o.init(shape);
    if (o.bias) bias = zeros({out}, {.dtype = weight.dtype(), .device = weight.device()});
}

std::string ConvTranspose::describe() const {
    const int dims = int(weight.ndim()) - 2;
    auto axes = [&](std::int64_t d, Size2 hw) { return detail::spatial(dims, {d, hw.h, hw.w}); };
    const std::vector<std::int64_t> zeros_(std::size_t(dims), 0), ones(std::size_t(dims), 1);
    std::string s = "ConvTranspose(" +
                    detail::tuple_text(std::vector<std::int64_t>(weight.shape().begin() + 2, weight.shape().end()));
    s += ", " + sizes(in_channels(), out_channels());
    if (!activation.is_identity()) s += ", " + activation.name();
    s += detail::option_text("pad", detail::spatial(dims, {pad_d, pad_h, pad_w}), zeros_);
    s += detail::option_text("stride", axes(stride_d, stride), ones) +
         detail::option_text("dilation", axes(dilation_d, dilation), ones) +
         detail::option_text("output_pad", axes(output_pad_d, output_pad), zeros_);
    if (groups != 1) s += ", groups=" + std::to_string(groups);
    if (!bias.defined()) s += "; bias=false";
    return s + ")";
}

Tensor ConvTranspose::operator()(const Tensor& x) const {
    const bool one_d = weight.ndim() == 3, three_d = weight.ndim() == 5;
    Tensor xb = one_d     ? detail::as_sequence_batch(describe(), x, in_channels())
                : three_d ? detail::as_volume_batch(describe(), x, in_channels())
                          : detail::as_image_batch(describe(), x, in_channels());
    return detail::in_context(*this, [&] {
        Conv2dOptions o{.stride = {stride.h, stride.w},
                        .padding = {pad_h, pad_w},
                        .dilation = {dilation.h, dilation.w},
                        .groups = groups};
        if (three_d) {
            Tensor y = conv_transpose_volume(xb, weight, stride_d, dilation_d, pad_d, output_pad_d, o,
                                             {output_pad.h, output_pad.w});
            if (bias.defined()) y = y + bias.reshape({1, out_channels(), 1, 1, 1});
            return detail::like_volume(x, activation(y));
        }
        Tensor y = conv_transpose2d(xb, one_d ? weight.unsqueeze(2) : weight, o, {output_pad.h, output_pad.w});
        if (bias.defined()) y = y + bias.reshape({1, out_channels(), 1, 1});
        return one_d ? detail::like_sequence(x, activation(y)) : detail::like_input(x, activation(y));
    });
}

}  // namespace fluxion
