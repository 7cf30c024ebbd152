// test_layers_image.cpp — GroupNorm, InstanceNorm, PixelShuffle, Upsample, the 1-d Conv,
// ConvTranspose, MaxPool and MeanPool and the 3-d ones: outputs and the
// gradients of a checksum of them against PyTorch (tests/reference/torch_layers_image.py) in f64,
// f32 against f64, finite differences, every other device against the CPU, and compiled steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "layer_reference.hpp"
#include "other_devices.hpp"

namespace fx = fluxion;
using fx::Tensor;
using reference::wave;

namespace {

const fx_test::TorchResults& torch_image() {
    static const fx_test::TorchResults results = fx_test::run_torch_script(
        FLUXION_SOURCE_DIR "/tests/reference/torch_layers_image.py", "", "torch_layers_image");
    return results;
}

template <class T> std::string shown(const T& x) {
    std::ostringstream s;
    s << x;
    return s.str();
}

// Σ y_i·cos(0.7 i) over the flattened y: every output element weighs in the gradients differently.
Tensor checksum(const Tensor& y) {
    Tensor flat = y.reshape({-1});
    // The weights in f64 first: 0.7·i in f32 is off by up to 1e-4 at i in the thousands.
    Tensor w = fx::cos(fx::arange(0, double(flat.numel()), 1, {.dtype = fx::DType::f64}) * 0.7);
    return fx::sum(flat * w.to(y.dtype()).to(y.device()));
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    auto g = values(got), w = values(want);
    for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol * (1 + std::abs(w[i]))) << what << " " << i;
}

template <class L> Tensor weight_of(const L& l) {
    if constexpr (requires { l.weight; }) return l.weight;
    return {};
}
template <class L> Tensor bias_of(const L& l) {
    if constexpr (requires { l.bias; }) return l.bias;
    return {};
}

// The layer on x: its output's shape, checksum and first values as kept here (12 and 9 significant
// digits) and, where PyTorch runs, every value and the gradients of the checksum with respect to x,
// weight and bias against the script's case `name`; then f32 against f64, finite differences, and
// every other device against the CPU.
template <class L> void expect_case(const L& layer, const Tensor& x, const std::string& name, const fx::Shape& shape,
                                    double sum, const std::vector<double>& first) {
    const L l64 = reference::f64(layer);
    reference::expect_matches_in(torch_image(), l64(x), name, shape, sum, first);
    auto loss = [](const L& m, const Tensor& v) { return checksum(m(v)); };
    auto [gl, gx] = fx::gradient(loss, l64, x);
    if (fx_test::ran(torch_image())) {
        const auto& script = torch_image().results.at(name);
        fx_test::expect_close(values(gx), script.at("grad_x"), 1e-11, 1e-12, name + " gradient of x");
        if (weight_of(gl).defined()) {
            fx_test::expect_close(values(weight_of(gl)), script.at("grad_weight"), 1e-11, 1e-12, name + " weight");
            fx_test::expect_close(values(bias_of(gl)), script.at("grad_bias"), 1e-11, 1e-12, name + " bias");
        }
    }
    // f32, and finite differences (gradcheck works in f64).
    const L l32 = fx::fmap([](const Tensor& t) { return t.to(fx::DType::f32); }, layer);
    const Tensor x32 = x.to(fx::DType::f32);
    expect_close(l32(x32), l64(x), 1e-5, name + " in f32");
    auto [g32l, g32x] = fx::gradient(loss, l32, x32);
    expect_close(g32x, gx, 1e-4, name + " gradient of x in f32");
    EXPECT_TRUE(fx::testing::gradcheck(loss, layer, x)) << name;
    for (const auto& dev : fx::testing::other_devices(fx::DType::f32)) {
        const L ld = l32 | dev;
        auto [gdl, gdx] = fx::gradient(loss, ld, x32 | dev);
        expect_close(ld(x32 | dev), l32(x32), 1e-5, name + " on " + dev.str());
        expect_close(gdx, g32x, 1e-4, name + " gradient of x on " + dev.str());
        if (weight_of(gl).defined())
            expect_close(weight_of(gdl), weight_of(g32l), 1e-4, name + " weight gradient on " + dev.str());
    }
}

template <class L> L with_affine(L layer) {
    layer.weight = wave({layer.channels()}, 0.31, 1.0);  // f64, as the script's
    layer.bias = wave({layer.channels()}, 0.17, 0.4);
    return layer;
}

const Tensor image = wave({2, 6, 5, 4}, 0.37, 0.1);
const Tensor small = wave({2, 3, 4, 5}, 0.41, 0.3);

// ---- GroupNorm ----

TEST(GroupNorm, MatchesPyTorchWithGradients) {
    expect_case(with_affine(fx::GroupNorm(6, 3)), image, "groupnorm", {2, 6, 5, 4}, -3.0653415286,
                {0.383487642, 0.802826134, 1.14936027});
    expect_case(fx::GroupNorm(6, 2, {.epsilon = 0.5, .affine = false}), wave({3, 6}, 0.53, 0.2), "groupnorm_vectors",
                {3, 6}, -2.04036718688, {-0.527256608, 0.0789747206, 0.448281888});
}

TEST(GroupNorm, PrintsAsFluxAndNamesItsWeightsAsPyTorch) {
    EXPECT_EQ(shown(fx::GroupNorm(32, 4)), "GroupNorm(32, 4)  # 64 parameters");
    EXPECT_EQ(shown(fx::GroupNorm(6, 2, fx::relu, {.epsilon = 0.5, .affine = false})),
              "GroupNorm(6, 2, relu, epsilon=0.5, affine=false)");
    auto st = fx::state(fx::GroupNorm(6, 3));
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0].first, "weight");
    EXPECT_EQ(st[1].first, "bias");
}

TEST(GroupNorm, OneSampleIsNormalisedAsABatchOfOne) {
    auto gn = reference::f64(with_affine(fx::GroupNorm(6, 3)));
    expect_close(gn(image.select(0, 1)), gn(image).select(0, 1), 1e-12, "one sample");
}

TEST(GroupNorm, BadArgumentsAndInputsNameTheLayer) {
    EXPECT_THROW(fx::GroupNorm(6, 4), fx::ValueError);
    EXPECT_THROW(fx::GroupNorm(6, 0), fx::ValueError);
    try {
        fx::GroupNorm(6, 3)(fx::ones({2, 5, 3, 3}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("GroupNorm(6, 3): input has 5 channels, expected 6"), std::string::npos)
            << e.what();
    }
}

// ---- InstanceNorm ----

TEST(InstanceNorm, MatchesPyTorchWithGradients) {
    expect_case(with_affine(fx::InstanceNorm(6, {.affine = true})), image, "instancenorm", {2, 6, 5, 4}, -2.53378909886,
                {0.431842753, 0.870156241, 1.23237099});
}

TEST(InstanceNorm, RunningStatisticsMatchPyTorch) {
    auto in = reference::f64(fx::InstanceNorm(6, {.momentum = 0.3, .track_stats = true}));
    fx::trainmode(in);
    (void)in(image);
    auto kept_mean = std::vector<double>{0.026651265273,   0.0411703469864,  0.0094590260194,
                                         -0.0328738858219, -0.0382925355677, -0.000712292456689};
    auto kept_var = std::vector<double>{0.851559735587, 0.868029709471, 0.841176108336,
                                        0.857754994721, 0.864204878052, 0.839688088222};
    for (std::size_t c = 0; c < 6; ++c) {
        EXPECT_NEAR(values(in.running_mean)[c], kept_mean[c], 1e-11);
        EXPECT_NEAR(values(in.running_var)[c], kept_var[c], 1e-11);
    }
    if (fx_test::ran(torch_image())) {
        const auto& script = torch_image().results.at("instancenorm_tracked");
        fx_test::expect_kept(kept_mean, script.at("running_mean"), 1e-11, "running_mean");
        fx_test::expect_kept(kept_var, script.at("running_var"), 1e-11, "running_var");
    }
    fx::testmode(in);
    reference::expect_matches_in(torch_image(), in(image * 2.0), "instancenorm_tracked", {2, 6, 5, 4}, -5.42333995535,
                                 {0.18748869, 0.952661679, 1.58498751});
    EXPECT_EQ(shown(in), "InstanceNorm(6, momentum=0.3, track_stats=true)  # 0 parameters, plus 12 non-trainable");
    auto st = fx::state(in);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0].first, "running_mean");
    EXPECT_EQ(st[1].first, "running_var");
}

