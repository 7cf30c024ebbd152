// fluxion/models.hpp — ready-made vision models (Metalhead.jl's zoo) whose state names are
// torchvision's, so that torchvision's weights, saved as safetensors, load strictly with fx::load.
//
//   auto m = fx::models::resnet18();                     // ImageNet's 1000 classes, random weights
//   fx::load("resnet18.safetensors", m);                 // torchvision's state_dict (see below)
//   auto small = fx::models::resnet50({.num_classes = 10});
//   std::cout << m;                                      // as Metalhead: layers, counts, the total
//
// Models: resnet18, resnet34, resnet50, wide_resnet50_2 (ResNet; head `fc`), mobilenet_v2
// (MobileNetV2; head `classifier`), vgg11, vgg11_bn, vgg16, vgg16_bn (VGG; head `classifier`),
// mobilenet_v3_small (MobileNetV3; head `classifier`), efficientnet_b0 (EfficientNet; head
// `classifier`), convnext_tiny (ConvNeXt; head `classifier`), vit_b_16 and vit_tiny_16
// (VisionTransformer; head `head`), each checked against torchvision 0.14 by tests/test_models.cpp;
// unet (UNet, milesial/Pytorch-UNet's names; head `outc`), checked against the same architecture
// written in PyTorch (torchvision has none).
//
// Fine-tuning: the head is a public field; replace it, then freeze the trunk in the optimiser.
//   m.fc = fx::Dense(512, 10);                           // a new head for 10 classes
//   auto opt = fx::setup(fx::Adam(1e-3), m);
//   for (auto p : fx::models::trunk(m)) fx::freeze(opt, p);   // only fc trains
//   fx::testmode(m);                                     // BatchNorms use and keep their running statistics
// fx::freeze stops the optimiser only: in train mode every BatchNorm still follows the batches.
// examples/transfer_learning does this on Fashion-MNIST, then thaws the trunk (fx::thaw).
//
// Inputs are images {N, 3, H, W} normalised as torchvision's weights expect. BatchNorm's
// num_batches_tracked (in torchvision's state dicts) has no counterpart in fluxion's BatchNorm:
// fx::load skips it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fluxion/layers/attention.hpp"
#include "fluxion/layers/conv.hpp"
#include "fluxion/layers/dense.hpp"
#include "fluxion/layers/dropout.hpp"
#include "fluxion/layers/normalise.hpp"
#include "fluxion/layers/pooling.hpp"
#include "fluxion/layers/show.hpp"

namespace fluxion::models {

using fluxion::operator<<;  // `std::cout << model` finds fluxion's printing from this namespace

struct ModelOptions {
    std::int64_t num_classes = 1000;
};

// One residual block of a ResNet: torchvision's BasicBlock (two 3×3 convolutions) or, with conv3,
// its Bottleneck (1×1, 3×3, 1×1); relu(block(x) + downsample(x)), downsample being the identity
// where absent. bn1 and bn2 apply relu themselves (bn2 only in a Bottleneck).
struct ResidualBlock {
    Conv conv1, conv2;
    BatchNorm bn1, bn2;
    std::optional<Conv> conv3;
    std::optional<BatchNorm> bn3;
    std::optional<std::tuple<Conv, BatchNorm>> downsample;  // "downsample.0", "downsample.1"

    Tensor operator()(const Tensor& x) const;
    void show(detail::Shower& s) const;
};

// torchvision's ResNet: conv1, bn1 (with relu), 3×3 max pool, four stages of residual blocks,
// global mean pool, fc.
struct ResNet {
    Conv conv1;
    BatchNorm bn1;
    MaxPool maxpool;
    std::vector<ResidualBlock> layer1, layer2, layer3, layer4;
    Dense fc;

    Tensor operator()(const Tensor& x) const;  // {N, 3, H, W} -> {N, num_classes}
    void show(detail::Shower& s) const;
};

ResNet resnet18(const ModelOptions& options = {});
ResNet resnet34(const ModelOptions& options = {});
ResNet resnet50(const ModelOptions& options = {});
ResNet wide_resnet50_2(const ModelOptions& options = {});  // resnet50 with twice the bottleneck width

// The state-name prefixes of everything but the head ("conv1", "bn1", "layer1", ..., "layer4"),
// for fx::freeze.
std::vector<std::string> trunk(const ResNet& model);

// torchvision's MobileNetV2 (width 1): inverted residual blocks of depthwise convolutions with
// relu6 (printed "relu6"). A block is torchvision's `conv` Sequential, named by its indices:
// expand (1×1 conv and BatchNorm, absent where the expansion is 1), depthwise (3×3, groups =
// channels, and BatchNorm), project (1×1 conv), project_bn; x is added where shapes allow.
struct InvertedResidual {
    std::optional<std::tuple<Conv, BatchNorm>> expand;
    std::tuple<Conv, BatchNorm> depthwise;
    Conv project;
    BatchNorm project_bn;
    bool residual;

