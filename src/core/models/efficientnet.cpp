// efficientnet.cpp — torchvision's EfficientNet-B0 from fluxion's layers and the MBConv block
// (mbconv.cpp); state names come from the hand-written functors in models.hpp.
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

// An MBConv of expansion `t`; its squeeze-excitation squeezes to a quarter of the block's input.
MBConv block(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t t) {
    const std::int64_t expanded = in * t, squeeze = std::max<std::int64_t>(1, in / 4);
    MBConv b{std::nullopt, conv_bn(kernel, expanded, expanded, swish, stride, expanded),
             SqueezeExcitation{Conv({1, 1}, expanded, squeeze, swish, {.init = kaiming_normal}),
                               Conv({1, 1}, squeeze, expanded, sigmoid, {.init = kaiming_normal})},
             conv_bn(1, expanded, out, {}), stride == 1 && in == out};
    if (t != 1) b.expand = conv_bn(1, in, expanded, swish);
    return b;
}

}  // namespace

Tensor EfficientNet::operator()(const Tensor& x) const {
    Tensor y = run(stem, x);
    for (const auto& stage : stages)
        for (const auto& b : stage) y = b(y);
    return classifier(dropout(Flatten()(GlobalMeanPool()(run(last, y)))));
}

void EfficientNet::show(detail::Shower& s) const {
    s.open("EfficientNet");
    s.open("Chain");
    models::show(s, stem);
    for (const auto& stage : stages)
        for (const auto& b : stage) s.layer(b);
    models::show(s, last);
    s.close();
    show_pooled_head(s, dropout, classifier);
    s.close();
}

EfficientNet efficientnet_b0(const ModelOptions& options) {
    if (options.num_classes < 1)
        throw ValueError("efficientnet_b0: num_classes must be positive (got " + std::to_string(options.num_classes) +
                         ")");
    // torchvision's table for B0: expansion, kernel, first stride, input and output channels, blocks.
    const std::int64_t settings[7][6] = {{1, 3, 1, 32, 16, 1},   {6, 3, 2, 16, 24, 2},  {6, 5, 2, 24, 40, 2},
                                         {6, 3, 2, 40, 80, 3},   {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4},
                                         {6, 3, 1, 192, 320, 1}};
    std::vector<std::vector<MBConv>> stages;
    for (const auto& [t, k, s, in, out, n] : settings) {
        std::vector<MBConv> stage;
        for (std::int64_t i = 0; i < n; ++i) stage.push_back(block(i == 0 ? in : out, out, k, i == 0 ? s : 1, t));
        stages.push_back(std::move(stage));
    }
    return {conv_bn(3, 3, 32, swish, 2), std::move(stages), conv_bn(1, 320, 1280, swish), Dropout(0.2),
            Dense(1280, options.num_classes)};
}

std::vector<std::string> trunk(const EfficientNet& model) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i <= model.stages.size() + 1; ++i) out.push_back("features." + std::to_string(i));
    return out;
}

}  // namespace fluxion::models