// An empty batch, or images of no pixels, give empty outputs and gradients (they divided by the
// batch's size once, a SIGFPE), and leave InstanceNorm's running statistics as they were.
TEST(InstanceNorm, EmptyBatchesAndEmptyImagesGiveEmptyOutputs) {
    fx::GroupNorm gn(4, 2);
    fx::InstanceNorm in(4, {.track_stats = true});
    fx::LayerNorm ln(4);
    fx::trainmode(in);
    for (const fx::Shape& shape : {fx::Shape{0, 4, 3, 3}, fx::Shape{2, 4, 0, 3}}) {
        SCOPED_TRACE(fx::to_string(shape));
        const Tensor x = fx::zeros(shape);
        EXPECT_EQ(gn(x).shape(), shape);
        auto [g] = fx::gradient([&](const Tensor& v) { return fx::sum(gn(v)); }, x);
        EXPECT_EQ(g.shape(), shape);
        if (shape[0] == 0) {
            EXPECT_EQ(in(x).shape(), shape);
        }
    }
    EXPECT_EQ(in.running_mean.to_vector<float>(), std::vector<float>(4, 0.0f));
    EXPECT_EQ(in.running_var.to_vector<float>(), std::vector<float>(4, 1.0f));
    EXPECT_EQ(ln(fx::zeros({0, 4})).shape(), (fx::Shape{0, 4}));
}

TEST(InstanceNorm, DefaultsAreFluxsAndPyTorchs) {
    fx::InstanceNorm in(4);
    EXPECT_FALSE(in.weight.defined());
    EXPECT_FALSE(in.running_mean.defined());
    EXPECT_EQ(shown(in), "InstanceNorm(4)");
    EXPECT_EQ(shown(fx::InstanceNorm(4, fx::relu, {.affine = true})),
              "InstanceNorm(4, relu, affine=true)  # 8 parameters");
    // Outside a gradient, too, each instance is normalised by its own statistics.
    Tensor y = in(fx::tensor({1, 3, 10, 30, 5, 5, -2, 2}, {4, 2, 1}));  // one image {C, H, W}
    auto v = values(y);
    EXPECT_NEAR(v[0], -1, 1e-5);
    EXPECT_NEAR(v[3], 1, 1e-6);
    EXPECT_NEAR(v[4], 0, 0);
    EXPECT_THROW(in(fx::ones({2, 4})), fx::ShapeError);  // one value per channel
    EXPECT_THROW(in(fx::ones({2, 3, 2, 2})), fx::ShapeError);
}

// ---- PixelShuffle ----

TEST(PixelShuffle, MatchesPyTorchWithGradients) {
    expect_case(fx::PixelShuffle(2), wave({2, 8, 3, 4}, 0.37, 0.1), "pixelshuffle", {2, 2, 6, 8}, 2.23446434729,
                {0.0998334166, -0.985177782, 0.452886285});
    EXPECT_EQ(shown(fx::PixelShuffle(2)), "PixelShuffle(2)");
}

