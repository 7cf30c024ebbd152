// test_layers_conv.cpp — Conv, ConvTranspose, the pools and Flatten: outputs against PyTorch
// (tests/reference/torch_layers.py), one image or a batch, printing, and the errors they raise.
#include <gtest/gtest.h>

#include <sstream>

#include "fluxion/layers.hpp"
#include "layer_reference.hpp"

namespace fx = fluxion;
using fx::Tensor;
using reference::expect_matches;
using reference::wave;

namespace {

template <class T> std::string shown(const T& x) {
    std::ostringstream s;
    s << x;
    return s.str();
}

Tensor input() { return wave({2, 3, 7, 6}, 0.37, 0.1); }

TEST(Conv, HoldsPyTorchLayoutAndPrintsAsFlux) {
    fx::Conv c({5, 5}, 1, 16, fx::relu);
    EXPECT_EQ(c.weight.shape(), (fx::Shape{16, 1, 5, 5}));
    EXPECT_EQ(c.bias.shape(), (fx::Shape{16}));
    EXPECT_EQ(shown(c), "Conv((5, 5), 1 => 16, relu)  # 416 parameters");
    fx::Conv s({3, 3}, 4, 8, {.stride = 2, .pad = 1, .dilation = {1, 2}, .groups = 2, .bias = false});
    EXPECT_EQ(s.weight.shape(), (fx::Shape{8, 2, 3, 3}));
    EXPECT_EQ(shown(s),
              "Conv((3, 3), 4 => 8, pad=1, stride=2, dilation=(1, 2), groups=2; bias=false)  # 144 parameters");
    EXPECT_EQ(shown(fx::Conv({2, 3}, 1, 1, {.pad = fx::SamePad()})),
              "Conv((2, 3), 1 => 1, pad=(0, 1, 1, 1))  # 7 parameters");
}

TEST(Conv, SamePadWithEvenKernelMatchesPyTorch) {
    auto c = reference::f64(fx::Conv({2, 3}, 3, 4, {.pad = fx::SamePad()}));
    c.weight = wave({4, 3, 2, 3}, 0.23, 0.5);
    c.bias = wave({4}, 1.1, 0.2);
    expect_matches(c(input()), "conv_same", {2, 4, 7, 6}, 20.0915147755, {-0.163675305, -0.903005395, -1.44757218});
}

TEST(Conv, StrideDilationAndPaddingMatchPyTorch) {
    auto c = reference::f64(fx::Conv({2, 3}, 3, 4, {.stride = 2, .pad = 1, .dilation = {1, 2}}));
    c.weight = wave({4, 3, 2, 3}, 0.23, 0.5);
    c.bias = wave({4}, 1.1, 0.2);
    expect_matches(c(input()), "conv_strided", {2, 4, 4, 2}, -2.57080142437, {0.535976103, 0.199909318, 0.0727352101});
}

TEST(Conv, GroupsMatchPyTorch) {
    auto c = reference::f64(fx::Conv({3, 3}, 4, 6, {.groups = 2, .bias = false}));
    c.weight = wave({6, 2, 3, 3}, 0.19, 0.7);
    expect_matches(c(wave({2, 4, 5, 5}, 0.41, 0.3)), "conv_groups", {2, 6, 3, 3}, -0.157256673457,
                   {-2.45537603, -2.12312995, -1.43895734});
}

TEST(Conv, OneImageGivesTheSameAsABatchOfOne) {
    fx::seed(5);
    fx::Conv c({3, 3}, 2, 3, fx::relu, {.pad = 1});
    Tensor x = fx::rand({2, 6, 6});
    Tensor one = c(x);
    EXPECT_EQ(one.shape(), (fx::Shape{3, 6, 6}));
    EXPECT_EQ(one.to_vector<float>(), c(x.unsqueeze(0)).squeeze(0).to_vector<float>());
}

TEST(Conv, WrongInputsNameTheLayerAndTheExpectedShape) {
    fx::Conv c({3, 3}, 3, 16);
    try {
        c(fx::ones({2, 5, 8, 8}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("Conv((3, 3), 3 => 16): input has 5 channels, expected 3"), std::string::npos) << m;
        EXPECT_NE(m.find("{N, 3, H, W}"), std::string::npos) << m;
    }
    EXPECT_THROW(c(fx::ones({8, 8})), fx::ShapeError);
    try {
        c(fx::ones({3, 2, 2}));  // smaller than the kernel: the op's error, with the layer's name
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("Conv((3, 3), 3 => 16): conv2d:", 0), 0u) << e.what();
    }
    EXPECT_THROW(fx::Conv({3, 3}, 3, 16, {.groups = 2}), fx::ValueError);
    EXPECT_THROW(fx::Conv({3, 3}, 3, 16, {.stride = 0}), fx::ValueError);
}

TEST(ConvTranspose, SamePadDoublesTheSizeWithStrideTwoAndMatchesPyTorch) {
    auto c = reference::f64(fx::ConvTranspose({4, 4}, 3, 2, {.stride = 2, .pad = fx::SamePad()}));
    EXPECT_EQ(c.pad_h, 1);
    EXPECT_EQ(c.output_pad, fx::Size2(0));
    c.weight = wave({3, 2, 4, 4}, 0.29, 0.4);
    c.bias = wave({2}, 0.9, 0.1);
    expect_matches(c(input()), "convtranspose_same", {2, 2, 14, 12}, 166.248300727,
                   {-0.105228924, 0.771797548, 0.780685459});
    EXPECT_EQ(shown(fx::ConvTranspose({4, 4}, 3, 2, {.stride = 2, .pad = 1})),
              "ConvTranspose((4, 4), 3 => 2, pad=1, stride=2)  # 98 parameters");
}

TEST(ConvTranspose, GroupsDilationAndOutputPaddingMatchPyTorch) {
    auto c = reference::f64(
        fx::ConvTranspose({3, 3}, 4, 6, {.stride = 2, .pad = 1, .dilation = 2, .groups = 2, .output_pad = 1}));
    ASSERT_EQ(c.weight.shape(), (fx::Shape{4, 3, 3, 3}));
    c.weight = wave({4, 3, 3, 3}, 0.31, 0.2);
    c.bias = wave({6}, 0.7, 0.3);
    expect_matches(c(wave({2, 4, 5, 5}, 0.41, 0.3)), "convtranspose_groups", {2, 6, 12, 12}, 6.06404888989,
                   {0.295520207, 0.295520207, 0.295520207});
}

// The layer's output is conv_transpose2d's (checked against PyTorch in the op table) with the
// padding and output padding SamePad resolves to, plus the bias.
void expect_transpose_with(fx::ConvTranspose& layer, const fx::Shape& x_shape, std::int64_t stride, std::int64_t pad,
                           std::int64_t output_pad, const fx::Shape& y_shape) {
    fx::seed(5);
    layer.bias = fx::randn(layer.bias.shape());
    Tensor x = fx::randn(x_shape), xb = x_shape.size() == 3 ? x.unsqueeze(0) : x;
    Tensor want = fx::conv_transpose2d(xb, layer.weight, {.stride = {stride, stride}, .padding = {pad, pad}},
                                       {output_pad, output_pad}) +
                  layer.bias.reshape({1, -1, 1, 1});
    Tensor y = layer(x);
    ASSERT_EQ(y.shape(), y_shape);
    EXPECT_EQ(y.to_vector<float>(), want.reshape(y_shape).to_vector<float>());
}

TEST(ConvTranspose, SamePadKeepsSizeForOddKernelsAndUsesOutputPadForEven) {
    fx::ConvTranspose odd({3, 3}, 1, 1, {.pad = fx::SamePad()});
    expect_transpose_with(odd, {1, 5, 7}, 1, 1, 0, {1, 5, 7});
    fx::ConvTranspose even({3, 3}, 1, 1, {.stride = 2, .pad = fx::SamePad()});
    expect_transpose_with(even, {1, 1, 5, 7}, 2, 1, 1, {1, 1, 10, 14});
    fx::ConvTranspose pointwise({1, 1}, 1, 1, {.stride = 3, .pad = fx::SamePad()});
    expect_transpose_with(pointwise, {1, 2, 3}, 3, 0, 2, {1, 6, 9});
    // An even kernel at stride 1 would need output padding 1, which needs a stride above 1.
    EXPECT_THROW(fx::ConvTranspose({2, 2}, 1, 1, {.pad = fx::SamePad()}), fx::ValueError);
    EXPECT_THROW(fx::ConvTranspose({3, 3}, 1, 1, {.pad = {0, 1, 0, 0}}), fx::ValueError);
    EXPECT_THROW(even(fx::ones({2, 5, 7})), fx::ShapeError);
}

TEST(Pooling, MaxAndMeanWithPaddingMatchPyTorch) {
    fx::MaxPool mp({3, 3}, {.stride = 2, .pad = 1});
    expect_matches(mp(input()), "maxpool_pad", {2, 3, 4, 3}, -0.0208795062957, {0.732231444, 0.935616002, 0.999957646});
    fx::MeanPool ap({3, 3}, {.stride = 2, .pad = 1});
    expect_matches(ap(input()), "meanpool_pad", {2, 3, 4, 3}, 0.458516880201, {0.191261136, 0.262957881, 0.123530198});
    EXPECT_EQ(shown(mp), "MaxPool((3, 3), pad=1, stride=2)");
    EXPECT_EQ(shown(fx::MaxPool({2, 2})), "MaxPool((2, 2))");
}

TEST(Pooling, StrideDefaultsToTheWindow) {
    fx::MaxPool p({2, 2});
    EXPECT_EQ(p.stride, fx::Size2(2));
    Tensor x = fx::arange(0, 16, 1).reshape({1, 4, 4});
    Tensor y = p(x);
    EXPECT_EQ(y.shape(), (fx::Shape{1, 2, 2}));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
    EXPECT_EQ(fx::MeanPool({2, 2})(x).to_vector<float>(), (std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f}));
}

