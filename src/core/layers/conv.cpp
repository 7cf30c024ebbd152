// conv.cpp — Conv and ConvTranspose: resolving padding once, then conv2d / conv_transpose2d, the
// bias and the activation. Asymmetric padding (SamePad with an even kernel) pads with zeros first.
#include "fluxion/layers/conv.hpp"

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
    if (!o.pad.same() && (o.pad.top() != o.pad.bottom() || o.pad.top() != o.pad.left() || o.pad.left() != o.pad.right()))
        throw ValueError(name + ": a 1-d convolution takes one padding (both ends), or SamePad()");
    ConvOptions flat = o;
    flat.stride = {1, o.stride.w}, flat.dilation = {1, o.dilation.w};
    if (!o.pad.same()) flat.pad = Pad(0, 0, o.pad.left(), o.pad.right());
    return flat;
}

}  // namespace

// ---- Conv ----

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
    const bool one_d = weight.ndim() == 3;
    std::string s = "Conv(";
    if (one_d) s.append("(").append(std::to_string(weight.shape(2))).append(",)");
    else s += detail::tuple_text({weight.shape(2), weight.shape(3)});
    s += ", " + sizes(in_channels(), out_channels());
    if (!activation.is_identity()) s += ", " + activation.name();
    if (one_d) {
        s += pad_left == pad_right ? detail::option_text("pad", pad_left, 0)
                                   : ", pad=(" + std::to_string(pad_left) + ", " + std::to_string(pad_right) + ")";
        s += detail::option_text("stride", stride.w, 1) + detail::option_text("dilation", dilation.w, 1);
    } else {
        s += pad_text(pad_top, pad_bottom, pad_left, pad_right);
        s += detail::option_text("stride", stride, 1) + detail::option_text("dilation", dilation, 1);
    }
    if (groups != 1) s += ", groups=" + std::to_string(groups);
    if (!bias.defined()) s += "; bias=false";
    return s + ")";
}

Tensor Conv::operator()(const Tensor& x) const {
    const bool one_d = weight.ndim() == 3;
    Tensor xb = one_d ? detail::as_sequence_batch(describe(), x, in_channels())
                      : detail::as_image_batch(describe(), x, in_channels());
    return detail::in_context(*this, [&] {
        const Tensor w = one_d ? weight.unsqueeze(2) : weight;
        bool symmetric = pad_top == pad_bottom && pad_left == pad_right;
        Tensor input = symmetric ? xb : pad_zeros(xb, pad_top, pad_bottom, pad_left, pad_right);
        Conv2dOptions o{.stride = {stride.h, stride.w},
                        .padding = symmetric ? std::vector<std::int64_t>{pad_top, pad_left} : std::vector<std::int64_t>{0, 0},
                        .dilation = {dilation.h, dilation.w},
                        .groups = groups};
        Tensor y = conv2d(input, w, o);
        if (bias.defined()) y = y + bias.reshape({1, out_channels(), 1, 1});
        return one_d ? detail::like_sequence(x, activation(y)) : detail::like_input(x, activation(y));
    });
}

// ---- ConvTranspose ----

ConvTranspose::ConvTranspose(Size2 kernel, std::int64_t in, std::int64_t out, const ConvTransposeOptions& o)
    : ConvTranspose(kernel, in, out, {}, o) {}

ConvTranspose::ConvTranspose(Size2 kernel, std::int64_t in, std::int64_t out, Activation act,
                             const ConvTransposeOptions& o)
    : activation(std::move(act)), stride(o.stride), dilation(o.dilation), output_pad(o.output_pad), groups(o.groups) {
    check_sizes("ConvTranspose", kernel, in, out, o.stride, o.dilation, o.groups);
    std::string name = "ConvTranspose(" + detail::tuple_text(kernel) + ", " + sizes(in, out) + ")";
    if (o.pad.same()) {
        if (!(o.output_pad == Size2(0))) throw ValueError(name + ": SamePad sets output_pad itself; leave it 0");
        // output = H·stride needs 2·pad - output_pad = dilation·(k - 1) + 1 - stride.
        auto resolve = [&](std::int64_t k, std::int64_t s, std::int64_t d, std::int64_t& p, std::int64_t& op) {
            std::int64_t total = d * (k - 1) + 1 - s;
            p = total > 0 ? (total + 1) / 2 : 0;
            op = 2 * p - total;
            if (op >= std::max(s, d))
                throw ValueError(name + ": SamePad cannot be met with kernel " + detail::tuple_text(kernel) +
                                 " and stride " + detail::tuple_text(o.stride) + "; give the padding explicitly");
        };
        resolve(kernel.h, o.stride.h, o.dilation.h, pad_h, output_pad.h);
        resolve(kernel.w, o.stride.w, o.dilation.w, pad_w, output_pad.w);
    } else {
        if (o.pad.top() != o.pad.bottom() || o.pad.left() != o.pad.right() || o.pad.top() < 0 || o.pad.left() < 0)
            throw ValueError(name + ": padding must be the same on opposite sides and >= 0");
        pad_h = o.pad.top(), pad_w = o.pad.left();
    }
    weight = o.init({in, out / groups, kernel.h, kernel.w});
    if (o.bias) bias = zeros({out}, {.dtype = weight.dtype(), .device = weight.device()});
}

std::string ConvTranspose::describe() const {
    std::string s = "ConvTranspose(" + detail::tuple_text({weight.shape(2), weight.shape(3)}) + ", " +
                    sizes(in_channels(), out_channels());
    if (!activation.is_identity()) s += ", " + activation.name();
    s += detail::option_text("pad", {pad_h, pad_w}, 0);
    s += detail::option_text("stride", stride, 1) + detail::option_text("dilation", dilation, 1);
    s += detail::option_text("output_pad", output_pad, 0);
    if (groups != 1) s += ", groups=" + std::to_string(groups);
    if (!bias.defined()) s += "; bias=false";
    return s + ")";
}

Tensor ConvTranspose::operator()(const Tensor& x) const {
    Tensor xb = detail::as_image_batch(describe(), x, in_channels());
    return detail::in_context(*this, [&] {
        Conv2dOptions o{.stride = {stride.h, stride.w},
                        .padding = {pad_h, pad_w},
                        .dilation = {dilation.h, dilation.w},
                        .groups = groups};
        Tensor y = conv_transpose2d(xb, weight, o, {output_pad.h, output_pad.w});
        if (bias.defined()) y = y + bias.reshape({1, out_channels(), 1, 1});
        return detail::like_input(x, activation(y));
    });
}

}  // namespace fluxion
