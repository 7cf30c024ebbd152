// vit.cpp — torchvision's VisionTransformer from fluxion's layers; state names come from the
// hand-written functors in models.hpp.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "fluxion/error.hpp"
#include "fluxion/models.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::models {

Tensor EncoderBlock::operator()(const Tensor& x) const {
    const Tensor y = x + self_attention(ln_1(x));
    return y + mlp2(mlp1(ln_2(y)));
}

void EncoderBlock::show(detail::Shower& s) const {
    s.open("Chain");
    s.open("SkipConnection");
    s.open("Chain");
    s.layer(ln_1);
    s.layer(self_attention);
    s.close();
    s.item("+");
    s.close();
    s.open("SkipConnection");
    s.open("Chain");
    s.layer(ln_2);
    s.layer(mlp1);
    s.layer(mlp2);
    s.close();
    s.item("+");
    s.close();
    s.close();
}

Tensor VisionTransformer::operator()(const Tensor& x) const {
    const std::int64_t patch = conv_proj.weight.shape(2), hidden = conv_proj.weight.shape(0);
    const std::int64_t patches = pos_embedding.shape(1) - 1;
    const auto side = static_cast<std::int64_t>(std::lround(std::sqrt(double(patches)))) * patch;
    if (x.ndim() != 4 || x.shape(2) != side || x.shape(3) != side)
        throw ShapeError("VisionTransformer: expected images {N, 3, " + std::to_string(side) + ", " +
                         std::to_string(side) + "} (its pos_embedding's size), got " + to_string(x.shape()));
    const std::int64_t n = x.shape(0);
    Tensor y = conv_proj(x).reshape({n, hidden, patches}).permute({0, 2, 1});  // {N, patches, E}
    y = concat({class_token.expand({n, 1, hidden}), y}, 1) + pos_embedding;
    for (const auto& l : layers) y = l(y);
    return head(ln(y).select(1, 0));
}

void VisionTransformer::show(detail::Shower& s) const {
    s.open("ViT");
    s.open("Chain");
    s.layer(conv_proj);
    s.item("ClassTokens(" + std::to_string(class_token.shape(2)) + ")",
           detail::layer_comment(detail::count_params(class_token)));
    s.item("ViPosEmbedding(" + std::to_string(pos_embedding.shape(1)) + ")",
           detail::layer_comment(detail::count_params(pos_embedding)));
    for (const auto& l : layers) s.layer(l);
    s.layer(ln);
    s.close();
    s.open("Chain");
    s.item("selectdim(2, 1)");
    s.layer(head);
    s.close();
    s.close();
}

VisionTransformer vision_transformer(const VisionTransformerOptions& o) {
    const std::string name = "vision_transformer";
    if (o.num_classes < 1)
        throw ValueError(name + ": num_classes must be positive (got " + std::to_string(o.num_classes) + ")");
    if (o.patch_size < 1 || o.image_size % o.patch_size != 0)
        throw ValueError(name + ": image_size (" + std::to_string(o.image_size) +
                         ") must be a multiple of a positive patch_size (" + std::to_string(o.patch_size) + ")");
    if (o.heads < 1 || o.hidden % o.heads != 0)
        throw ValueError(name + ": hidden (" + std::to_string(o.hidden) + ") must be a multiple of heads (" +
                         std::to_string(o.heads) + ")");
    const std::int64_t side = o.image_size / o.patch_size;
    const LayerNormOptions norm{.epsilon = 1e-6};
    VisionTransformer m{Conv({o.patch_size, o.patch_size}, 3, o.hidden, {.stride = o.patch_size}),
                        zeros({1, 1, o.hidden}),
                        randn({1, side * side + 1, o.hidden}) * 0.02f,
                        {},
                        LayerNorm(o.hidden, {}, norm),
                        Dense(o.hidden, o.num_classes)};
    for (std::int64_t i = 0; i < o.layers; ++i)
        m.layers.push_back({LayerNorm(o.hidden, {}, norm), MultiHeadAttention(o.hidden, o.heads),
                            LayerNorm(o.hidden, {}, norm), Dense(o.hidden, o.mlp, gelu_erf), Dense(o.mlp, o.hidden)});
    return m;
}

VisionTransformer vit_b_16(const ModelOptions& o) { return vision_transformer({.num_classes = o.num_classes}); }

VisionTransformer vit_tiny_16(const ModelOptions& o) {
    return vision_transformer({.heads = 3, .hidden = 192, .mlp = 768, .num_classes = o.num_classes});
}

std::vector<std::string> trunk(const VisionTransformer&) { return {"class_token", "conv_proj", "encoder"}; }

}  // namespace fluxion::models
