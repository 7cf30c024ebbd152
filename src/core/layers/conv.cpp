// conv.cpp — Conv and ConvTranspose: resolving padding once, then conv2d / conv_transpose2d, the
// bias and the activation. Asymmetric padding (SamePad with an even kernel) pads with zeros first.
// The 1-d layers are 2-d ones of height 1; the 3-d ones run one 2-d op over the depth slices.
#include "fluxion/layers/conv.hpp"

#include <algorithm>
#include <vector>

#include "core/layers/context.hpp"
#include "core/layers/image.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

std::string sizes(std::int64_t in, std::int64_t out) { return std::to_string(in) + " => " + std::to_string(out); }

void check_sizes(const char* layer, Size2 kernel, std::int64_t in, std::int64_t out, Size2 stride, Size2 dilation,
                 std::int64_t groups) {
    std::string name = std::string(layer) + "(" + detail::tuple_text(kernel) + ", " + sizes(in, out) + ")";
    if (kernel.h < 1 || kernel.w < 1 || in < 1 || out < 1)
        throw ValueError(name + ": the kernel size and channel counts must be positive");
    if (stride.h < 1 || stride.w < 1 || dilation.h < 1 || dilation.w < 1)
        throw ValueError(name + ": stride and dilation must be at least 1");
    if (groups < 1 || in % groups || out % groups)
        throw ValueError(name + ": groups = " + std::to_string(groups) + " must divide both channel counts");
}

// Zeros around the spatial axes of x {N, C, H, W}.
Tensor pad_zeros(const Tensor& x, std::int64_t top, std::int64_t bottom, std::int64_t left, std::int64_t right) {
    TensorOptions o{.dtype = x.dtype(), .device = x.device()};
    auto n = x.shape(0), c = x.shape(1), h = x.shape(2), w = x.shape(3);
    Tensor rows = concat({zeros({n, c, top, w}, o), x, zeros({n, c, bottom, w}, o)}, 2);
    h += top + bottom;
    return concat({zeros({n, c, h, left}, o), rows, zeros({n, c, h, right}, o)}, 3);
}

std::string pad_text(std::int64_t t, std::int64_t b, std::int64_t l, std::int64_t r) {
    if (t == b && l == r) return detail::option_text("pad", {t, l}, 0);
    return ", pad=(" + std::to_string(t) + ", " + std::to_string(b) + ", " + std::to_string(l) + ", " +
           std::to_string(r) + ")";
}

// The options of a 1-d Conv with kernel k as those of a 2-d one with kernel {1, k}.
ConvOptions one_d(const ConvOptions& o, std::int64_t kernel, std::int64_t in, std::int64_t out) {
    std::string name = "Conv((" + std::to_string(kernel) + ",), " + sizes(in, out) + ")";
    if (o.stride.h != o.stride.w || o.dilation.h != o.dilation.w)
        throw ValueError(name + ": a 1-d convolution takes one stride and one dilation");
    if (!o.pad.same() &&
        (o.pad.top() != o.pad.bottom() || o.pad.top() != o.pad.left() || o.pad.left() != o.pad.right()))
        throw ValueError(name + ": a 1-d convolution takes one padding (both ends), or SamePad()");
    ConvOptions flat = o;
    flat.stride = {1, o.stride.w}, flat.dilation = {1, o.dilation.w};
    if (!o.pad.same()) flat.pad = Pad(0, 0, o.pad.left(), o.pad.right());
    return flat;
}

std::string triple_text(const std::array<std::int64_t, 3>& k) {
    std::string t = "(";  // appended: GCC 12 sees a false overlap (-Wrestrict) in "(" + std::to_string(...)
    t.append(std::to_string(k[0])).append(", ").append(std::to_string(k[1])).append(", ");
    return t.append(std::to_string(k[2])).append(")");
}

bool uniform(const Pad& p) { return p.top() == p.bottom() && p.top() == p.left() && p.left() == p.right(); }

