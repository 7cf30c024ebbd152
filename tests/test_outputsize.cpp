// test_outputsize.cpp — fx::outputsize: the shapes a real forward pass gives, for 1-d, 2-d and 3-d
// layers, on every device; no arithmetic (far faster than the pass); errors that name the layer;
// ordinary computation afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

auto image_model() {
    return fx::Chain(fx::Conv({3, 3}, 3, 8, fx::relu, {.stride = 2, .pad = 1}), fx::GroupNorm(8, 2),
                     fx::MaxPool({2, 2}), fx::Upsample(fx::UpsampleMode::bilinear, {.scale = {1.5}}),
                     fx::AdaptiveMeanPool({5, 3}), fx::Flatten(), fx::Dense(120, 10), fx::softmax);
}

auto volume_model() {
    return fx::Chain(fx::Conv(std::array{3, 3, 3}, 2, 4, fx::relu, {.pad = 1}), fx::MaxPool(std::array{2, 2, 2}),
                     fx::ConvTranspose(std::array{2, 2, 2}, 4, 2, {.stride = 2}),
                     fx::Upsample(fx::UpsampleMode::trilinear, {.size = {3, 5, 7}}));
}

TEST(Outputsize, GivesTheShapesOfARealPass) {
    fx::seed(1);
    auto images = image_model();
    EXPECT_EQ(fx::outputsize(images, {4, 3, 32, 28}), (fx::Shape{4, 10}));
    EXPECT_EQ(fx::outputsize(images, {3, 32, 28}), (fx::Shape{10}));  // one image
    EXPECT_EQ(fx::outputsize(images, {2, 3, 17, 9}), images(fx::randn({2, 3, 17, 9})).shape());
    auto volumes = volume_model();
    EXPECT_EQ(fx::outputsize(volumes, {2, 2, 6, 8, 10}), volumes(fx::randn({2, 2, 6, 8, 10})).shape());
    EXPECT_EQ(fx::outputsize(volumes, {2, 2, 6, 8, 10}), (fx::Shape{2, 2, 3, 5, 7}));
    auto sequences = fx::Chain(fx::Conv(std::array{5}, 28, 16, fx::relu), fx::MaxPool(std::array{2}),
                               fx::ConvTranspose(std::array{4}, 16, 8, {.stride = 2, .pad = 1}));
    EXPECT_EQ(fx::outputsize(sequences, {4, 28, 28}), sequences(fx::randn({4, 28, 28})).shape());
    EXPECT_EQ(fx::outputsize(sequences, {4, 28, 28}), (fx::Shape{4, 8, 24}));
}

TEST(Outputsize, RunsNoArithmetic) {
    fx::seed(2);
    auto model = fx::Chain(fx::Conv({3, 3}, 32, 32, fx::relu, {.pad = 1}), fx::Conv({3, 3}, 32, 32, {.pad = 1}));
    const fx::Shape shape{8, 32, 96, 96};  // 1.4 GFLOP a pass
    auto clock = std::chrono::steady_clock::now;
    auto t0 = clock();
    const fx::Shape out = fx::outputsize(model, shape);
    auto t1 = clock();
    const Tensor y = model(fx::randn(shape));
    auto t2 = clock();
    EXPECT_EQ(out, y.shape());
    RecordProperty("outputsize_ms", std::to_string(std::chrono::duration<double, std::milli>(t1 - t0).count()));
    RecordProperty("pass_ms", std::to_string(std::chrono::duration<double, std::milli>(t2 - t1).count()));
    EXPECT_LT((t1 - t0) * 10, t2 - t1) << "outputsize took " << std::chrono::duration<double>(t1 - t0).count()
                                       << " s, the pass " << std::chrono::duration<double>(t2 - t1).count() << " s";
}

TEST(Outputsize, ShapesThatDoNotFitNameTheLayer) {
    auto model = fx::Chain(fx::Dense(10, 5, fx::relu), fx::Dense(6, 2));
    try {
        fx::outputsize(model, {3, 10});
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("Dense(6 => 2): input has 5 features, expected 6"), std::string::npos)
            << e.what();
    }
    try {
        fx::outputsize(volume_model(), {2, 3, 6, 8, 10});
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("Conv((3, 3, 3), 2 => 4, relu, pad=1): input has 3 channels, expected 2"),
                  std::string::npos)
            << e.what();
    }
    // Afterwards the kernels compute again.
    fx::seed(3);
    Tensor x = fx::randn({3, 10});
    auto good = fx::Chain(fx::Dense(10, 5, fx::relu), fx::Dense(5, 2));
    const auto before = good(x).to_vector<float>();
    EXPECT_EQ(fx::outputsize(good, {3, 10}), (fx::Shape{3, 2}));
    EXPECT_EQ(good(x).to_vector<float>(), before);
    EXPECT_NE(before, std::vector<float>(6, 0.0f));
}

TEST(Outputsize, OnEveryDevice) {
    const auto devices = fx::testing::other_devices(fx::DType::f32);
    RecordProperty("devices", std::to_string(devices.size()));
    for (const auto& dev : devices) {
        auto images = image_model() | dev;
        EXPECT_EQ(fx::outputsize(images, {4, 3, 32, 28}), (fx::Shape{4, 10})) << dev.str();
        auto volumes = volume_model() | dev;
        EXPECT_EQ(fx::outputsize(volumes, {1, 2, 6, 8, 10}), (fx::Shape{1, 2, 3, 5, 7})) << dev.str();
        // Afterwards the device computes again: the CPU's values.
        const Tensor x = fx::randn({1, 2, 6, 8, 10});
        const auto got = (volumes(x | dev) | fx::cpu).to_vector<float>(),
                   want = (volumes | fx::cpu)(x).to_vector<float>();
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << dev.str() << " " << i;
    }
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