TEST(PixelShuffle, MovesChannelsIntoBlocksInPyTorchsOrder) {
    // Channel c·r² + i·r + j lands at row offset i, column offset j.
    Tensor x = fx::arange(0, 8, 1).reshape({8, 1, 1});
    EXPECT_EQ(fx::PixelShuffle(2)(x).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(fx::PixelShuffle(2)(x).shape(), (fx::Shape{2, 2, 2}));
    EXPECT_THROW(fx::PixelShuffle(3)(x), fx::ShapeError);
    EXPECT_THROW(fx::PixelShuffle(0), fx::ValueError);
}

// ---- Upsample ----

using fx::UpsampleMode;

TEST(Upsample, NearestMatchesPyTorchWithGradients) {
    expect_case(fx::Upsample(UpsampleMode::nearest, {.scale = {2}}), small, "nearest_scale", {2, 3, 8, 10},
                -5.58213267844, {0.295520207, 0.295520207, 0.651833771});
    expect_case(fx::Upsample(UpsampleMode::nearest, {.size = {7, 3}}), small, "nearest_size", {2, 3, 7, 3},
                -4.55007508434, {0.295520207, 0.651833771, 0.999167945});
}

TEST(Upsample, BilinearMatchesPyTorchWithGradients) {
    expect_case(fx::Upsample(UpsampleMode::bilinear, {.scale = {2}}), small, "bilinear_scale", {2, 3, 8, 10},
                -4.58845322225, {0.295520207, 0.384598598, 0.56275538});
    expect_case(fx::Upsample(UpsampleMode::bilinear, {.scale = {1.5}}), small, "bilinear_scale_fraction", {2, 3, 6, 7},
                -4.38765570405, {0.295520207, 0.473676989, 0.69321155});
    expect_case(fx::Upsample(UpsampleMode::bilinear, {.size = {7, 9}, .align_corners = true}), small,
                "bilinear_size_aligned", {2, 3, 7, 9}, -0.492132727454, {0.295520207, 0.473676989, 0.651833771});
    expect_case(fx::Upsample(UpsampleMode::bilinear, {.size = {3, 11}}), small, "bilinear_size", {2, 3, 3, 11},
                0.344373875526, {0.364845731, 0.408557656, 0.517837467});
    expect_case(fx::Upsample(UpsampleMode::bilinear, {.size = {1, 8}, .align_corners = true}), small,
                "bilinear_one_row_aligned", {2, 3, 1, 8}, -1.69084789181, {0.295520207, 0.499127958, 0.687300438});
}

TEST(Upsample, PrintsAsFluxAndRefusesBadArguments) {
    EXPECT_EQ(shown(fx::Upsample(UpsampleMode::nearest, {.scale = {2}})), "Upsample(:nearest, scale = 2)");
    EXPECT_EQ(shown(fx::Upsample(UpsampleMode::bilinear, {.scale = {2, 3}})), "Upsample(:bilinear, scale = (2, 3))");
    EXPECT_EQ(shown(fx::Upsample(UpsampleMode::bilinear, {.size = {7, 9}, .align_corners = true})),
              "Upsample(:bilinear, size = (7, 9), align_corners=true)");
    EXPECT_THROW(fx::Upsample(UpsampleMode::nearest, {}), fx::ValueError);
    EXPECT_THROW(fx::Upsample(UpsampleMode::nearest, {.scale = {2}, .size = {4, 4}}), fx::ValueError);
    EXPECT_THROW(fx::Upsample(UpsampleMode::nearest, {.scale = {2}, .align_corners = true}), fx::ValueError);
    EXPECT_THROW(fx::Upsample(UpsampleMode::bilinear, {.scale = {-1}}), fx::ValueError);
    EXPECT_THROW(fx::Upsample(UpsampleMode::bilinear, {.size = {4}}), fx::ValueError);
    EXPECT_THROW(fx::Upsample(UpsampleMode::nearest, {.scale = {2}})(fx::ones({4, 4})), fx::ShapeError);
    // One image {C, H, W} is resized as a batch of one.
    auto up = fx::Upsample(UpsampleMode::bilinear, {.scale = {2}});
    expect_close(up(small.select(0, 1)), up(small).select(0, 1), 1e-12, "one image");
}

TEST(Upsample, TrilinearAndNearestOnVolumesMatchPyTorchWithGradients) {
    const Tensor v = wave({2, 3, 3, 4, 5}, 0.41, 0.3);
    expect_case(fx::Upsample(UpsampleMode::trilinear, {.scale = {2}}), v, "trilinear_scale", {2, 3, 6, 8, 10},
                -3.26509284491, {0.295520207, 0.384598598, 0.56275538});
    expect_case(fx::Upsample(UpsampleMode::trilinear, {.scale = {1.5, 2.0, 1.3}}), v, "trilinear_scale_fraction",
                {2, 3, 4, 8, 6}, -1.36432461535, {0.295520207, 0.52849446, 0.75686967});
    expect_case(fx::Upsample(UpsampleMode::trilinear, {.size = {5, 7, 3}, .align_corners = true}), v,
                "trilinear_size_aligned", {2, 3, 5, 7, 3}, 2.05533754526, {0.295520207, 0.900100442, 0.932615014});
    expect_case(fx::Upsample(UpsampleMode::nearest, {.size = {5, 6, 7}}), v, "nearest_volume", {2, 3, 5, 6, 7},
                -3.11024657658, {0.295520207, 0.295520207, 0.651833771});
}

TEST(Upsample, TrilinearPrintsAsFluxAndTakesOneVolume) {
    EXPECT_EQ(shown(fx::Upsample(UpsampleMode::trilinear, {.scale = {2}})), "Upsample(:trilinear, scale = 2)");
    EXPECT_EQ(shown(fx::Upsample(UpsampleMode::trilinear, {.size = {5, 7, 3}, .align_corners = true})),
              "Upsample(:trilinear, size = (5, 7, 3), align_corners=true)");
    EXPECT_EQ(shown(fx::Upsample(UpsampleMode::nearest, {.scale = {1, 2, 2}})),
              "Upsample(:nearest, scale = (1, 2, 2))");
    EXPECT_THROW(fx::Upsample(UpsampleMode::trilinear, {.size = {4, 4}}), fx::ValueError);
    EXPECT_THROW(fx::Upsample(UpsampleMode::bilinear, {.scale = {2, 2, 2}}), fx::ValueError);
    try {
        fx::Upsample(UpsampleMode::trilinear, {.scale = {2}})(fx::ones({2, 4, 4}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("Upsample(:trilinear, scale = 2): input has shape {2, 4, 4}; expected "
                                             "{C, D, H, W} or {N, C, D, H, W}"),
                  std::string::npos)
            << e.what();
    }
    const Tensor v = wave({2, 3, 3, 4, 5}, 0.41, 0.3);
    auto up = fx::Upsample(UpsampleMode::trilinear, {.scale = {2}});
    expect_close(up(v.select(0, 1)), up(v).select(0, 1), 1e-12, "one volume");
}

// ---- adaptive and global pools ----

TEST(AdaptivePool, PyTorchWindowsWhereTheSizesDoNotDivide) {
    expect_case(fx::AdaptiveMeanPool({3, 2}), small, "adaptivemeanpool_uneven", {2, 3, 3, 2}, 1.36033154892,
                {0.483820548, 0.27145893, -0.294213549});
    expect_case(fx::AdaptiveMaxPool({3, 2}), small, "adaptivemaxpool_uneven", {2, 3, 3, 2}, 0.57019821807,
                {0.900100442, 0.999167945, 0.711473353});
    expect_case(fx::AdaptiveMaxPool({2, 5}), small, "adaptivemaxpool_divides", {2, 3, 2, 5}, 1.26832237512,
                {0.711473353, 0.651833771, 0.900100442});
    // An output larger than the input repeats cells, as PyTorch's.
    expect_case(fx::AdaptiveMeanPool({6, 7}), small, "adaptivemeanpool_larger", {2, 3, 6, 7}, -4.92688097814,
                {0.295520207, 0.473676989, 0.775967107});
}

TEST(AdaptivePool, FluxWindowsWhereTheSizesDivide) {
    // Flux's rule (window and stride n/m) is PyTorch's where m divides n: the same as MeanPool/MaxPool.
    expect_close(fx::AdaptiveMeanPool({2, 5})(small), fx::MeanPool({2, 1})(small), 1e-15, "mean");
    expect_close(fx::AdaptiveMaxPool({2, 1})(small), fx::MaxPool({2, 5})(small), 0, "max");
}

TEST(GlobalMaxPool, MatchesPyTorchWithGradients) {
    expect_case(fx::GlobalMaxPool(), small, "globalmaxpool", {2, 3, 1, 1}, -0.435791192188,
                {0.999167945, 0.994717339, 0.999539406});
    EXPECT_EQ(shown(fx::GlobalMaxPool()), "GlobalMaxPool()");
    EXPECT_EQ(fx::GlobalMaxPool()(small.select(0, 0)).shape(), (fx::Shape{3, 1, 1}));
    EXPECT_THROW(fx::GlobalMaxPool()(fx::ones({4, 4})), fx::ShapeError);
}

TEST(AdaptivePool, PrintsAsFluxAndNamesItselfInErrors) {
    EXPECT_EQ(shown(fx::AdaptiveMaxPool({7, 7})), "AdaptiveMaxPool((7, 7))");
    EXPECT_THROW(fx::AdaptiveMaxPool({0, 2}), fx::ValueError);
    try {
        fx::AdaptiveMaxPool({2, 2})(fx::ones({3}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("AdaptiveMaxPool((2, 2)): input has shape {3}", 0), 0u) << e.what();
    }
}

// ---- 1-d Conv and pooling ----

const Tensor sequence = wave({2, 4, 9}, 0.37, 0.1);

fx::Conv reference_conv(fx::Conv conv, const fx::Shape& weight) {
    conv.weight = wave(weight, 0.23, 0.5);  // f64, as the script's
    conv.bias = wave({weight[0]}, 1.1, 0.2);
    return conv;
}

TEST(Conv1d, MatchesPyTorchWithGradients) {
    auto conv = fx::Conv(std::array{3}, 4, 6, {.stride = 2, .pad = 1, .dilation = 2, .groups = 2});
    EXPECT_EQ(conv.weight.shape(), (fx::Shape{6, 2, 3}));  // PyTorch's Conv1d layout
    expect_case(reference_conv(conv, {6, 2, 3}), sequence, "conv1d", {2, 6, 4}, -1.94227460082,
                {-0.319869477, -0.581847552, -0.383352421});
    auto same = fx::Conv(std::array{4}, 4, 3, {.pad = fx::SamePad()});
    expect_case(reference_conv(same, {3, 4, 4}), sequence, "conv1d_same", {2, 3, 9}, 0.536504940289,
                {1.72407953, 2.24919756, 2.43311964});
}

TEST(Conv1d, PrintsAsFluxAndTakesOneSequence) {
    EXPECT_EQ(shown(fx::Conv(std::array{3}, 4, 6, fx::relu, {.stride = 2, .pad = 1, .dilation = 2, .groups = 2})),
              "Conv((3,), 4 => 6, relu, pad=1, stride=2, dilation=2, groups=2)  # 42 parameters");
    EXPECT_EQ(shown(fx::Conv(std::array{4}, 4, 3, {.pad = fx::SamePad()})),
              "Conv((4,), 4 => 3, pad=(1, 2))  # 51 parameters");
    auto conv = reference::f64(reference_conv(fx::Conv(std::array{3}, 4, 6, {.pad = 1}), {6, 4, 3}));
    expect_close(conv(sequence.select(0, 1)), conv(sequence).select(0, 1), 1e-12, "one sequence");
    EXPECT_THROW(fx::Conv(std::array{3}, 4, 6, {.stride = {1, 2}}), fx::ValueError);
    EXPECT_THROW(fx::Conv(std::array{3}, 4, 6, {.pad = {1, 2, 3}}), fx::ValueError);
    try {
        conv(fx::ones({2, 5, 9}, {.dtype = fx::DType::f64}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("Conv((3,), 4 => 6, pad=1): input has 5 channels, expected 4"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(conv(fx::ones({2, 4, 3, 3}, {.dtype = fx::DType::f64})), fx::ShapeError);
}

TEST(Pool1d, MatchesPyTorchWithGradients) {
    expect_case(fx::MaxPool(std::array{3}, {.stride = 2, .pad = 1}), sequence, "maxpool1d", {2, 4, 5}, -5.93839041655,
                {0.452886285, 0.935616002, 0.999957646});
    expect_case(fx::MeanPool(std::array{3}, {.stride = 2, .pad = 1}), sequence, "meanpool1d", {2, 4, 5}, -6.25359951777,
                {0.184239901, 0.711048469, 0.954844454});
    EXPECT_EQ(shown(fx::MaxPool(std::array{3}, {.stride = 2, .pad = 1})), "MaxPool((3,), pad=1, stride=2)");
    EXPECT_EQ(shown(fx::MeanPool(std::array{2})), "MeanPool((2,))");
    EXPECT_EQ(fx::MaxPool(std::array{2})(sequence.select(0, 0)).shape(), (fx::Shape{4, 4}));
    EXPECT_THROW(fx::MaxPool(std::array{2}, {.stride = fx::Size2(1, 2)}), fx::ValueError);
    EXPECT_THROW(fx::MaxPool(std::array{2})(fx::ones({1, 2, 3, 4})), fx::ShapeError);
}

TEST(ConvTranspose1d, MatchesPyTorchWithGradients) {
    auto up =
        fx::ConvTranspose(std::array{3}, 4, 6, {.stride = 2, .pad = 1, .dilation = 2, .groups = 2, .output_pad = 1});
    EXPECT_EQ(up.weight.shape(), (fx::Shape{4, 3, 3}));  // PyTorch's ConvTranspose1d layout
    up.weight = wave({4, 3, 3}, 0.23, 0.5);
    up.bias = wave({6}, 1.1, 0.2);
    expect_case(up, sequence, "convtranspose1d", {2, 6, 20}, 10.3055691539, {0.198669331, 0.0560930911, 0.198669331});
    EXPECT_EQ(shown(up),
              "ConvTranspose((3,), 4 => 6, pad=1, stride=2, dilation=2, output_pad=1, groups=2)  # 42 parameters");
    auto same = reference::f64(fx::ConvTranspose(std::array{4}, 4, 3, {.stride = 2, .pad = fx::SamePad()}));
    EXPECT_EQ(same(sequence).shape(), (fx::Shape{2, 3, 18}));
    EXPECT_EQ(same(sequence.select(0, 0)).shape(), (fx::Shape{3, 18}));
    EXPECT_THROW(fx::ConvTranspose(std::array{3}, 4, 6, {.stride = {1, 2}}), fx::ValueError);
    EXPECT_THROW(up(fx::ones({2, 4, 3, 3}, {.dtype = fx::DType::f64})), fx::ShapeError);
}

// ---- 3-d Conv, ConvTranspose and pooling ----

const Tensor volume = wave({2, 4, 4, 5, 6}, 0.37, 0.1);

TEST(Conv3d, MatchesPyTorchWithGradients) {
    auto conv = fx::Conv(std::array{3, 2, 3}, 4, 6, {.stride = 2, .pad = 1, .groups = 2});
    EXPECT_EQ(conv.weight.shape(), (fx::Shape{6, 2, 3, 2, 3}));  // PyTorch's Conv3d layout
    expect_case(reference_conv(conv, {6, 2, 3, 2, 3}), volume, "conv3d", {2, 6, 2, 3, 3}, 2.67632943883,
                {1.68526785, 3.23383343, 3.50642779});
    auto same = fx::Conv(std::array{2, 2, 3}, 4, 3, {.pad = fx::SamePad()});
    EXPECT_EQ(same.pad_front, 0);
    EXPECT_EQ(same.pad_back, 1);
    expect_case(reference_conv(same, {3, 4, 2, 2, 3}), volume, "conv3d_same", {2, 3, 4, 5, 6}, 7.19256386356,
                {0.173310418, 0.36860205, 0.609748496});
}

TEST(Conv3d, PrintsAsFluxAndTakesOneVolume) {
    EXPECT_EQ(shown(fx::Conv(std::array{3, 3, 3}, 4, 6, fx::relu, {.stride = 2, .pad = 1, .dilation = 2, .groups = 2})),
              "Conv((3, 3, 3), 4 => 6, relu, pad=1, stride=2, dilation=2, groups=2)  # 330 parameters");
    EXPECT_EQ(shown(fx::Conv(std::array{2, 2, 3}, 4, 3, {.pad = fx::SamePad(), .bias = false})),
              "Conv((2, 2, 3), 4 => 3, pad=(0, 1, 0, 1, 1, 1); bias=false)  # 144 parameters");
    auto conv = reference::f64(reference_conv(fx::Conv(std::array{3, 3, 3}, 4, 6, {.pad = 1}), {6, 4, 3, 3, 3}));
    expect_close(conv(volume.select(0, 1)), conv(volume).select(0, 1), 1e-12, "one volume");
    EXPECT_THROW(fx::Conv(std::array{3, 3, 3}, 4, 6, {.stride = {1, 2}}), fx::ValueError);
    EXPECT_THROW(fx::Conv(std::array{3, 3, 3}, 4, 6, {.pad = {1, 2}}), fx::ValueError);
    EXPECT_THROW(fx::Conv(std::array{0, 3, 3}, 4, 6), fx::ValueError);
    try {
        conv(fx::ones({2, 5, 4, 4, 4}, {.dtype = fx::DType::f64}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("Conv((3, 3, 3), 4 => 6, pad=1): input has 5 channels, expected 4"),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("{N, 4, D, H, W}"), std::string::npos) << e.what();
    }
    EXPECT_THROW(conv(fx::ones({2, 4, 3, 3}, {.dtype = fx::DType::f64})), fx::ShapeError);
    try {  // too shallow for the kernel: the layer's name and the depth
        reference::f64(fx::Conv(std::array{3, 1, 1}, 4, 6))(fx::ones({4, 2, 5, 5}, {.dtype = fx::DType::f64}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("Conv((3, 1, 1), 4 => 6): conv3d: the padded depth 2", 0), 0u)
            << e.what();
    }
}

TEST(ConvTranspose3d, MatchesPyTorchWithGradients) {
    auto up = fx::ConvTranspose(std::array{3, 2, 3}, 4, 6,
                                {.stride = 2, .pad = 1, .dilation = 2, .groups = 2, .output_pad = 1});
    EXPECT_EQ(up.weight.shape(), (fx::Shape{4, 3, 3, 2, 3}));  // PyTorch's ConvTranspose3d layout
    up.weight = wave({4, 3, 3, 2, 3}, 0.23, 0.5);
    up.bias = wave({6}, 1.1, 0.2);
    expect_case(up, wave({1, 4, 3, 3, 4}, 0.37, 0.1), "convtranspose3d", {1, 6, 8, 6, 10}, -33.9293180439,
                {0.198669331, 0.198669331, 0.198669331});
    EXPECT_EQ(
        shown(up),
        "ConvTranspose((3, 2, 3), 4 => 6, pad=1, stride=2, dilation=2, output_pad=1, groups=2)  # 222 parameters");
    // SamePad: every axis times the stride, output padding where the kernel is even.
    auto same = reference::f64(fx::ConvTranspose(std::array{4, 3, 3}, 4, 2, {.stride = 2, .pad = fx::SamePad()}));
    EXPECT_EQ(same(volume).shape(), (fx::Shape{2, 2, 8, 10, 12}));
    EXPECT_EQ(same(volume.select(0, 0)).shape(), (fx::Shape{2, 8, 10, 12}));
    EXPECT_THROW(fx::ConvTranspose(std::array{3, 3, 3}, 4, 6, {.stride = 2, .output_pad = 2}), fx::ValueError);
    EXPECT_THROW(fx::ConvTranspose(std::array{3, 3, 3}, 4, 6, {.dilation = {2, 1}}), fx::ValueError);
}

TEST(Pool3d, MatchesPyTorchWithGradients) {
    expect_case(fx::MaxPool(std::array{3, 2, 3}, {.stride = 2, .pad = 1}), volume, "maxpool3d", {2, 4, 2, 3, 3},
                -2.74709945144, {0.452886285, 0.935616002, 0.999957646});
    expect_case(fx::MeanPool(std::array{3, 2, 3}, {.stride = 2, .pad = 1}), volume, "meanpool3d", {2, 4, 2, 3, 3},
                2.07991332829, {-0.0703312505, 0.0252145122, 0.177185683});
    EXPECT_EQ(shown(fx::MaxPool(std::array{3, 2, 3}, {.stride = 2, .pad = 1})), "MaxPool((3, 2, 3), pad=1, stride=2)");
    EXPECT_EQ(shown(fx::MeanPool(std::array{2, 2, 2})), "MeanPool((2, 2, 2))");
    EXPECT_EQ(fx::MaxPool(std::array{2, 2, 2})(volume.select(0, 0)).shape(), (fx::Shape{4, 2, 2, 3}));
    EXPECT_THROW(fx::MaxPool(std::array{2, 2, 2}, {.stride = fx::Size2(1, 2)}), fx::ValueError);
    EXPECT_THROW(fx::MeanPool(std::array{2, 2, 2})(fx::ones({2, 3, 4})), fx::ShapeError);
}

// ---- a stride, padding, dilation and output padding per axis (and padding per side) ----

TEST(PerAxis, ConvMatchesPyTorchWithGradients) {
    auto sides = fx::Conv(std::array{3}, 4, 6, {.stride = 2, .pad = {2, 1}});  // 1-d: {left, right}
    EXPECT_EQ(shown(sides), "Conv((3,), 4 => 6, pad=(2, 1), stride=2)  # 78 parameters");
    expect_case(reference_conv(sides, {6, 4, 3}), sequence, "conv1d_sides", {2, 6, 5}, 26.3097499542,
                {0.257922568, 0.457954028, 0.714217415});
    auto axes = fx::Conv(std::array{3, 2, 3}, 4, 6,
                         {.stride = {1, 2, 1}, .pad = {1, 0, 1}, .dilation = {2, 1, 2}, .groups = 2});
    EXPECT_EQ(shown(axes),
              "Conv((3, 2, 3), 4 => 6, pad=(1, 0, 1), stride=(1, 2, 1), dilation=(2, 1, 2), groups=2)"
              "  # 222 parameters");
    EXPECT_EQ(axes.stride_d, 1);
    EXPECT_EQ(axes.stride, fx::Size2(2, 1));
    EXPECT_EQ(axes.dilation_d, 2);
    expect_case(reference_conv(axes, {6, 2, 3, 2, 3}), volume, "conv3d_axes", {2, 6, 2, 2, 4}, 0.803917521804,
                {1.00905483, 1.27584534, 1.23064288});
    // {front, back, top, bottom, left, right}, as Flux's pad of 2N values.
    auto sides3 = fx::Conv(std::array{2, 2, 3}, 4, 3, {.stride = {2, 1, 1}, .pad = {1, 0, 0, 1, 2, 1}});
    EXPECT_EQ(shown(sides3), "Conv((2, 2, 3), 4 => 3, pad=(1, 0, 0, 1, 2, 1), stride=(2, 1, 1))  # 147 parameters");
    expect_case(reference_conv(sides3, {3, 4, 2, 2, 3}), volume, "conv3d_sides", {2, 3, 2, 5, 7}, -7.95676543255,
                {-0.00866528468, 0.248313524, 0.95924258});
    // Flux's Conv((3, 3, 3), 1 => 8, stride=(1, 2, 2)), and SamePad with it: each axis divided by its stride.
    EXPECT_EQ(shown(fx::Conv(std::array{3, 3, 3}, 1, 8, {.stride = {1, 2, 2}})),
              "Conv((3, 3, 3), 1 => 8, stride=(1, 2, 2))  # 224 parameters");
    auto same = reference::f64(fx::Conv(std::array{3, 3, 3}, 4, 2, {.stride = {1, 2, 2}, .pad = fx::SamePad()}));
    EXPECT_EQ(same(volume).shape(), (fx::Shape{2, 2, 4, 3, 3}));
    EXPECT_EQ(fx::outputsize(same, {2, 4, 4, 5, 6}), (fx::Shape{2, 2, 4, 3, 3}));
}

TEST(PerAxis, ConvTransposeMatchesPyTorchWithGradients) {
    auto up = fx::ConvTranspose(
        std::array{3, 2, 3}, 4, 6,
        {.stride = {2, 1, 3}, .pad = {1, 0, 1}, .dilation = {1, 2, 1}, .groups = 2, .output_pad = {1, 0, 2}});
    up.weight = wave({4, 3, 3, 2, 3}, 0.23, 0.5);
    up.bias = wave({6}, 1.1, 0.2);
    EXPECT_EQ(shown(up),
              "ConvTranspose((3, 2, 3), 4 => 6, pad=(1, 0, 1), stride=(2, 1, 3), dilation=(1, 2, 1), "
              "output_pad=(1, 0, 2), groups=2)  # 222 parameters");
    expect_case(up, wave({1, 4, 3, 3, 4}, 0.37, 0.1), "convtranspose3d_axes", {1, 6, 6, 5, 12}, 2.55718291305,
                {0.980600531, 0.882549459, 1.55797956});
    EXPECT_EQ(fx::outputsize(up, {1, 4, 3, 3, 4}), (fx::Shape{1, 6, 6, 5, 12}));
    // SamePad: each axis times its stride, output padding where it needs one.
    auto same =
        reference::f64(fx::ConvTranspose(std::array{3, 4, 3}, 4, 2, {.stride = {1, 2, 2}, .pad = fx::SamePad()}));
    EXPECT_EQ(same(volume).shape(), (fx::Shape{2, 2, 4, 10, 12}));
    auto up1 = fx::ConvTranspose(std::array{3}, 4, 6, {.stride = {2}, .pad = {1, 1}, .output_pad = {1}});
    EXPECT_EQ(shown(up1), "ConvTranspose((3,), 4 => 6, pad=1, stride=2, output_pad=1)  # 78 parameters");
}

TEST(PerAxis, PoolsMatchPyTorchWithGradients) {
    auto max = fx::MaxPool(std::array{1, 3, 2}, {.stride = {1, 2, 1}, .pad = {0, 1, 1}});
    EXPECT_EQ(shown(max), "MaxPool((1, 3, 2), pad=(0, 1, 1), stride=(1, 2, 1))");
    expect_case(max, volume, "maxpool3d_axes", {2, 4, 4, 3, 7}, -2.15726281349, {0.732231444, 0.732231444, 0.74464312});
    auto mean = fx::MeanPool(std::array{2, 3, 2}, {.stride = {2, 1, 2}, .pad = {1, 1, 0}});
    EXPECT_EQ(shown(mean), "MeanPool((2, 3, 2), pad=(1, 1, 0), stride=(2, 1, 2))");
    EXPECT_EQ(mean.depth_stride, 2);
    EXPECT_EQ(mean.depth_pad, 1);
    expect_case(mean, volume, "meanpool3d_axes", {2, 4, 3, 5, 3}, 2.72694048644,
                {0.143445852, 0.123111297, 0.0383817914});
    EXPECT_EQ(fx::outputsize(mean, {2, 4, 4, 5, 6}), (fx::Shape{2, 4, 3, 5, 3}));
    EXPECT_EQ(shown(fx::MaxPool(std::array{3}, {.stride = {2}, .pad = {1}})), "MaxPool((3,), pad=1, stride=2)");
}

// The message of the ValueError that f throws.
template <class F> std::string value_error(F f) {
    try {
        f();
    } catch (const fx::ValueError& e) {
        return e.what();
    }
    return "no ValueError";
}

TEST(PerAxis, BadValuesThrowBeforeDrawingWeights) {
    fx::seed(11);
    const auto first = fx::randn({4}).to_vector<float>();
    fx::seed(11);
    EXPECT_EQ(value_error([] {
                  fx::Conv(std::array{3, 3, 3}, 4, 6, {.stride = {1, 2}});
              }),
              "Conv((3, 3, 3), 4 => 6): stride takes one value for every axis or 3 (one per axis), given 2: (1, 2)");
    EXPECT_EQ(value_error([] {
                  fx::Conv(std::array{3}, 4, 6, {.dilation = {1, 2}});
              }),
              "Conv((3,), 4 => 6): dilation takes one value, given 2: (1, 2)");
    EXPECT_EQ(value_error([] {
                  fx::Conv(std::array{3, 3, 3}, 4, 6, {.stride = {1, -2, 2}});
              }),
              "Conv((3, 3, 3), 4 => 6): stride and dilation must be at least 1");
    EXPECT_EQ(value_error([] {
                  fx::Conv(std::array{3, 3, 3}, 4, 6, {.pad = {1, 1, 0, 0}});
              }),
              "Conv((3, 3, 3), 4 => 6): pad takes one value for every side, 3 (one per axis) or 6 (each axis's "
              "beginning and end), given 4: (1, 1, 0, 0)");
    EXPECT_EQ(
        value_error([] {
            fx::Conv(std::array{3}, 4, 6, {.pad = {1, 2, 3}});
        }),
        "Conv((3,), 4 => 6): pad takes one value for every side, or 2 (its beginning, its end), given 3: (1, 2, 3)");
    EXPECT_EQ(value_error([] {
                  fx::Conv(std::array{3, 3, 3}, 4, 6, {.pad = {0, 0, 1, -1, 0, 0}});
              }),
              "Conv((3, 3, 3), 4 => 6): padding must be >= 0");
    EXPECT_EQ(value_error([] {
                  fx::ConvTranspose(std::array{3, 3, 3}, 4, 6, {.pad = {1, 0, 1, 1, 1, 1}});
              }),
              "ConvTranspose((3, 3, 3), 4 => 6): padding must be the same at both ends of an axis, as PyTorch's");
    EXPECT_EQ(value_error([] {
                  fx::ConvTranspose(std::array{3, 3, 3}, 4, 6, {.stride = {1, 1, 2}, .output_pad = {0, 1, 1}});
              }),
              "ConvTranspose((3, 3, 3), 4 => 6): output_pad must be >= 0 and smaller than the stride or the dilation");
    EXPECT_EQ(value_error([] {
                  fx::ConvTranspose(std::array{3, 3, 3}, 4, 6, {.output_pad = {1, 0}});
              }),
              "ConvTranspose((3, 3, 3), 4 => 6): output_pad takes one value for every axis or 3 (one per axis), given "
              "2: (1, 0)");
    EXPECT_EQ(value_error([] {
                  fx::MaxPool(std::array{2, 2, 2}, {.stride = {1, 2}});
              }),
              "MaxPool((2, 2, 2)): stride takes one value for every axis or 3 (one per axis), given 2: (1, 2)");
    EXPECT_EQ(value_error([] {
                  fx::MeanPool(std::array{2, 2, 2}, {.pad = {0, -1, 0}});
              }),
              "MeanPool((2, 2, 2)): window and stride must be >= 1 and padding >= 0");
    EXPECT_EQ(value_error([] { fx::MeanPool(std::array{2}, {.stride = 0}); }),
              "MeanPool((2,)): window and stride must be >= 1 and padding >= 0");
    // Nothing was drawn from the generator: the next weights are those the seed gives.
    EXPECT_EQ(fx::randn({4}).to_vector<float>(), first);
}

TEST(PerAxis, CompiledStepsMatchEagerSteps) {
    fx::seed(29);
    auto model = fx::Chain(
        fx::Conv(std::array{3, 3, 3}, 2, 4, fx::relu, {.stride = {1, 2, 1}, .pad = {1, 0, 1, 1, 1, 0}}),
        fx::MaxPool(std::array{1, 2, 2}, {.stride = {1, 1, 2}}),
        fx::ConvTranspose(std::array{2, 3, 2}, 4, 2, {.stride = {2, 1, 2}, .pad = {0, 1, 0}, .output_pad = {1, 0, 0}}),
        fx::MeanPool(std::array{2, 1, 2}, {.stride = {2, 1, 1}, .pad = {1, 0, 1}}));
    auto eager = fx::fmap([](const Tensor& t) { return t.clone(); }, model);
    auto lossfn = [](const auto& m, const Tensor& x, const Tensor& y) { return fx::mean(fx::square(m(x) - y)); };
    auto opt = fx::setup(fx::Adam{.eta = 1e-2}, model);
    auto eager_opt = fx::setup(fx::Adam{.eta = 1e-2}, eager);
    auto step = fx::compile(lossfn, model, opt);  // no fall_back: must replay
    Tensor x = fx::randn({2, 2, 4, 5, 6});
    Tensor y = fx::randn(fx::outputsize(model, x.shape()));
    for (int i = 0; i < 3; ++i) {
        const float loss = step(x, y);
        auto [l, grads] = fx::withgradient([&](const decltype(eager)& m) { return lossfn(m, x, y); }, eager);
        fx::update(eager_opt, eager, grads);
        EXPECT_NEAR(loss, l.item(), 1e-5) << "step " << i;
    }
    EXPECT_GT(step.stats(x, y).kernels, 0u);
    auto a = fx::state(model), b = fx::state(eager);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) expect_close(a[i].second, b[i].second, 1e-5, a[i].first);
}

// ---- adaptive and global pools on sequences and volumes ----

TEST(AdaptivePool, SequencesAndVolumesMatchPyTorchWithGradients) {
    expect_case(fx::AdaptiveMeanPool(std::array{4}), sequence, "adaptivemeanpool1d_uneven", {2, 4, 4}, 5.48429930585,
                {0.432454274, 0.893405589, 0.887049602});
    expect_case(fx::AdaptiveMaxPool(std::array{11}), sequence, "adaptivemaxpool1d_larger", {2, 4, 11}, -2.1982508157,
                {0.0998334166, 0.452886285, 0.74464312});
    expect_case(fx::GlobalMeanPool(1), sequence, "globalmeanpool1d", {2, 4, 1}, 0.267139442523,
                {0.60133654, -0.589658542, 0.557111085});
    expect_case(fx::AdaptiveMeanPool(std::array{3, 2, 4}), volume, "adaptivemeanpool3d_uneven", {2, 4, 3, 2, 4},
                -0.0962763982015, {-0.0498826152, -0.0428312486, -0.0130764571});
    expect_case(fx::AdaptiveMaxPool(std::array{3, 2, 4}), volume, "adaptivemaxpool3d_uneven", {2, 4, 3, 2, 4},
                1.75761021565, {0.940340391, 0.999739337, 0.999957646});
    expect_case(fx::GlobalMaxPool(3), volume, "globalmaxpool3d", {2, 4, 1, 1, 1}, -0.739013313449,
                {0.999957646, 0.998381261, 0.994533427});
}

TEST(AdaptivePool, SequencesAndVolumesPrintAsFluxAndTakeOneSample) {
    EXPECT_EQ(shown(fx::AdaptiveMaxPool(std::array{5})), "AdaptiveMaxPool((5,))");
    EXPECT_EQ(shown(fx::AdaptiveMeanPool(std::array{2, 3, 4})), "AdaptiveMeanPool((2, 3, 4))");
    EXPECT_EQ(shown(fx::GlobalMeanPool(3)), "GlobalMeanPool()");
    auto mean1 = reference::f64(fx::AdaptiveMeanPool(std::array{4}));
    expect_close(mean1(sequence.select(0, 1)), mean1(sequence).select(0, 1), 1e-15, "one sequence");
    auto max3 = fx::AdaptiveMaxPool(std::array{3, 2, 4});
    expect_close(max3(volume.select(0, 1)), max3(volume).select(0, 1), 0, "one volume");
    EXPECT_EQ(fx::GlobalMaxPool(1)(sequence.select(0, 0)).shape(), (fx::Shape{4, 1}));
    EXPECT_EQ(fx::GlobalMeanPool(3)(volume.select(0, 0)).shape(), (fx::Shape{4, 1, 1, 1}));
    // {2, 4, 9} is a batch of sequences for the 1-d pools, one image {C, H, W} for the 2-d ones.
    EXPECT_EQ(fx::GlobalMeanPool()(sequence).shape(), (fx::Shape{2, 1, 1}));
    EXPECT_THROW(fx::AdaptiveMaxPool(std::array{0}), fx::ValueError);
    EXPECT_THROW(fx::AdaptiveMeanPool(std::array{2, 0, 2}), fx::ValueError);
    try {
        fx::GlobalMaxPool(4);
        FAIL() << "no ValueError";
    } catch (const fx::ValueError& e) {
        EXPECT_EQ(std::string(e.what()),
                  "GlobalMaxPool(): the spatial axes are 1 (sequences), 2 (images) or 3 (volumes), got 4");
    }
    try {
        fx::AdaptiveMeanPool(std::array{2, 2, 2})(fx::ones({2, 3, 4}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("AdaptiveMeanPool((2, 2, 2)): input has shape {2, 3, 4}", 0), 0u)
            << e.what();
    }
}

// ---- PyTorch's state_dicts ----

// tests/interop/torch_image_layers.py writes nn.GroupNorm's, nn.InstanceNorm2d's and nn.Conv1d's
// state_dicts; fx::load reads them into the layers here, which then give PyTorch's outputs.
TEST(ImageLayers, PyTorchStateDictsLoad) {
    if (!fx_test::torch_importable()) GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3";
    const auto dir = std::filesystem::temp_directory_path() / ("fluxion-image-layers-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    ASSERT_EQ(std::system(
                  ("/usr/bin/python3 " FLUXION_SOURCE_DIR "/tests/interop/torch_image_layers.py '" + dir.string() + "'")
                      .c_str()),
              0);
    auto gn = reference::f64(fx::GroupNorm(6, 3));
    fx::load(dir / "groupnorm.safetensors", gn);
    reference::expect_matches_in(torch_image(), gn(image), "groupnorm", {2, 6, 5, 4}, -3.0653415286,
                                 {0.383487642, 0.802826134, 1.14936027});
    // PyTorch also keeps num_batches_tracked, which InstanceNorm (as BatchNorm) has no use for.
    auto in = reference::f64(fx::InstanceNorm(6, {.momentum = 0.3, .affine = true, .track_stats = true}));
    auto report = fx::load(dir / "instancenorm.safetensors", in, {.strict = false});
    EXPECT_TRUE(report.missing.empty() && report.mismatched.empty());
    EXPECT_EQ(report.unexpected, (std::vector<std::string>{"num_batches_tracked"}));
    auto trained = reference::f64(fx::InstanceNorm(6, {.momentum = 0.3, .track_stats = true}));
    fx::trainmode(trained);
    (void)trained(image);  // the script's training step, here
    expect_close(in.running_mean, trained.running_mean, 1e-12, "running_mean");
    expect_close(in.running_var, trained.running_var, 1e-12, "running_var");
    expect_close(in.weight, wave({6}, 0.31, 1.0), 1e-15, "weight");
    auto conv = reference::f64(fx::Conv(std::array{3}, 4, 6, {.stride = 2, .pad = 1, .dilation = 2, .groups = 2}));
    fx::load(dir / "conv1d.safetensors", conv);
    reference::expect_matches_in(torch_image(), conv(sequence), "conv1d", {2, 6, 4}, -1.94227460082,
                                 {-0.319869477, -0.581847552, -0.383352421});
    auto conv3 = reference::f64(fx::Conv(std::array{3, 2, 3}, 4, 6, {.stride = 2, .pad = 1, .groups = 2}));
    fx::load(dir / "conv3d.safetensors", conv3);
    reference::expect_matches_in(torch_image(), conv3(volume), "conv3d", {2, 6, 2, 3, 3}, 2.67632943883,
                                 {1.68526785, 3.23383343, 3.50642779});
    auto up3 = reference::f64(fx::ConvTranspose(std::array{3, 2, 3}, 4, 6,
                                                {.stride = 2, .pad = 1, .dilation = 2, .groups = 2, .output_pad = 1}));
    fx::load(dir / "convtranspose3d.safetensors", up3);
    reference::expect_matches_in(torch_image(), up3(wave({1, 4, 3, 3, 4}, 0.37, 0.1)), "convtranspose3d",
                                 {1, 6, 8, 6, 10}, -33.9293180439, {0.198669331, 0.198669331, 0.198669331});
    std::filesystem::remove_all(dir);
}

// ---- together, compiled ----

// A decoder block of the layers here: fx::compile replays it with the same parameters as eager steps.
TEST(ImageLayers, CompiledStepsMatchEagerSteps) {
    fx::seed(26);
    auto model = fx::Chain(
        fx::Conv({3, 3}, 2, 8, {.pad = 1}), fx::GroupNorm(8, 2, fx::relu), fx::PixelShuffle(2),
        fx::InstanceNorm(2, {.affine = true}), fx::Upsample(UpsampleMode::bilinear, {.scale = {2}}),
        fx::Upsample(UpsampleMode::nearest, {.size = {5, 7}}),
        [](const Tensor& v) {
            return v.reshape({2, 10, 7});
        },
        fx::Conv(std::array{3}, 10, 10, {.pad = 1}), fx::MaxPool(std::array{2}, {.stride = 1}),
        fx::MeanPool(std::array{2}, {.stride = 1, .pad = 1}),
        [](const Tensor& v) {
            return v.reshape({2, 2, 5, 7});
        });
    auto eager = fx::fmap([](const Tensor& t) { return t.clone(); }, model);
    auto lossfn = [](const auto& m, const Tensor& x, const Tensor& y) { return fx::mean(fx::square(m(x) - y)); };
    auto opt = fx::setup(fx::Adam{.eta = 1e-2}, model);
    auto eager_opt = fx::setup(fx::Adam{.eta = 1e-2}, eager);
    auto step = fx::compile(lossfn, model, opt);  // no fall_back: must replay
    Tensor x = fx::randn({2, 2, 3, 4}), y = fx::randn({2, 2, 5, 7});
    for (int i = 0; i < 3; ++i) {
        const float loss = step(x, y);
        auto [l, grads] = fx::withgradient([&](const decltype(eager)& m) { return lossfn(m, x, y); }, eager);
        fx::update(eager_opt, eager, grads);
        EXPECT_NEAR(loss, l.item(), 1e-5) << "step " << i;
    }
    EXPECT_GT(step.stats(x, y).kernels, 0u);
    auto a = fx::state(model), b = fx::state(eager);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) expect_close(a[i].second, b[i].second, 1e-5, a[i].first);
}

// The adaptive and global pools on sizes that do not divide: compiled steps as eager ones.
TEST(AdaptivePool, CompiledStepsMatchEagerSteps) {
    fx::seed(28);
    auto model = fx::Chain(fx::Conv({3, 3}, 2, 4, fx::relu), fx::AdaptiveMaxPool({3, 4}), fx::AdaptiveMeanPool({2, 3}),
                           fx::GlobalMaxPool(), fx::Flatten());
    auto eager = fx::fmap([](const Tensor& t) { return t.clone(); }, model);
    auto lossfn = [](const auto& m, const Tensor& x, const Tensor& y) { return fx::mean(fx::square(m(x) - y)); };
    auto opt = fx::setup(fx::Adam{.eta = 1e-2}, model);
    auto eager_opt = fx::setup(fx::Adam{.eta = 1e-2}, eager);
    auto step = fx::compile(lossfn, model, opt);  // no fall_back: must replay
    Tensor x = fx::randn({2, 2, 9, 7}), y = fx::randn({2, 4});
    for (int i = 0; i < 3; ++i) {
        const float loss = step(x, y);
        auto [l, grads] = fx::withgradient([&](const decltype(eager)& m) { return lossfn(m, x, y); }, eager);
        fx::update(eager_opt, eager, grads);
        EXPECT_NEAR(loss, l.item(), 1e-5) << "step " << i;
    }
    auto a = fx::state(model), b = fx::state(eager);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) expect_close(a[i].second, b[i].second, 1e-5, a[i].first);
}

// The 3-d layers, trilinear Upsample, the 1-d transpose and the 1-d and 3-d adaptive and global
// pools: fx::compile replays them as eager steps.
TEST(VolumeLayers, CompiledStepsMatchEagerSteps) {
    fx::seed(27);
    auto model = fx::Chain(
        fx::Conv(std::array{3, 3, 3}, 2, 4, fx::relu, {.pad = 1, .groups = 2}), fx::MaxPool(std::array{2, 2, 2}),
        fx::ConvTranspose(std::array{3, 2, 2}, 4, 2, {.stride = 2, .pad = fx::SamePad()}),
        fx::MeanPool(std::array{2, 2, 2}), fx::Upsample(UpsampleMode::trilinear, {.scale = {2}}),
        [](const Tensor& v) {
            return v.reshape({2, 8, 24});
        },
        fx::ConvTranspose(std::array{3}, 8, 2, {.stride = 2, .pad = 1, .output_pad = 1}),
        fx::AdaptiveMaxPool(std::array{5}), fx::AdaptiveMeanPool(std::array{31}),
        [](const Tensor& s) { return s.reshape({2, 2, 31, 1, 1}); }, fx::AdaptiveMeanPool(std::array{5, 1, 2}),
        [](const Tensor& v) {  // {2, 2, 5, 1, 2} -> {2, 2, 1}
            return fx::GlobalMaxPool(3)(v).reshape({2, 2, 1}) + fx::GlobalMeanPool(1)(v.reshape({2, 2, 10}));
        });
    auto eager = fx::fmap([](const Tensor& t) { return t.clone(); }, model);
    auto lossfn = [](const auto& m, const Tensor& x, const Tensor& y) { return fx::mean(fx::square(m(x) - y)); };
    auto opt = fx::setup(fx::Adam{.eta = 1e-2}, model);
    auto eager_opt = fx::setup(fx::Adam{.eta = 1e-2}, eager);
    auto step = fx::compile(lossfn, model, opt);  // no fall_back: must replay
    Tensor x = fx::randn({2, 2, 4, 4, 6}), y = fx::randn({2, 2, 1});
    for (int i = 0; i < 3; ++i) {
        const float loss = step(x, y);
        auto [l, grads] = fx::withgradient([&](const decltype(eager)& m) { return lossfn(m, x, y); }, eager);
        fx::update(eager_opt, eager, grads);
        EXPECT_NEAR(loss, l.item(), 1e-5) << "step " << i;
    }
    EXPECT_GT(step.stats(x, y).kernels, 0u);
    auto a = fx::state(model), b = fx::state(eager);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) expect_close(a[i].second, b[i].second, 1e-5, a[i].first);
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