    Tensor operator()(const Tensor& x) const;
    void show(detail::Shower& s) const;
};

// features.0 is the stem (conv, bn), features.1–17 the blocks, features.18 the last 1×1 (conv, bn);
// then global mean pool, dropout (0.2) and classifier (Dense, "classifier.1" as torchvision's).
struct MobileNetV2 {
    std::tuple<Conv, BatchNorm> stem;
    std::vector<InvertedResidual> blocks;
    std::tuple<Conv, BatchNorm> last;
    Dropout dropout;
    Dense classifier;

    Tensor operator()(const Tensor& x) const;  // {N, 3, H, W} -> {N, num_classes}
    void show(detail::Shower& s) const;
};

MobileNetV2 mobilenet_v2(const ModelOptions& options = {});

// "features.0" ... "features.18", for fx::freeze.
std::vector<std::string> trunk(const MobileNetV2& model);

// torchvision's VGG: 3×3 convolutions (padding 1) with relu, each followed by BatchNorm in the _bn
// variants, 2×2 max pools between stages; an adaptive mean pool to 7×7 (so any input of at least
// 32×32 works), then fc1, fc2 (4096, relu, each followed by dropout 0.5) and classifier. State
// names are torchvision's Sequential indices ("features.0", "classifier.6"), from the functor below.
struct VGG {
    std::vector<Conv> convs;       // relu unless followed by a BatchNorm
    std::vector<BatchNorm> norms;  // one per convolution (with relu) in the _bn variants, else none
    std::vector<bool> pool_after;  // a 2×2 max pool after convolution i
    AdaptiveMeanPool avgpool;
    Dense fc1, fc2;
    Dropout dropout;
    Dense classifier;

    Tensor operator()(const Tensor& x) const;  // {N, 3, H, W} -> {N, num_classes}
    void show(detail::Shower& s) const;
};

VGG vgg11(const ModelOptions& options = {});
VGG vgg11_bn(const ModelOptions& options = {});
VGG vgg16(const ModelOptions& options = {});
VGG vgg16_bn(const ModelOptions& options = {});

// "features", "classifier.0", "classifier.3": everything but the head, for fx::freeze.
std::vector<std::string> trunk(const VGG& model);

// torchvision's SqueezeExcitation: x scaled per channel by fc2(fc1(mean of x over H and W)), fc1
// and fc2 being 1×1 convolutions with their activations (relu and hardσ in MobileNetV3, swish and
// σ in EfficientNet).
struct SqueezeExcitation {
    Conv fc1, fc2;

    Tensor operator()(const Tensor& x) const;
    void show(detail::Shower& s) const;
};

// The inverted residual block with squeeze-excitation of MobileNetV3 and EfficientNet (MBConv):
// torchvision's `block` Sequential, named by its indices: expand (1×1 conv and BatchNorm with the
// activation, absent where the expansion is 1), depthwise (k×k, groups = channels), se (where
// used), project (1×1 conv and BatchNorm); x is added where shapes allow. Each BatchNorm carries
// its activation. Stochastic depth (EfficientNet's) is the identity in test mode and is not kept.
struct MBConv {
    std::optional<std::tuple<Conv, BatchNorm>> expand;
    std::tuple<Conv, BatchNorm> depthwise;
    std::optional<SqueezeExcitation> se;
    std::tuple<Conv, BatchNorm> project;
    bool residual;

    Tensor operator()(const Tensor& x) const;
    void show(detail::Shower& s) const;
};

// torchvision's MobileNetV3 (small, width 1): features.0 the stem (3×3, stride 2, hardswish),
// features.1–11 the blocks, features.12 the last 1×1 (hardswish); global mean pool, hidden
// ("classifier.0", hardswish), dropout (0.2), classifier ("classifier.3"). BatchNorm's epsilon is 1e-3.
struct MobileNetV3 {
    std::tuple<Conv, BatchNorm> stem;
    std::vector<MBConv> blocks;
    std::tuple<Conv, BatchNorm> last;
    Dense hidden;
    Dropout dropout;
    Dense classifier;

