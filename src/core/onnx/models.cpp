// models.cpp — the zoo's models (fluxion/models.hpp) as ONNX graphs, their nodes named as
// torchvision's modules ("layer1.0.conv1", "features.3.conv.1.0").
#include "core/onnx/graph.hpp"
#include "fluxion/layers/flatten.hpp"
#include "fluxion/models.hpp"

namespace fluxion::onnx::detail {

std::string layer(Graph& g, const models::ResidualBlock& b, const std::string& x, const std::string& path) {
    std::string y = layer(g, b.bn2, layer(g, b.conv2, layer(g, b.bn1, layer(g, b.conv1, x, join(path, "conv1")), join(path, "bn1")), join(path, "conv2")), join(path, "bn2"));
    if (b.conv3) y = layer(g, *b.bn3, layer(g, *b.conv3, y, join(path, "conv3")), join(path, "bn3"));
    const std::string skip = layer(g, b.downsample, x, join(path, "downsample"));
    return g.node("Relu", {g.node("Add", {y, skip}, join(path, "add"), g.rank(y))}, join(path, "relu"), g.rank(y));
}

std::string layer(Graph& g, const models::ResNet& m, const std::string& x, const std::string& path) {
    std::string y = layer(g, m.maxpool, layer(g, m.bn1, layer(g, m.conv1, x, join(path, "conv1")), join(path, "bn1")), join(path, "maxpool"));
    int i = 1;
    for (const auto* stage : {&m.layer1, &m.layer2, &m.layer3, &m.layer4})
        y = layer(g, *stage, y, join(path, "layer" + std::to_string(i++)));
    y = layer(g, Flatten(), layer(g, GlobalMeanPool(), y, join(path, "avgpool")), join(path, "flatten"));
    return layer(g, m.fc, y, join(path, "fc"));
}

std::string layer(Graph& g, const models::InvertedResidual& b, const std::string& x, const std::string& path) {
    const std::string conv = join(path, "conv");
    const int first = b.expand ? 1 : 0;
    std::string y = layer(g, b.expand, x, join(conv, "0"));
    y = layer(g, b.depthwise, y, join(conv, std::to_string(first)));
    y = layer(g, b.project, y, join(conv, std::to_string(first + 1)));
    y = layer(g, b.project_bn, y, join(conv, std::to_string(first + 2)));
    return b.residual ? g.node("Add", {y, x}, join(path, "add"), g.rank(y)) : y;
}

std::string layer(Graph& g, const models::MobileNetV2& m, const std::string& x, const std::string& path) {
    const std::string features = join(path, "features");
    std::string y = layer(g, m.stem, x, join(features, "0"));
    for (std::size_t i = 0; i < m.blocks.size(); ++i) y = layer(g, m.blocks[i], y, join(features, std::to_string(i + 1)));
    y = layer(g, m.last, y, join(features, std::to_string(m.blocks.size() + 1)));
    y = layer(g, Flatten(), layer(g, GlobalMeanPool(), y, join(path, "avgpool")), join(path, "flatten"));
    return layer(g, m.classifier, y, join(path, "classifier.1"));
}

}  // namespace fluxion::onnx::detail
