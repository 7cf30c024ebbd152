// test_layers_embedding.cpp — Embedding's padding row and max_norm, and EmbeddingBag's three modes
// with fixed-size bags and with offsets (an empty bag among them), against PyTorch's embedding and
// embedding_bag (tests/reference/torch_embedding.py): outputs, the weight after the call, gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "layer_reference.hpp"
#include "other_devices.hpp"
#include "torch_reference.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

using reference::wave;  // the reference scripts' inputs: sin(a·i + b)
Tensor ids(std::vector<std::int64_t> v, fx::Shape s) { return fx::tensor(v, s); }

const fx_test::TorchResults& torch_embedding() {
    static const auto r =
        fx_test::run_torch_script(FLUXION_SOURCE_DIR "/tests/reference/torch_embedding.py", "", "torch_embedding");
    return r;
}

// The output, the weight after the call and the weight's gradient of sum(y · cos(0.7 i)), against the script.
template <class L, class F> void expect_case(L layer, F call, const std::string& name) {
    Tensor y;
    auto [g] = fx::gradient(
        [&](const L& l) {
            y = call(l);
            return fx::sum(y * fx::cos(fx::arange(0, double(y.numel()), 1, {.dtype = fx::DType::f64}) * 0.7).reshape(y.shape()));
        },
        layer);
    if (!fx_test::ran(torch_embedding())) return;
    const auto& r = torch_embedding().results.at(name);
    fx_test::expect_close(y.to_vector<double>(), r.at("out"), 1e-14, 1e-15, name + " output");
    fx_test::expect_close(Tensor(layer.weight).to_vector<double>(), r.at("weight"), 1e-14, 1e-15, name + " weight after");
    fx_test::expect_close(Tensor(g.weight).to_vector<double>(), r.at("grad"), 1e-14, 1e-15, name + " gradient");
}

const Tensor idx = ids({0, 1, 2, 1, 5, 0}, {2, 3});

fx::EmbeddingOptions waves(std::optional<std::int64_t> padding, std::optional<double> max_norm) {
    fx::EmbeddingOptions o;
    o.padding_idx = padding;
    o.max_norm = max_norm;
    o.init = [](const fx::Shape& s) { return wave(s, 0.37, 0.1) * 2; };
    return o;
}

TEST(Embedding, ThePaddingRowReadsAsZerosAndLearnsNothing) {
    fx::Embedding e(6, 3, waves(1, std::nullopt));
    const auto w = e.weight.to_vector<double>();
    EXPECT_EQ(w[3], 0.0);
    EXPECT_EQ(w[5], 0.0);
    EXPECT_NE(w[0], 0.0);
    EXPECT_EQ(e.describe(), "Embedding(6 => 3, padding_idx=1)");
    expect_case(e, [](const fx::Embedding& l) { return l(idx); }, "padding");
    EXPECT_EQ(fx::Embedding(6, 3, {.padding_idx = -1}).padding_idx, 5);
    EXPECT_THROW(fx::Embedding(6, 3, {.padding_idx = 6}), fx::ValueError);
}

TEST(Embedding, MaxNormRescalesTheRowsLookedUpInPlace) {
    fx::Embedding e(6, 3, waves(std::nullopt, 1.0));
    const auto before = e.weight.to_vector<double>();
    expect_case(e, [](const fx::Embedding& l) { return l(idx); }, "max_norm");
    // Rows 3 and 4 were not looked up: unchanged.
    const auto after = e.weight.to_vector<double>();
    for (int i = 9; i < 15; ++i) EXPECT_EQ(after[static_cast<std::size_t>(i)], before[static_cast<std::size_t>(i)]);
    for (int row : {0, 1, 2, 5}) {
        double norm = 0;
        for (int j = 0; j < 3; ++j) norm += std::pow(after[static_cast<std::size_t>(row * 3 + j)], 2);
        EXPECT_LE(std::sqrt(norm), 1.0) << "row " << row;
    }
    EXPECT_THROW(fx::Embedding(6, 3, waves(std::nullopt, 0.0)), fx::ValueError);
    // An index out of range is refused before any row is rescaled.
    fx::Embedding fresh(6, 3, waves(std::nullopt, 1.0));
    const auto untouched = fresh.weight.to_vector<double>();
    EXPECT_THROW(fresh(ids({0, 6}, {2})), fx::ValueError);
    EXPECT_EQ(fresh.weight.to_vector<double>(), untouched);
}

TEST(EmbeddingBag, SumMeanAndMaxOverBagsMatchPyTorch) {
    const Tensor flat = ids({0, 2, 5, 1, 1, 3, 4}, {7}), offsets = ids({0, 2, 2, 5}, {4});
    const std::pair<fx::BagMode, const char*> modes[] = {
        {fx::BagMode::sum, "bag_sum"}, {fx::BagMode::mean, "bag_mean"}, {fx::BagMode::max, "bag_max"}};
    for (auto [mode, name] : modes) {
        fx::EmbeddingBag bag(6, 3, mode, [](const fx::Shape& s) { return wave(s, 0.37, 0.1) * 2; });
        const Tensor y = bag(flat, offsets);
        EXPECT_EQ(y.shape(), (fx::Shape{4, 3})) << name;
        const auto v = y.to_vector<double>();
        for (int j = 0; j < 3; ++j) EXPECT_EQ(v[static_cast<std::size_t>(3 + j)], 0.0) << name << ": the empty bag";
        expect_case(bag, [&](const fx::EmbeddingBag& l) { return l(flat, offsets); }, name);
    }
    fx::EmbeddingBag fixed(6, 3, fx::BagMode::mean, [](const fx::Shape& s) { return wave(s, 0.37, 0.1) * 2; });
    EXPECT_EQ(fixed.describe(), "EmbeddingBag(6 => 3, mean)");
    expect_case(fixed, [&](const fx::EmbeddingBag& l) { return l(idx); }, "bag_fixed_mean");
    EXPECT_THROW(fixed(flat), fx::ShapeError) << "1-dimensional indices need offsets";
    EXPECT_THROW(fixed(flat, ids({1, 2}, {2})), fx::ValueError) << "offsets start at 0";
    EXPECT_THROW(fixed(flat, ids({0, 4, 2}, {3})), fx::ValueError) << "offsets ascend";
}

TEST(EmbeddingBag, EveryOtherDeviceMatchesTheCpu) {
    ASSERT_TRUE(plugin_path_set);
    fx::seed(13);
    fx::EmbeddingBag bag(10, 4, fx::BagMode::sum);
    fx::Embedding e(10, 4, {.padding_idx = 0});
    const Tensor flat = ids({0, 2, 5, 1, 9, 3, 4}, {7}), offsets = ids({0, 3, 3}, {3});
    const auto want = bag(flat, offsets).to_vector<float>(), want_e = e(flat).to_vector<float>();
    for (const auto& d : fx::testing::other_devices()) {
        const auto got = ((bag | d)(flat | d, offsets | d) | fx::cpu).to_vector<float>();
        const auto got_e = ((e | d)(flat | d) | fx::cpu).to_vector<float>();
        for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << d.str();
        EXPECT_EQ(got_e, want_e) << d.str();
    }
}

}  // namespace