TEST(Pooling, AdaptiveMatchesPyTorchWhenTheSizesDivide) {  // and otherwise: test_layers_image
    fx::AdaptiveMeanPool p({2, 3});
    expect_matches(p(input().slice(2, 0, 6)), "adaptive_2x3", {2, 3, 2, 3}, -0.14369780806,
                   {-0.0407276585, 0.00707203971, 0.0511726165});
    EXPECT_EQ(shown(p), "AdaptiveMeanPool((2, 3))");
    EXPECT_THROW(p(fx::ones({3})), fx::ShapeError);
}

TEST(Pooling, GlobalMeanPoolKeepsUnitSpatialAxes) {
    Tensor x = fx::arange(0, 8, 1).reshape({2, 2, 2});
    Tensor y = fx::GlobalMeanPool()(x);
    EXPECT_EQ(y.shape(), (fx::Shape{2, 1, 1}));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1.5f, 5.5f}));
    EXPECT_EQ(fx::GlobalMeanPool()(x.unsqueeze(0)).shape(), (fx::Shape{1, 2, 1, 1}));
    EXPECT_THROW(fx::GlobalMeanPool()(fx::ones({4})), fx::ShapeError);
}

TEST(Flatten, ImagesToVectorsKeepingTheBatch) {
    fx::Flatten f;
    Tensor x = fx::rand({2, 3, 4, 5});
    EXPECT_EQ(f(x).shape(), (fx::Shape{2, 60}));
    EXPECT_EQ(f(x).to_vector<float>(), x.to_vector<float>());  // row-major order kept, as PyTorch's flatten
    EXPECT_EQ(f(fx::ones({3, 4, 5})).shape(), (fx::Shape{60}));
    EXPECT_EQ(f(fx::ones({7, 9})).shape(), (fx::Shape{7, 9}));
    EXPECT_THROW(f(fx::ones({1, 2, 3, 4, 5})), fx::ShapeError);
}