// The options of a 1-d or 3-d layer, checked: one stride, dilation and padding for all axes.
template <class O> const O& checked_uniform(const O& o, const std::string& name, const char* dims) {
    if (o.stride.h != o.stride.w || o.dilation.h != o.dilation.w)
        throw ValueError(name + ": a " + dims + " convolution takes one stride and one dilation");
    if (!o.pad.same() && !uniform(o.pad))
        throw ValueError(name + ": a " + dims + " convolution takes one padding (every side), or SamePad()");
    return o;
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

Conv::Conv(std::array<std::int64_t, 3> k, std::int64_t in, std::int64_t out, Activation act, const ConvOptions& o,
           ThreeD)
    : Conv(Size2(k[1], k[2]), in, out, std::move(act),
           checked_uniform(o, "Conv(" + triple_text(k) + ", " + sizes(in, out) + ")", "3-d")) {
    if (k[0] < 1)
        throw ValueError("Conv(" + triple_text(k) + ", " + sizes(in, out) + "): the kernel size must be positive");
    if (o.pad.same()) {
        std::int64_t td = o.dilation.h * (k[0] - 1);
        pad_front = td / 2, pad_back = td - td / 2;
    } else {
        pad_front = pad_back = o.pad.top();
    }
    weight = o.init({out, in / groups, k[0], k[1], k[2]});
}

Conv::Conv(std::int64_t kernel, std::int64_t in, std::int64_t out, Activation act, const ConvOptions& o, OneD)
    : Conv(Size2(1, kernel), in, out, std::move(act), one_d(o, kernel, in, out)) {
    weight = weight.squeeze(2);
}

Conv::Conv(Size2 kernel, std::int64_t in, std::int64_t out, const ConvOptions& o) : Conv(kernel, in, out, {}, o) {}

Conv::Conv(Size2 kernel, std::int64_t in, std::int64_t out, Activation act, const ConvOptions& o)
    : activation(std::move(act)), stride(o.stride), dilation(o.dilation), groups(o.groups) {
    check_sizes("Conv", kernel, in, out, o.stride, o.dilation, o.groups);
    if (o.pad.same()) {
        std::int64_t th = o.dilation.h * (kernel.h - 1), tw = o.dilation.w * (kernel.w - 1);
        pad_top = th / 2, pad_bottom = th - th / 2, pad_left = tw / 2, pad_right = tw - tw / 2;
    } else {
        pad_top = o.pad.top(), pad_bottom = o.pad.bottom(), pad_left = o.pad.left(), pad_right = o.pad.right();
        if (pad_top < 0 || pad_bottom < 0 || pad_left < 0 || pad_right < 0)
            throw ValueError("Conv(" + detail::tuple_text(kernel) + ", " + sizes(in, out) + "): padding must be >= 0");
    }
    weight = o.init({out, in / groups, kernel.h, kernel.w});
    if (o.bias) bias = zeros({out}, {.dtype = weight.dtype(), .device = weight.device()});
}

std::string Conv::describe() const {
    const bool one_d = weight.ndim() == 3, three_d = weight.ndim() == 5;
    std::string s = "Conv(";
    if (one_d) s.append("(").append(std::to_string(weight.shape(2))).append(",)");
    else if (three_d) s += triple_text({weight.shape(2), weight.shape(3), weight.shape(4)});
    else s += detail::tuple_text({weight.shape(2), weight.shape(3)});
    s += ", " + sizes(in_channels(), out_channels());
    if (!activation.is_identity()) s += ", " + activation.name();
    if (one_d) {
        s += pad_left == pad_right ? detail::option_text("pad", pad_left, 0)
                                   : ", pad=(" + std::to_string(pad_left) + ", " + std::to_string(pad_right) + ")";
    } else if (three_d) {
        const std::vector<std::int64_t> p{pad_front, pad_back, pad_top, pad_bottom, pad_left, pad_right};
        if (std::all_of(p.begin(), p.end(), [&](std::int64_t v) { return v == p[0]; })) {
            s += detail::option_text("pad", p[0], 0);
        } else {
            s += ", pad=(";
            for (std::size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
            s += ")";
        }
    } else {
        s += pad_text(pad_top, pad_bottom, pad_left, pad_right);
    }
    if (one_d || three_d)
        s += detail::option_text("stride", stride.w, 1) + detail::option_text("dilation", dilation.w, 1);
    else s += detail::option_text("stride", stride, 1) + detail::option_text("dilation", dilation, 1);
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
            Tensor y = conv_volume(v, weight, stride.h, dilation.h, o);
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

// The options of a 1-d ConvTranspose with kernel k as those of a 2-d one with kernel {1, k}.
ConvTransposeOptions one_d(const ConvTransposeOptions& o, std::int64_t k, std::int64_t in, std::int64_t out) {
    std::string name = "ConvTranspose((" + std::to_string(k) + ",), " + sizes(in, out) + ")";
    checked_uniform(o, name, "1-d");
    if (o.output_pad.h != o.output_pad.w) throw ValueError(name + ": a 1-d convolution takes one output_pad");
    ConvTransposeOptions flat = o;
    flat.stride = {1, o.stride.w}, flat.dilation = {1, o.dilation.w}, flat.output_pad = {0, o.output_pad.w};
    if (!o.pad.same()) flat.pad = Pad(0, o.pad.left());
    return flat;
}

}  // namespace

ConvTranspose::ConvTranspose(Size2 kernel, std::int64_t in, std::int64_t out, const ConvTransposeOptions& o)
    : ConvTranspose(kernel, in, out, {}, o) {}

ConvTranspose::ConvTranspose(Size2 kernel, std::int64_t in, std::int64_t out, Activation act,
                             const ConvTransposeOptions& o)
    : activation(std::move(act)), stride(o.stride), dilation(o.dilation), output_pad(o.output_pad), groups(o.groups) {
    check_sizes("ConvTranspose", kernel, in, out, o.stride, o.dilation, o.groups);
    std::string name = "ConvTranspose(" + detail::tuple_text(kernel) + ", " + sizes(in, out) + ")";
    if (o.pad.same()) {
        if (!(o.output_pad == Size2(0))) throw ValueError(name + ": SamePad sets output_pad itself; leave it 0");
        if (!resolve_same(kernel.h, o.stride.h, o.dilation.h, pad_h, output_pad.h) ||
            !resolve_same(kernel.w, o.stride.w, o.dilation.w, pad_w, output_pad.w))
            throw ValueError(name + ": SamePad cannot be met with kernel " + detail::tuple_text(kernel) +
                             " and stride " + detail::tuple_text(o.stride) + "; give the padding explicitly");
    } else {
        if (o.pad.top() != o.pad.bottom() || o.pad.left() != o.pad.right() || o.pad.top() < 0 || o.pad.left() < 0)
            throw ValueError(name + ": padding must be the same on opposite sides and >= 0");
        pad_h = o.pad.top(), pad_w = o.pad.left();
    }
    weight = o.init({in, out / groups, kernel.h, kernel.w});
    if (o.bias) bias = zeros({out}, {.dtype = weight.dtype(), .device = weight.device()});
}

ConvTranspose::ConvTranspose(std::array<std::int64_t, 3> k, std::int64_t in, std::int64_t out, Activation act,
                             const ConvTransposeOptions& o, int dims)
    : ConvTranspose(Size2(k[1], k[2]), in, out, std::move(act), dims == 1 ? one_d(o, k[2], in, out) : o) {
    if (dims == 1) {
        weight = weight.squeeze(2);
        return;
    }
    std::string name = "ConvTranspose(" + triple_text(k) + ", " + sizes(in, out) + ")";
    checked_uniform(o, name, "3-d");
    if (k[0] < 1) throw ValueError(name + ": the kernel size must be positive");
    if (o.pad.same()) {
        if (!resolve_same(k[0], o.stride.h, o.dilation.h, pad_d, output_pad_d))
            throw ValueError(name + ": SamePad cannot be met with stride " + std::to_string(o.stride.h) +
                             "; give the padding explicitly");
    } else {
        if (o.output_pad.h != o.output_pad.w) throw ValueError(name + ": a 3-d convolution takes one output_pad");
        pad_d = o.pad.top(), output_pad_d = o.output_pad.h;
        if (output_pad_d >= std::max(o.stride.h, o.dilation.h))
            throw ValueError(name + ": output_pad must be smaller than the stride or the dilation");
    }
    weight = o.init({in, out / groups, k[0], k[1], k[2]});
}

std::string ConvTranspose::describe() const {
    const bool one_d = weight.ndim() == 3, three_d = weight.ndim() == 5;
    std::string s = "ConvTranspose(";
    if (one_d) s.append("(").append(std::to_string(weight.shape(2))).append(",)");
    else if (three_d) s += triple_text({weight.shape(2), weight.shape(3), weight.shape(4)});
    else s += detail::tuple_text({weight.shape(2), weight.shape(3)});
    s += ", " + sizes(in_channels(), out_channels());
    if (!activation.is_identity()) s += ", " + activation.name();
    if (one_d) {
        s += detail::option_text("pad", pad_w, 0) + detail::option_text("stride", stride.w, 1) +
             detail::option_text("dilation", dilation.w, 1) + detail::option_text("output_pad", output_pad.w, 0);
    } else if (three_d) {
        s += pad_d == pad_h && pad_h == pad_w ? detail::option_text("pad", pad_d, 0)
                                              : ", pad=" + triple_text({pad_d, pad_h, pad_w});
        s += detail::option_text("stride", stride.w, 1) + detail::option_text("dilation", dilation.w, 1);
        s += output_pad_d == output_pad.h && output_pad.h == output_pad.w
                 ? detail::option_text("output_pad", output_pad_d, 0)
                 : ", output_pad=" + triple_text({output_pad_d, output_pad.h, output_pad.w});
    } else {
        s += detail::option_text("pad", {pad_h, pad_w}, 0);
        s += detail::option_text("stride", stride, 1) + detail::option_text("dilation", dilation, 1);
        s += detail::option_text("output_pad", output_pad, 0);
    }
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
            Tensor y = conv_transpose_volume(xb, weight, stride.h, dilation.h, pad_d, output_pad_d, o,
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