    Tensor operator()(const Tensor& x) const;  // {N, 3, H, W} -> {N, num_classes}
    void show(detail::Shower& s) const;
};

MobileNetV3 mobilenet_v3_small(const ModelOptions& options = {});

// "features.0" ... "features.12", "classifier.0", for fx::freeze.
std::vector<std::string> trunk(const MobileNetV3& model);

// torchvision's EfficientNet-B0: features.0 the stem (3×3, stride 2, swish), features.1–7 the
// stages of MBConv blocks ("features.2.1.block.0.0"), features.8 the last 1×1 (swish); global mean
// pool, dropout (0.2) and classifier ("classifier.1").
struct EfficientNet {
    std::tuple<Conv, BatchNorm> stem;
    std::vector<std::vector<MBConv>> stages;
    std::tuple<Conv, BatchNorm> last;
    Dropout dropout;
    Dense classifier;

    Tensor operator()(const Tensor& x) const;  // {N, 3, H, W} -> {N, num_classes}
    void show(detail::Shower& s) const;
};

EfficientNet efficientnet_b0(const ModelOptions& options = {});

// "features.0" ... "features.8", for fx::freeze.
std::vector<std::string> trunk(const EfficientNet& model);

// torchvision's ConvNeXt block (CNBlock): x + layer_scale · pwconv2(pwconv1(norm(dwconv(x)))), the
// 7×7 depthwise convolution on {N, C, H, W}, the LayerNorm and the two Dense (4C, gelu_erf) over
// channels last. State names: "block.0", "block.2", "block.3", "block.5", "layer_scale" ({C, 1, 1}).
// Stochastic depth is the identity in test mode and is not kept.
struct CNBlock {
    Conv dwconv;
    LayerNorm norm;
    Dense pwconv1, pwconv2;
    Tensor layer_scale;

    Tensor operator()(const Tensor& x) const;
    void show(detail::Shower& s) const;
};

// torchvision's ConvNeXt-tiny: features.0 the stem (4×4 conv, stride 4, then a LayerNorm over
// channels), features.1, 3, 5, 7 the stages of CNBlocks, features.2, 4, 6 the downsamples
// (LayerNorm over channels, 2×2 conv, stride 2); global mean pool, norm ("classifier.0") and
// classifier ("classifier.2"). Every LayerNorm's epsilon is 1e-6.
struct ConvNeXt {
    std::tuple<Conv, LayerNorm> stem;
    std::vector<std::vector<CNBlock>> stages;
    std::vector<std::tuple<LayerNorm, Conv>> downsamples;
    LayerNorm norm;
    Dense classifier;

    Tensor operator()(const Tensor& x) const;  // {N, 3, H, W} -> {N, num_classes}
    void show(detail::Shower& s) const;
};

ConvNeXt convnext_tiny(const ModelOptions& options = {});

// "features.0" ... "features.7", "classifier.0", for fx::freeze.
std::vector<std::string> trunk(const ConvNeXt& model);

// torchvision's EncoderBlock of the ViT (pre-norm): y = x + self_attention(ln_1(x)), then
// y + mlp2(mlp1(ln_2(y))), mlp1 with gelu_erf ("mlp.0", "mlp.3"). LayerNorms' epsilon is 1e-6.
struct EncoderBlock {
    LayerNorm ln_1;
    MultiHeadAttention self_attention;
    LayerNorm ln_2;
    Dense mlp1, mlp2;

    Tensor operator()(const Tensor& x) const;  // {N, L, E} -> {N, L, E}
    void show(detail::Shower& s) const;
};

// torchvision's VisionTransformer: conv_proj cuts the image into patches (a conv of patch size and
// stride), the class token is put first, pos_embedding ("encoder.pos_embedding") added, the
// encoder's blocks ("encoder.layers.encoder_layer_0", ...) and LayerNorm ("encoder.ln") applied,
// and the class token's output goes through head ("heads.head"). Images must be image_size square.
struct VisionTransformer {
    Conv conv_proj;
    Tensor class_token;    // {1, 1, E}
    Tensor pos_embedding;  // {1, patches + 1, E}
    std::vector<EncoderBlock> layers;
    LayerNorm ln;
    Dense head;

