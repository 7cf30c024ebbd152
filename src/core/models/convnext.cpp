// convnext.cpp — torchvision's ConvNeXt-tiny from fluxion's layers; state names come from the
// hand-written functors in models.hpp.
#include <cstdint>
#include <string>
#include <utility>

#include "fluxion/error.hpp"
#include "fluxion/layers/flatten.hpp"
#include "fluxion/models.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::models {
namespace {

// torchvision's LayerNorm2d: a LayerNorm over the channels of {N, C, H, W}.
Tensor channel_norm(const LayerNorm& norm, const Tensor& x) {
    return norm(x.permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
}

LayerNorm layer_norm(std::int64_t channels) { return LayerNorm(channels, {}, {.epsilon = 1e-6}); }

CNBlock block(std::int64_t c) {
    return {Conv({7, 7}, c, c, {.pad = 3, .groups = c}), layer_norm(c), Dense(c, 4 * c, gelu_erf), Dense(4 * c, c),
            full({c, 1, 1}, 1e-6)};
}

}  // namespace

Tensor CNBlock::operator()(const Tensor& x) const {
    const Tensor y = pwconv2(pwconv1(norm(dwconv(x).permute({0, 2, 3, 1}))));
    return x + layer_scale * y.permute({0, 3, 1, 2});
}

void CNBlock::show(detail::Shower& s) const {
    s.open("SkipConnection");
    s.open("Chain");
    s.layer(dwconv);
    s.item("permutedims((1, 3, 4, 2))");
    s.layer(norm);
    s.layer(pwconv1);
    s.layer(pwconv2);
    s.item("permutedims((1, 4, 2, 3))");
    s.item("LayerScale(" + std::to_string(layer_scale.shape(0)) + ")",
           detail::layer_comment(detail::count_params(layer_scale)));
    s.close();
    s.item("+");
    s.close();
}

Tensor ConvNeXt::operator()(const Tensor& x) const {
    Tensor y = channel_norm(std::get<1>(stem), std::get<0>(stem)(x));
    for (std::size_t i = 0; i < stages.size(); ++i) {
        for (const auto& b : stages[i]) y = b(y);
        if (i < downsamples.size()) y = std::get<1>(downsamples[i])(channel_norm(std::get<0>(downsamples[i]), y));
    }
    return classifier(norm(Flatten()(GlobalMeanPool()(y))));
}

void ConvNeXt::show(detail::Shower& s) const {
    s.open("ConvNeXt");
    s.open("Chain");
    s.layer(std::get<0>(stem));
    s.layer(std::get<1>(stem));
    for (std::size_t i = 0; i < stages.size(); ++i) {
        for (const auto& b : stages[i]) s.layer(b);
        if (i < downsamples.size()) s.layer(std::get<0>(downsamples[i])), s.layer(std::get<1>(downsamples[i]));
    }
    s.close();
    s.open("Chain");
    s.item("GlobalMeanPool()");
    s.item("Flatten()");
    s.layer(norm);
    s.layer(classifier);
    s.close();
    s.close();
}

ConvNeXt convnext_tiny(const ModelOptions& options) {
    if (options.num_classes < 1)
        throw ValueError("convnext_tiny: num_classes must be positive (got " + std::to_string(options.num_classes) +
                         ")");
    const std::int64_t dims[4] = {96, 192, 384, 768}, depths[4] = {3, 3, 9, 3};
    ConvNeXt m{{Conv({4, 4}, 3, dims[0], {.stride = 4}), layer_norm(dims[0])}, {}, {}, layer_norm(dims[3]),
               Dense(dims[3], options.num_classes)};
    for (int i = 0; i < 4; ++i) {
        std::vector<CNBlock> stage;
        for (std::int64_t j = 0; j < depths[i]; ++j) stage.push_back(block(dims[i]));
        m.stages.push_back(std::move(stage));
        if (i < 3) m.downsamples.emplace_back(layer_norm(dims[i]), Conv({2, 2}, dims[i], dims[i + 1], {.stride = 2}));
    }
    return m;
}

std::vector<std::string> trunk(const ConvNeXt&) {
    std::vector<std::string> out;
    for (int i = 0; i <= 7; ++i) out.push_back("features." + std::to_string(i));
    out.push_back("classifier.0");
    return out;
}

}  // namespace fluxion::models
