// mobilenet.cpp — torchvision's MobileNetV2 (width 1) from fluxion's layers; state names come from
// the hand-written functors in models.hpp.
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

const Activation relu6([](const Tensor& x) { return clamp(x, 0, 6); }, "relu6");

InvertedResidual inverted_residual(std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t t) {
    const std::int64_t hidden = in * t;
    std::optional<std::tuple<Conv, BatchNorm>> expand;
    if (t != 1) expand = conv_bn(1, in, hidden, relu6);
    return {std::move(expand), conv_bn(3, hidden, hidden, relu6, stride, hidden),
            Conv({1, 1}, hidden, out, {.bias = false, .init = kaiming_normal}), BatchNorm(out),
            stride == 1 && in == out};
}

}  // namespace

Tensor InvertedResidual::operator()(const Tensor& x) const {
    Tensor y = expand ? run(*expand, x) : x;
    y = project_bn(project(run(depthwise, y)));
    return residual ? y + x : y;
}

void InvertedResidual::show(detail::Shower& s) const {
    if (residual) s.open("SkipConnection");
    s.open("Chain");
    if (expand) models::show(s, *expand);
    models::show(s, depthwise);
    s.layer(project);
    s.layer(project_bn);
    s.close();
    if (residual) s.item("+"), s.close();
}

Tensor MobileNetV2::operator()(const Tensor& x) const {
    Tensor y = run(stem, x);
    for (const auto& b : blocks) y = b(y);
    return classifier(dropout(Flatten()(GlobalMeanPool()(run(last, y)))));
}

void MobileNetV2::show(detail::Shower& s) const {
    s.open("MobileNetV2");
    s.open("Chain");
    models::show(s, stem);
    for (const auto& b : blocks) s.layer(b);
    models::show(s, last);
    s.close();
    show_pooled_head(s, dropout, classifier);
    s.close();
}

MobileNetV2 mobilenet_v2(const ModelOptions& options) {
    if (options.num_classes < 1)
        throw ValueError("mobilenet_v2: num_classes must be positive (got " + std::to_string(options.num_classes) +
                         ")");
    // torchvision's table: expansion t, channels c, blocks n, first stride s.
    const std::int64_t setting[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                        {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    std::int64_t in = 32;
    std::vector<InvertedResidual> blocks;
    for (const auto& [t, c, n, s] : setting)
        for (std::int64_t i = 0; i < n; ++i) {
            blocks.push_back(inverted_residual(in, c, i == 0 ? s : 1, t));
            in = c;
        }
    return {conv_bn(3, 3, 32, relu6, 2), std::move(blocks), conv_bn(1, in, 1280, relu6), Dropout(0.2),
            Dense(1280, options.num_classes)};
}

std::vector<std::string> trunk(const MobileNetV2& model) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i <= model.blocks.size() + 1; ++i) out.push_back("features." + std::to_string(i));
    return out;
}

}  // namespace fluxion::models
