// test_layers_image.cpp — GroupNorm and InstanceNorm: outputs and the
// gradients of a checksum of them against PyTorch (tests/reference/torch_layers_image.py) in f64,
// f32 against f64, finite differences, and every other device against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
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
    return fx::sum(flat * fx::cos(fx::arange(0, double(flat.numel()), 1, {.dtype = y.dtype()}) * 0.7).to(y.device()));
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
template <class L>
void expect_case(const L& layer, const Tensor& x, const std::string& name, const fx::Shape& shape, double sum,
                 const std::vector<double>& first) {
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
    expect_case(fx::GroupNorm(6, 2, {.epsilon = 0.5, .affine = false}), wave({3, 6}, 0.53, 0.2),
                "groupnorm_vectors", {3, 6}, -2.04036718688, {-0.527256608, 0.0789747206, 0.448281888});
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
    expect_case(with_affine(fx::InstanceNorm(6, {.affine = true})), image, "instancenorm", {2, 6, 5, 4},
                -2.53378909886, {0.431842753, 0.870156241, 1.23237099});
}

TEST(InstanceNorm, RunningStatisticsMatchPyTorch) {
    auto in = reference::f64(fx::InstanceNorm(6, {.momentum = 0.3, .track_stats = true}));
    fx::trainmode(in);
    (void)in(image);
    auto kept_mean = std::vector<double>{0.026651265273,  0.0411703469864,  0.0094590260194,
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
    reference::expect_matches_in(torch_image(), in(image * 2.0), "instancenorm_tracked", {2, 6, 5, 4},
                                 -5.42333995535, {0.18748869, 0.952661679, 1.58498751});
    EXPECT_EQ(shown(in), "InstanceNorm(6, momentum=0.3, track_stats=true)  # 0 parameters, plus 12 non-trainable");
    auto st = fx::state(in);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0].first, "running_mean");
    EXPECT_EQ(st[1].first, "running_var");
}

TEST(InstanceNorm, DefaultsAreFluxsAndPyTorchs) {
    fx::InstanceNorm in(4);
    EXPECT_FALSE(in.weight.defined());
    EXPECT_FALSE(in.running_mean.defined());
    EXPECT_EQ(shown(in), "InstanceNorm(4)");
    EXPECT_EQ(shown(fx::InstanceNorm(4, fx::relu, {.affine = true})), "InstanceNorm(4, relu, affine=true)  # 8 parameters");
    // Outside a gradient, too, each instance is normalised by its own statistics.
    Tensor y = in(fx::tensor({1, 3, 10, 30, 5, 5, -2, 2}, {4, 2, 1}));  // one image {C, H, W}
    auto v = values(y);
    EXPECT_NEAR(v[0], -1, 1e-5);
    EXPECT_NEAR(v[3], 1, 1e-6);
    EXPECT_NEAR(v[4], 0, 0);
    EXPECT_THROW(in(fx::ones({2, 4})), fx::ShapeError);  // one value per channel
    EXPECT_THROW(in(fx::ones({2, 3, 2, 2})), fx::ShapeError);
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
