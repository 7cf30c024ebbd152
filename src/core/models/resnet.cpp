// resnet.cpp — torchvision's ResNets (v1.5: a Bottleneck strides in its 3×3 convolution) from
// fluxion's layers, field for field, so that the state names are torchvision's.
#include <cstdint>
#include <string>
#include <utility>

#include "fluxion/error.hpp"
#include "fluxion/layers/flatten.hpp"
#include "fluxion/models.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::models {
namespace {

// Convolutions without bias (each is followed by a BatchNorm), initialised as torchvision does
// (He normal; the BatchNorms start at weight 1, bias 0).
Conv conv(std::int64_t k, std::int64_t in, std::int64_t out, std::int64_t stride = 1) {
    return Conv({k, k}, in, out, {.stride = stride, .pad = k / 2, .bias = false, .init = kaiming_normal});
}

std::tuple<Conv, BatchNorm> downsample(std::int64_t in, std::int64_t out, std::int64_t stride) {
    return {conv(1, in, out, stride), BatchNorm(out)};
}

struct Architecture {
    bool bottleneck;
    std::int64_t blocks[4];
    std::int64_t width_per_group = 64;  // the bottleneck's width at 64 planes (128: wide_resnet50_2)
};

ResidualBlock basic(std::int64_t in, std::int64_t planes, std::int64_t stride) {
    ResidualBlock b{conv(3, in, planes, stride),
                    conv(3, planes, planes),
                    BatchNorm(planes, relu),
                    BatchNorm(planes),
                    std::nullopt,
                    std::nullopt,
                    std::nullopt};
    if (stride != 1 || in != planes) b.downsample = downsample(in, planes, stride);
    return b;
}

ResidualBlock bottleneck(std::int64_t in, std::int64_t planes, std::int64_t stride, std::int64_t width_per_group) {
    const std::int64_t width = planes * width_per_group / 64, out = planes * 4;
    ResidualBlock b{conv(1, in, width),
                    conv(3, width, width, stride),
                    BatchNorm(width, relu),
                    BatchNorm(width, relu),
                    conv(1, width, out),
                    BatchNorm(out),
                    std::nullopt};
    if (stride != 1 || in != out) b.downsample = downsample(in, out, stride);
    return b;
}

ResNet resnet(const char* name, const Architecture& shape, const ModelOptions& options) {
    if (options.num_classes < 1)
        throw ValueError(std::string(name) + ": num_classes must be positive (got " +
                         std::to_string(options.num_classes) + ")");
    std::int64_t in = 64;
    auto stage = [&](std::int64_t planes, std::int64_t blocks, std::int64_t stride) {
        std::vector<ResidualBlock> layer;
        for (std::int64_t i = 0; i < blocks; ++i) {
            const std::int64_t s = i == 0 ? stride : 1;
            layer.push_back(shape.bottleneck ? bottleneck(in, planes, s, shape.width_per_group) : basic(in, planes, s));
            in = shape.bottleneck ? planes * 4 : planes;
        }
        return layer;
    };
    auto layer1 = stage(64, shape.blocks[0], 1);
    auto layer2 = stage(128, shape.blocks[1], 2);
    auto layer3 = stage(256, shape.blocks[2], 2);
    auto layer4 = stage(512, shape.blocks[3], 2);
    return ResNet{conv(7, 3, 64, 2),
                  BatchNorm(64, relu),
                  MaxPool({3, 3}, {.stride = 2, .pad = 1}),
                  std::move(layer1),
                  std::move(layer2),
                  std::move(layer3),
                  std::move(layer4),
                  Dense(in, options.num_classes)};
}

void show_blocks(detail::Shower& s, const std::vector<ResidualBlock>& blocks) {
    for (const auto& b : blocks) s.layer(b);
}

}  // namespace

Tensor ResidualBlock::operator()(const Tensor& x) const {
    Tensor y = bn2(conv2(bn1(conv1(x))));
    if (conv3) y = (*bn3)((*conv3)(y));
    const Tensor skip = downsample ? std::get<1>(*downsample)(std::get<0>(*downsample)(x)) : x;
    return relu(y + skip);
}

// As Metalhead prints its blocks: Parallel(relu ∘ +, the block's Chain, the shortcut).
void ResidualBlock::show(detail::Shower& s) const {
    s.open("Parallel");
    s.item("relu ∘ +");
    s.open("Chain");
    s.layer(conv1);
    s.layer(bn1);
    s.layer(conv2);
    s.layer(bn2);
    if (conv3) s.layer(*conv3), s.layer(*bn3);
    s.close();
    if (downsample) {
        s.open("Chain");
        s.layer(std::get<0>(*downsample));
        s.layer(std::get<1>(*downsample));
        s.close();
    } else {
        s.item("identity");
    }
    s.close();
}

Tensor ResNet::operator()(const Tensor& x) const {
    Tensor y = maxpool(bn1(conv1(x)));
    for (const auto* layer : {&layer1, &layer2, &layer3, &layer4})
        for (const auto& block : *layer) y = block(y);
    return fc(Flatten()(GlobalMeanPool()(y)));
}

// As Metalhead: the backbone's Chain, then the head's.
void ResNet::show(detail::Shower& s) const {
    s.open("ResNet");
    s.open("Chain");
    s.layer(conv1);
    s.layer(bn1);
    s.layer(maxpool);
    for (const auto* layer : {&layer1, &layer2, &layer3, &layer4}) show_blocks(s, *layer);
    s.close();
    s.open("Chain");
    s.item("GlobalMeanPool()");
    s.item("Flatten()");
    s.layer(fc);
    s.close();
    s.close();
}

ResNet resnet18(const ModelOptions& o) { return resnet("resnet18", {false, {2, 2, 2, 2}}, o); }
ResNet resnet34(const ModelOptions& o) { return resnet("resnet34", {false, {3, 4, 6, 3}}, o); }
ResNet resnet50(const ModelOptions& o) { return resnet("resnet50", {true, {3, 4, 6, 3}}, o); }
ResNet wide_resnet50_2(const ModelOptions& o) { return resnet("wide_resnet50_2", {true, {3, 4, 6, 3}, 128}, o); }

std::vector<std::string> trunk(const ResNet&) { return {"conv1", "bn1", "layer1", "layer2", "layer3", "layer4"}; }

}  // namespace fluxion::models