TEST(ConvChain, TheDesignsModelRunsOnOneImageAndOnABatch) {
    auto model = fx::Chain(fx::Conv({5, 5}, 1, 16, fx::relu), fx::MaxPool({2, 2}), fx::Conv({3, 3}, 16, 8, fx::relu),
                           fx::MaxPool({4, 4}), fx::Flatten(), fx::Dense(32, 10));
    Tensor batch = fx::rand({3, 1, 28, 28});
    Tensor outs = model(batch), one = model(batch.select(0, 1));
    EXPECT_EQ(outs.shape(), (fx::Shape{3, 10}));
    ASSERT_EQ(one.shape(), (fx::Shape{10}));
    // One image gives what the same image gives inside a batch.
    auto a = one.to_vector<float>(), b = outs.select(0, 1).to_vector<float>();
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::abs(b[i]))) << i;
    // And images are independent: another image changes only its own row.
    Tensor changed = batch.clone();
    changed.select(0, 2).copy_(fx::rand({1, 28, 28}));
    EXPECT_EQ(model(changed).select(0, 0).to_vector<float>(), outs.select(0, 0).to_vector<float>());
    EXPECT_NE(model(changed).select(0, 2).to_vector<float>(), outs.select(0, 2).to_vector<float>());
}

}  // namespace