    Tensor operator()(const Tensor& x) const;  // {N, 3, image_size, image_size} -> {N, num_classes}
    void show(detail::Shower& s) const;
};

struct VisionTransformerOptions {
    std::int64_t image_size = 224, patch_size = 16;
    std::int64_t layers = 12, heads = 12, hidden = 768, mlp = 3072;
    std::int64_t num_classes = 1000;
};

VisionTransformer vision_transformer(const VisionTransformerOptions& options);
VisionTransformer vit_b_16(const ModelOptions& options = {});     // ViT-B/16: 12 layers, 12 heads, 768, mlp 3072
VisionTransformer vit_tiny_16(const ModelOptions& options = {});  // ViT-Ti/16: 12 layers, 3 heads, 192, mlp 768

// "conv_proj", "class_token", "encoder": everything but the head, for fx::freeze.
std::vector<std::string> trunk(const VisionTransformer& model);

// The U-Net of Ronneberger et al. (2015) with BatchNorm, as milesial/Pytorch-UNet builds it (the
// most used PyTorch U-Net; its state_dict loads strictly). DoubleConv: (3×3 conv without bias,
// padding 1, then BatchNorm with relu) twice; state names "double_conv.0", ".1", ".3", ".4".
struct DoubleConv {
    Conv conv1;
    BatchNorm bn1;
    Conv conv2;
    BatchNorm bn2;

    Tensor operator()(const Tensor& x) const;
    void show(detail::Shower& s) const;
};

// A step down: a 2×2 max pool, then a DoubleConv ("maxpool_conv.1").
struct UNetDown {
    DoubleConv conv;

    Tensor operator()(const Tensor& x) const;
    void show(detail::Shower& s) const;
};

// A step up: x doubled in size by `up` (ConvTranspose((2, 2), stride 2), halving the channels) or,
// where `up` is absent, by bilinear upsampling (align_corners); zero-padded to the skip's size
// where the skip's was odd, put after the skip along the channels, then a DoubleConv ("conv").
struct UNetUp {
    std::optional<ConvTranspose> up;
    DoubleConv conv;

    Tensor operator()(const Tensor& x, const Tensor& skip) const;
    void show(detail::Shower& s) const;
};

// inc at full size (width channels), down1–down4 to 1/16 of it (16·width channels, 8·width with
// bilinear), up1–up4 back, each taking the skip of its size, and outc (a 1×1 conv with bias,
// "outc.conv") to n_classes logits per pixel.
struct UNet {
    DoubleConv inc;
    UNetDown down1, down2, down3, down4;
    UNetUp up1, up2, up3, up4;
    Conv outc;

    // {N, n_channels, H, W} -> {N, n_classes, H, W}; H and W at least 16 (four max pools).
    Tensor operator()(const Tensor& x) const;
    void show(detail::Shower& s) const;
};

struct UNetOptions {
    std::int64_t n_channels = 3, n_classes = 2;
    bool bilinear = false;    // bilinear upsampling instead of ConvTranspose (and half the deepest channels)
    std::int64_t width = 64;  // inc's channels; each step down doubles them (milesial's: 64)
};

UNet unet(const UNetOptions& options = {});

// "inc", "down1" ... "down4", "up1" ... "up4": everything but outc, for fx::freeze.
std::vector<std::string> trunk(const UNet& model);

}  // namespace fluxion::models

// Declared by hand: torchvision's names are Sequential indices, not field names.
template <> struct fluxion::functor<fluxion::models::InvertedResidual> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        const int first = x.expand ? 1 : 0;
        if (x.expand) f("conv.0", *x.expand);
        f(first ? "conv.1" : "conv.0", x.depthwise);
        f(first ? "conv.2" : "conv.1", x.project);
        f(first ? "conv.3" : "conv.2", x.project_bn);
    }
};
template <> struct fluxion::functor<fluxion::models::MobileNetV2> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        f("features.0", x.stem);
        for (std::size_t i = 0; i < x.blocks.size(); ++i) f(("features." + std::to_string(i + 1)).c_str(), x.blocks[i]);
        f(("features." + std::to_string(x.blocks.size() + 1)).c_str(), x.last);
        f("classifier.1", x.classifier);
    }
};

