// models.cpp — the zoo's models (fluxion/models.hpp) as ONNX graphs, their nodes named as
// torchvision's modules ("layer1.0.conv1", "features.3.conv.1.0"); the U-Net's as milesial/Pytorch-UNet's
// ("down1.maxpool_conv.1.double_conv.0", "up1.up").
#include <algorithm>

#include "core/onnx/graph.hpp"
#include "fluxion/layers/flatten.hpp"
#include "fluxion/layers/pooling.hpp"
#include "fluxion/layers/upsample.hpp"
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

// torchvision's Sequential indices: features (conv, [BatchNorm], relu, [max pool]), avgpool, then
// classifier.0, .3 and .6 (the dropouts, identities here, at .2 and .5).
std::string layer(Graph& g, const models::VGG& m, const std::string& x, const std::string& path) {
    const std::string features = join(path, "features");
    std::string y = x;
    std::size_t i = 0;
    for (std::size_t c = 0; c < m.convs.size(); ++c) {
        y = layer(g, m.convs[c], y, join(features, std::to_string(i++)));
        if (!m.norms.empty()) y = layer(g, m.norms[c], y, join(features, std::to_string(i++)));
        ++i;  // the relu, in the convolution's or the BatchNorm's activation
        if (m.pool_after[c]) y = layer(g, MaxPool({2, 2}), y, join(features, std::to_string(i++)));
    }
    y = layer(g, Flatten(), layer(g, m.avgpool, y, join(path, "avgpool")), join(path, "flatten"));
    y = layer(g, m.fc2, layer(g, m.fc1, y, join(path, "classifier.0")), join(path, "classifier.3"));
    return layer(g, m.classifier, y, join(path, "classifier.6"));
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

std::string layer(Graph& g, const models::SqueezeExcitation& se, const std::string& x, const std::string& path) {
    const std::string pooled = g.node("GlobalAveragePool", {x}, join(path, "avgpool"), g.rank(x));
    const std::string scale = layer(g, se.fc2, layer(g, se.fc1, pooled, join(path, "fc1")), join(path, "fc2"));
    return g.node("Mul", {x, scale}, join(path, "scale"), g.rank(x));
}

std::string layer(Graph& g, const models::MBConv& b, const std::string& x, const std::string& path) {
    int i = 0;
    auto next = [&] { return join(path, "block." + std::to_string(i++)); };
    std::string y = b.expand ? layer(g, *b.expand, x, next()) : x;
    y = layer(g, b.depthwise, y, next());
    if (b.se) y = layer(g, *b.se, y, next());
    y = layer(g, b.project, y, next());
    return b.residual ? g.node("Add", {y, x}, join(path, "add"), g.rank(y)) : y;
}

std::string layer(Graph& g, const models::MobileNetV3& m, const std::string& x, const std::string& path) {
    const std::string features = join(path, "features");
    std::string y = layer(g, m.stem, x, join(features, "0"));
    for (std::size_t i = 0; i < m.blocks.size(); ++i) y = layer(g, m.blocks[i], y, join(features, std::to_string(i + 1)));
    y = layer(g, m.last, y, join(features, std::to_string(m.blocks.size() + 1)));
    y = layer(g, Flatten(), layer(g, GlobalMeanPool(), y, join(path, "avgpool")), join(path, "flatten"));
    return layer(g, m.classifier, layer(g, m.hidden, y, join(path, "classifier.0")), join(path, "classifier.3"));
}

std::string layer(Graph& g, const models::EfficientNet& m, const std::string& x, const std::string& path) {
    const std::string features = join(path, "features");
    std::string y = layer(g, m.stem, x, join(features, "0"));
    for (std::size_t i = 0; i < m.stages.size(); ++i) y = layer(g, m.stages[i], y, join(features, std::to_string(i + 1)));
    y = layer(g, m.last, y, join(features, std::to_string(m.stages.size() + 1)));
    y = layer(g, Flatten(), layer(g, GlobalMeanPool(), y, join(path, "avgpool")), join(path, "flatten"));
    return layer(g, m.classifier, y, join(path, "classifier.1"));
}

namespace {

std::string transpose(Graph& g, const std::string& x, std::vector<std::int64_t> perm, const std::string& name) {
    return g.node("Transpose", {x}, name, g.rank(x), [&](auto& n) { attribute(n, "perm", perm); });
}

// A LayerNorm over the channels of {N, C, H, W} (torchvision's LayerNorm2d).
std::string channel_norm(Graph& g, const LayerNorm& norm, const std::string& x, const std::string& path) {
    const std::string y = layer(g, norm, transpose(g, x, {0, 2, 3, 1}, join(path, "to_channels_last")), path);
    return transpose(g, y, {0, 3, 1, 2}, join(path, "to_channels_first"));
}

}  // namespace

std::string layer(Graph& g, const models::CNBlock& b, const std::string& x, const std::string& path) {
    std::string y = transpose(g, layer(g, b.dwconv, x, join(path, "block.0")), {0, 2, 3, 1}, join(path, "block.1"));
    y = layer(g, b.pwconv2, layer(g, b.pwconv1, layer(g, b.norm, y, join(path, "block.2")), join(path, "block.3")),
              join(path, "block.5"));
    y = transpose(g, y, {0, 3, 1, 2}, join(path, "block.6"));
    y = g.node("Mul", {y, g.initializer(b.layer_scale, join(path, "layer_scale"))}, join(path, "scale"), 4);
    return g.node("Add", {y, x}, join(path, "add"), 4);
}

std::string layer(Graph& g, const models::ConvNeXt& m, const std::string& x, const std::string& path) {
    const std::string features = join(path, "features");
    auto feature = [&](std::size_t i) { return join(features, std::to_string(i)); };
    std::string y = channel_norm(g, std::get<1>(m.stem), layer(g, std::get<0>(m.stem), x, join(feature(0), "0")),
                                 join(feature(0), "1"));
    for (std::size_t i = 0; i < m.stages.size(); ++i) {
        y = layer(g, m.stages[i], y, feature(2 * i + 1));
        if (i < m.downsamples.size()) {
            const auto& [norm, conv] = m.downsamples[i];
            y = layer(g, conv, channel_norm(g, norm, y, join(feature(2 * i + 2), "0")), join(feature(2 * i + 2), "1"));
        }
    }
    y = layer(g, Flatten(), layer(g, GlobalMeanPool(), y, join(path, "avgpool")), join(path, "flatten"));
    return layer(g, m.classifier, layer(g, m.norm, y, join(path, "classifier.0")), join(path, "classifier.2"));
}

std::string layer(Graph& g, const models::EncoderBlock& b, const std::string& x, const std::string& path) {
    const std::string y = g.node("Add", {x, layer(g, b.self_attention, layer(g, b.ln_1, x, join(path, "ln_1")),
                                                  join(path, "self_attention"))},
                                 join(path, "add1"), 3);
    const std::string mlp = layer(g, b.mlp2, layer(g, b.mlp1, layer(g, b.ln_2, y, join(path, "ln_2")), join(path, "mlp.0")),
                                  join(path, "mlp.3"));
    return g.node("Add", {y, mlp}, join(path, "add2"), 3);
}

// The patches' {N, E, h, w} becomes {N, h·w, E}; the class token, expanded to the batch (taken from
// the input's shape), goes first.
std::string layer(Graph& g, const models::VisionTransformer& m, const std::string& x, const std::string& path) {
    const std::int64_t hidden = m.conv_proj.weight.shape(0);
    std::string y = layer(g, m.conv_proj, x, join(path, "conv_proj"));
    y = g.node("Reshape", {y, g.initializer_i64({0, hidden, -1}, {3}, join(path, "patches_shape"))},
               join(path, "patches"), 3);
    y = transpose(g, y, {0, 2, 1}, join(path, "sequence"));
    const std::string batch = g.node("Gather", {g.node("Shape", {x}, join(path, "input_shape"), 1),
                                                g.initializer_i64({0}, {1}, join(path, "batch_index"))},
                                     join(path, "batch"), 1);
    const std::string shape = g.node("Concat", {batch, g.initializer_i64({1, 1}, {2}, join(path, "token_shape"))},
                                     join(path, "class_tokens_shape"), 1, [](auto& n) { attribute(n, "axis", std::int64_t{0}); });
    const std::string tokens = g.node("Expand", {g.initializer(m.class_token, join(path, "class_token")), shape},
                                      join(path, "class_tokens"), 3);
    y = g.node("Concat", {tokens, y}, join(path, "with_class_token"), 3, [](auto& n) { attribute(n, "axis", std::int64_t{1}); });
    const std::string encoder = join(path, "encoder");
    y = g.node("Add", {y, g.initializer(m.pos_embedding, join(encoder, "pos_embedding"))}, join(encoder, "add_pos"), 3);
    for (std::size_t i = 0; i < m.layers.size(); ++i)
        y = layer(g, m.layers[i], y, join(encoder, "layers.encoder_layer_" + std::to_string(i)));
    y = layer(g, m.ln, y, join(encoder, "ln"));
    y = g.node("Gather", {y, g.initializer_i64({0}, {}, join(path, "class_index"))}, join(path, "class_output"), 2,
               [](auto& n) { attribute(n, "axis", std::int64_t{1}); });
    return layer(g, m.head, y, join(path, "heads.head"));
}

std::string layer(Graph& g, const models::DoubleConv& b, const std::string& x, const std::string& path) {
    const std::string y =
        layer(g, b.bn1, layer(g, b.conv1, x, join(path, "double_conv.0")), join(path, "double_conv.1"));
    return layer(g, b.bn2, layer(g, b.conv2, y, join(path, "double_conv.3")), join(path, "double_conv.4"));
}

std::string layer(Graph& g, const models::UNetDown& b, const std::string& x, const std::string& path) {
    return layer(g, b.conv, layer(g, MaxPool({2, 2}), x, join(path, "maxpool_conv.0")), join(path, "maxpool_conv.1"));
}

namespace {

// A step up: x upsampled, zero-padded (half before, the rest after) to the skip's height and width,
// which the example input fixes, then put after the skip along the channels.
std::string up(Graph& g, const models::UNetUp& b, const std::string& x, const std::string& skip,
               const std::string& path) {
    std::string y =
        b.up ? layer(g, *b.up, x, join(path, "up"))
             : layer(g, Upsample(UpsampleMode::bilinear, {.scale = {2}, .align_corners = true}), x, join(path, "up"));
    const std::vector<std::int64_t> have = g.inferred_shape(y), want = g.inferred_shape(skip);
    if (have[2] < 0 || have[3] < 0 || want[2] < 0 || want[3] < 0)
        throw Error("fx::onnx::save: the U-Net step at '" + path +
                    "' has image sizes that ONNX's shape inference cannot tell");
    const std::int64_t dh = std::max<std::int64_t>(want[2] - have[2], 0),
                       dw = std::max<std::int64_t>(want[3] - have[3], 0);
    if (dh > 0 || dw > 0)
        y = g.node(
            "Pad",
            {y, g.initializer_i64({0, 0, dh / 2, dw / 2, 0, 0, dh - dh / 2, dw - dw / 2}, {8}, join(path, "pads"))},
            join(path, "pad"), 4);
    y = g.node("Concat", {skip, y}, join(path, "cat"), 4, [](auto& n) { attribute(n, "axis", std::int64_t{1}); });
    return layer(g, b.conv, y, join(path, "conv"));
}

}  // namespace

std::string layer(Graph& g, const models::UNet& m, const std::string& x, const std::string& path) {
    const std::string x1 = layer(g, m.inc, x, join(path, "inc")), x2 = layer(g, m.down1, x1, join(path, "down1")),
                      x3 = layer(g, m.down2, x2, join(path, "down2")), x4 = layer(g, m.down3, x3, join(path, "down3"));
    std::string y = up(g, m.up1, layer(g, m.down4, x4, join(path, "down4")), x4, join(path, "up1"));
    y = up(g, m.up2, y, x3, join(path, "up2"));
    y = up(g, m.up3, y, x2, join(path, "up3"));
    return layer(g, m.outc, up(g, m.up4, y, x1, join(path, "up4")), join(path, "outc.conv"));
}

}  // namespace fluxion::onnx::detail
