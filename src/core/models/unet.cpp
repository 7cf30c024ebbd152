// unet.cpp — milesial/Pytorch-UNet's U-Net from fluxion's layers; state names come from the
// hand-written functors in models.hpp.
#include <cstdint>
#include <string>
#include <utility>

#include "fluxion/error.hpp"
#include "fluxion/layers/upsample.hpp"
#include "fluxion/models.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::models {
namespace {

const MaxPool kPool({2, 2});
const Upsample kBilinear(UpsampleMode::bilinear, {.scale = {2}, .align_corners = true});

DoubleConv double_conv(std::int64_t in, std::int64_t out, std::int64_t mid) {
    auto conv = [](std::int64_t i, std::int64_t o) {
        return Conv({3, 3}, i, o, {.pad = 1, .bias = false, .init = kaiming_normal});
    };
    return {conv(in, mid), BatchNorm(mid, relu), conv(mid, out), BatchNorm(out, relu)};
}

// milesial's Up(in, out, bilinear): the transposed convolution halves the channels before the
// DoubleConv; bilinear upsampling keeps them, and the DoubleConv's middle halves them instead.
UNetUp up(std::int64_t in, std::int64_t out, bool bilinear) {
    if (bilinear) return {std::nullopt, double_conv(in, out, in / 2)};
    return {ConvTranspose({2, 2}, in, in / 2, {.stride = 2}), double_conv(in, out, out)};
}

// x with zero rows and columns added (half before, the rest after) up to the height and width of `like`.
Tensor pad_to(const Tensor& x, const Tensor& like) {
    const std::int64_t dh = like.shape(2) - x.shape(2), dw = like.shape(3) - x.shape(3);
    Tensor y = x;
    auto zeros_along = [&](int axis, std::int64_t n) {
        Shape shape = y.shape();
        shape[axis] = n;
        return zeros(shape, {.dtype = y.dtype(), .device = y.device()});
    };
    if (dh > 0) y = concat({zeros_along(2, dh / 2), y, zeros_along(2, dh - dh / 2)}, 2);
    if (dw > 0) y = concat({zeros_along(3, dw / 2), y, zeros_along(3, dw - dw / 2)}, 3);
    return y;
}

}  // namespace

Tensor DoubleConv::operator()(const Tensor& x) const { return bn2(conv2(bn1(conv1(x)))); }

void DoubleConv::show(detail::Shower& s) const {
    s.open("Chain");
    s.layer(conv1);
    s.layer(bn1);
    s.layer(conv2);
    s.layer(bn2);
    s.close();
}

Tensor UNetDown::operator()(const Tensor& x) const { return conv(kPool(x)); }

void UNetDown::show(detail::Shower& s) const {
    s.open("Chain");
    s.layer(kPool);
    s.layer(conv);
    s.close();
}

Tensor UNetUp::operator()(const Tensor& x, const Tensor& skip) const {
    const Tensor y = up ? (*up)(x) : kBilinear(x);
    return conv(concat({skip, pad_to(y, skip)}, 1));
}

// As Metalhead's U-Net joins its skips: chcat, the skip's channels first.
void UNetUp::show(detail::Shower& s) const {
    s.open("Chain");
    if (up) s.layer(*up);
    else s.layer(kBilinear);
    s.item("chcat(skip, ·)");
    s.layer(conv);
    s.close();
}

Tensor UNet::operator()(const Tensor& x) const {
    if (x.ndim() != 4 || x.shape(2) < 16 || x.shape(3) < 16)
        throw ShapeError("UNet: expected images {N, C, H, W} of at least 16×16 (four 2×2 max pools), got " +
                         to_string(x.shape()));
    const Tensor x1 = inc(x), x2 = down1(x1), x3 = down2(x2), x4 = down3(x3);
    Tensor y = up1(down4(x4), x4);
    y = up2(y, x3);
    y = up3(y, x2);
    return outc(up4(y, x1));
}

void UNet::show(detail::Shower& s) const {
    s.open("UNet");
    s.layer(inc);
    for (const auto* step : {&down1, &down2, &down3, &down4}) s.layer(*step);
    for (const auto* step : {&up1, &up2, &up3, &up4}) s.layer(*step);
    s.layer(outc);
    s.close();
}

UNet unet(const UNetOptions& o) {
    for (const auto& [name, value] :
         {std::pair{"n_channels", o.n_channels}, std::pair{"n_classes", o.n_classes}, std::pair{"width", o.width}})
        if (value < 1)
            throw ValueError(std::string("unet: ") + name + " must be positive (got " + std::to_string(value) + ")");
    const std::int64_t w = o.width, factor = o.bilinear ? 2 : 1;
    return {double_conv(o.n_channels, w, w),
            {double_conv(w, 2 * w, 2 * w)},
            {double_conv(2 * w, 4 * w, 4 * w)},
            {double_conv(4 * w, 8 * w, 8 * w)},
            {double_conv(8 * w, 16 * w / factor, 16 * w / factor)},
            up(16 * w, 8 * w / factor, o.bilinear),
            up(8 * w, 4 * w / factor, o.bilinear),
            up(4 * w, 2 * w / factor, o.bilinear),
            up(2 * w, w, o.bilinear),
            Conv({1, 1}, w, o.n_classes)};
}

std::vector<std::string> trunk(const UNet&) {
    return {"inc", "down1", "down2", "down3", "down4", "up1", "up2", "up3", "up4"};
}

}  // namespace fluxion::models