template <> struct fluxion::functor<fluxion::models::VGG> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        std::size_t i = 0;  // torchvision's index: conv, [BatchNorm], relu, [max pool]
        for (std::size_t c = 0; c < x.convs.size(); ++c) {
            f(("features." + std::to_string(i++)).c_str(), x.convs[c]);
            if (!x.norms.empty()) f(("features." + std::to_string(i++)).c_str(), x.norms[c]);
            i += x.pool_after[c] ? 2 : 1;
        }
        f("classifier.0", x.fc1);
        f("classifier.3", x.fc2);
        f("classifier.6", x.classifier);
    }
};

template <> struct fluxion::functor<fluxion::models::MBConv> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        int i = 0;
        auto next = [&] { return "block." + std::to_string(i++); };
        if (x.expand) f(next().c_str(), *x.expand);
        f(next().c_str(), x.depthwise);
        if (x.se) f(next().c_str(), *x.se);
        f(next().c_str(), x.project);
    }
};
template <> struct fluxion::functor<fluxion::models::MobileNetV3> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        f("features.0", x.stem);
        for (std::size_t i = 0; i < x.blocks.size(); ++i) f(("features." + std::to_string(i + 1)).c_str(), x.blocks[i]);
        f(("features." + std::to_string(x.blocks.size() + 1)).c_str(), x.last);
        f("classifier.0", x.hidden);
        f("classifier.3", x.classifier);
    }
};
template <> struct fluxion::functor<fluxion::models::EfficientNet> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        f("features.0", x.stem);
        for (std::size_t i = 0; i < x.stages.size(); ++i) f(("features." + std::to_string(i + 1)).c_str(), x.stages[i]);
        f(("features." + std::to_string(x.stages.size() + 1)).c_str(), x.last);
        f("classifier.1", x.classifier);
    }
};

template <> struct fluxion::functor<fluxion::models::CNBlock> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        f("layer_scale", x.layer_scale);
        f("block.0", x.dwconv);
        f("block.2", x.norm);
        f("block.3", x.pwconv1);
        f("block.5", x.pwconv2);
    }
};
template <> struct fluxion::functor<fluxion::models::ConvNeXt> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        f("features.0", x.stem);
        for (std::size_t i = 0; i < x.stages.size(); ++i) {
            f(("features." + std::to_string(2 * i + 1)).c_str(), x.stages[i]);
            if (i < x.downsamples.size()) f(("features." + std::to_string(2 * i + 2)).c_str(), x.downsamples[i]);
        }
        f("classifier.0", x.norm);
        f("classifier.2", x.classifier);
    }
};
template <> struct fluxion::functor<fluxion::models::EncoderBlock> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        f("ln_1", x.ln_1);
        f("self_attention", x.self_attention);
        f("ln_2", x.ln_2);
        f("mlp.0", x.mlp1);
        f("mlp.3", x.mlp2);
    }
};
template <> struct fluxion::functor<fluxion::models::VisionTransformer> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        f("class_token", x.class_token);
        f("conv_proj", x.conv_proj);
        f("encoder.pos_embedding", x.pos_embedding);
        for (std::size_t i = 0; i < x.layers.size(); ++i)
            f(("encoder.layers.encoder_layer_" + std::to_string(i)).c_str(), x.layers[i]);
        f("encoder.ln", x.ln);
        f("heads.head", x.head);
    }
};

template <> struct fluxion::functor<fluxion::models::DoubleConv> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        f("double_conv.0", x.conv1);
        f("double_conv.1", x.bn1);
        f("double_conv.3", x.conv2);
        f("double_conv.4", x.bn2);
    }
};
template <> struct fluxion::functor<fluxion::models::UNetDown> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) { f("maxpool_conv.1", x.conv); }
};
template <> struct fluxion::functor<fluxion::models::UNet> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        f("inc", x.inc);
        f("down1", x.down1);
        f("down2", x.down2);
        f("down3", x.down3);
        f("down4", x.down4);
        f("up1", x.up1);
        f("up2", x.up2);
        f("up3", x.up3);
        f("up4", x.up4);
        f("outc.conv", x.outc);
    }
};

FLUXION_FUNCTOR(fluxion::models::UNetUp, up, conv);
FLUXION_FUNCTOR(fluxion::models::SqueezeExcitation, fc1, fc2);
FLUXION_FUNCTOR(fluxion::models::ResidualBlock, conv1, bn1, conv2, bn2, conv3, bn3, downsample);
FLUXION_FUNCTOR(fluxion::models::ResNet, conv1, bn1, layer1, layer2, layer3, layer4, fc);
