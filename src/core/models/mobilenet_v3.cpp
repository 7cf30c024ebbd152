// mobilenet_v3.cpp — torchvision's MobileNetV3-small (width 1) from fluxion's layers and the MBConv
// block (mbconv.cpp); state names come from the hand-written functors in models.hpp.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "core/models/conv_bn.hpp"
#include "fluxion/error.hpp"
#include "fluxion/layers/flatten.hpp"
#include "fluxion/models.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::models {
namespace {

// torchvision's BatchNorm settings for MobileNetV3.
constexpr BatchNormOptions kNorm{.momentum = 0.01, .epsilon = 1e-3};

// torchvision's _make_divisible(v, 8): the nearest multiple of 8, not below 90% of v.
std::int64_t divisible(std::int64_t v) {
    std::int64_t out = std::max<std::int64_t>(8, (v + 4) / 8 * 8);
    return out < 0.9 * double(v) ? out + 8 : out;
}

struct Setting {
    std::int64_t in, kernel, expanded, out;
    bool se, hardswish;
    std::int64_t stride;
};

MBConv block(const Setting& c) {
    const Activation act = c.hardswish ? Activation(hardswish) : Activation(relu);
    MBConv b{std::nullopt, conv_bn(c.kernel, c.expanded, c.expanded, act, c.stride, c.expanded, kNorm), std::nullopt,
             conv_bn(1, c.expanded, c.out, {}, 1, 1, kNorm), c.stride == 1 && c.in == c.out};
    if (c.expanded != c.in) b.expand = conv_bn(1, c.in, c.expanded, act, 1, 1, kNorm);
    if (c.se) {
        const std::int64_t squeeze = divisible(c.expanded / 4);
        b.se = SqueezeExcitation{Conv({1, 1}, c.expanded, squeeze, relu, {.init = kaiming_normal}),
                                 Conv({1, 1}, squeeze, c.expanded, hardsigmoid, {.init = kaiming_normal})};
    }
    return b;
}

}  // namespace

Tensor MobileNetV3::operator()(const Tensor& x) const {
    Tensor y = run(stem, x);
    for (const auto& b : blocks) y = b(y);
    return classifier(dropout(hidden(Flatten()(GlobalMeanPool()(run(last, y))))));
}

void MobileNetV3::show(detail::Shower& s) const {
    s.open("MobileNetV3");
    s.open("Chain");
    models::show(s, stem);
    for (const auto& b : blocks) s.layer(b);
    models::show(s, last);
    s.close();
    show_pooled_head(s, hidden, dropout, classifier);
    s.close();
}

MobileNetV3 mobilenet_v3_small(const ModelOptions& options) {
    if (options.num_classes < 1)
        throw ValueError("mobilenet_v3_small: num_classes must be positive (got " +
                         std::to_string(options.num_classes) + ")");
    // torchvision's table: input, kernel, expanded, output channels, squeeze-excitation, hardswish
    // (else relu), stride.
    const Setting settings[] = {{16, 3, 16, 16, true, false, 2},   {16, 3, 72, 24, false, false, 2},
                                {24, 3, 88, 24, false, false, 1},  {24, 5, 96, 40, true, true, 2},
                                {40, 5, 240, 40, true, true, 1},   {40, 5, 240, 40, true, true, 1},
                                {40, 5, 120, 48, true, true, 1},   {48, 5, 144, 48, true, true, 1},
                                {48, 5, 288, 96, true, true, 2},   {96, 5, 576, 96, true, true, 1},
                                {96, 5, 576, 96, true, true, 1}};
    std::vector<MBConv> blocks;
    for (const auto& c : settings) blocks.push_back(block(c));
    return {conv_bn(3, 3, 16, hardswish, 2, 1, kNorm),
            std::move(blocks),
            conv_bn(1, 96, 576, hardswish, 1, 1, kNorm),
            Dense(576, 1024, hardswish),
            Dropout(0.2),
            Dense(1024, options.num_classes)};
}

std::vector<std::string> trunk(const MobileNetV3& model) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i <= model.blocks.size() + 1; ++i) out.push_back("features." + std::to_string(i));
    out.push_back("classifier.0");
    return out;
}

}  // namespace fluxion::models
