// test_layers_init.cpp — the `init` option of the layers that hold weights (Dense, Conv,
// ConvTranspose, Embedding): each asks its initialiser for its weight in its layout and keeps what
// it returns, and the defaults are the ones layers/init.hpp names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fluxion/layers.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

// An initialiser that records the shapes it is asked for and returns 0.25, 0.5, 0.75, ...
struct Recording {
    std::vector<fx::Shape> asked;
    fx::Init init() {
        return [this](const fx::Shape& s) {
            asked.push_back(s);
            return fx::arange(1, double(fx::numel(s)) + 1, 1).reshape(s) * 0.25;
        };
    }
};

void expect_weight_from(const Recording& r, const Tensor& weight, const fx::Shape& layout, const std::string& what) {
    ASSERT_EQ(r.asked, std::vector<fx::Shape>{layout}) << what << " asked once, for its weight in its layout";
    EXPECT_EQ(weight.shape(), layout) << what;
    EXPECT_EQ(weight.to_vector<float>(), (fx::arange(1, double(fx::numel(layout)) + 1, 1) * 0.25).to_vector<float>())
        << what << " keeps what its initialiser returned";
}

TEST(LayerInit, EachLayerAsksItsInitialiserForItsWeightInItsLayout) {
    Recording dense, conv, transpose, embedding;
    fx::Dense d(3, 2, fx::relu, true, dense.init());
    expect_weight_from(dense, d.weight, {2, 3}, "Dense");
    EXPECT_EQ(d.bias.to_vector<float>(), (std::vector<float>{0, 0})) << "the bias is zeros, not the initialiser's";
    fx::Conv c({3, 2}, 4, 6, {.groups = 2, .init = conv.init()});
    expect_weight_from(conv, c.weight, {6, 2, 3, 2}, "Conv");
    EXPECT_EQ(c.bias.to_vector<float>(), std::vector<float>(6, 0));
    fx::ConvTranspose t({2, 3}, 4, 6, {.groups = 2, .init = transpose.init()});
    expect_weight_from(transpose, t.weight, {4, 3, 2, 3}, "ConvTranspose");
    EXPECT_EQ(t.bias.to_vector<float>(), std::vector<float>(6, 0));
    fx::Embedding e(5, 3, embedding.init());
    expect_weight_from(embedding, e.weight, {5, 3}, "Embedding");
}

// The same seed gives the named initialiser's draw exactly: the option is used as it is, and the
// defaults are glorot_uniform (Dense, Conv, ConvTranspose) and randn32 (Embedding).
TEST(LayerInit, NamedInitialisersAndTheDefaultsDrawFromTheSeed) {
    // Each side seeds itself, so the order in which EXPECT_EQ evaluates them does not matter.
    auto drawn = [](const fx::Init& init, const fx::Shape& shape) {
        fx::seed(31);
        return init(shape).to_vector<float>();
    };
    auto made = [](auto make) {
        fx::seed(31);
        return make().weight.template to_vector<float>();
    };
    EXPECT_EQ(made([] { return fx::Dense(3, 2, fx::relu, true, fx::kaiming_normal); }),
              drawn(fx::kaiming_normal, {2, 3}));
    EXPECT_EQ(made([] { return fx::Dense(3, 2); }), drawn(fx::glorot_uniform, {2, 3}));
    EXPECT_EQ(made([] {
                  return fx::Conv({3, 3}, 2, 4, {.init = fx::glorot_normal});
              }),
              drawn(fx::glorot_normal, {4, 2, 3, 3}));
    EXPECT_EQ(made([] { return fx::Conv({3, 3}, 2, 4); }), drawn(fx::glorot_uniform, {4, 2, 3, 3}));
    EXPECT_EQ(made([] {
                  return fx::ConvTranspose({2, 2}, 2, 4, {.init = fx::kaiming_uniform});
              }),
              drawn(fx::kaiming_uniform, {2, 4, 2, 2}));
    EXPECT_EQ(made([] { return fx::ConvTranspose({2, 2}, 2, 4); }), drawn(fx::glorot_uniform, {2, 4, 2, 2}));
    EXPECT_EQ(made([] { return fx::Embedding(5, 3); }), drawn(fx::randn32, {5, 3}));
    EXPECT_NE(drawn(fx::glorot_uniform, {2, 3}), drawn(fx::kaiming_uniform, {2, 3})) << "the comparisons can fail";
    EXPECT_EQ(fx::Embedding(5, 3, fx::ones32).weight.to_vector<float>(), std::vector<float>(15, 1));
    EXPECT_EQ(fx::Dense(3, 2, fx::relu, true, fx::zeros32).weight.to_vector<float>(), std::vector<float>(6, 0));
}

}  // namespace
