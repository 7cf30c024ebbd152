// test_layers_init.cpp — the `init` option of the layers that hold weights (Dense, Conv,
// ConvTranspose, Embedding): each asks its initialiser for its weight in its layout and keeps what
// it returns, and the defaults are the ones layers/init.hpp names.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
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

// ---- the initialisers themselves (Flux's truncated_normal, lecun_normal, orthogonal, sparse_init,
// identity_init): properties that hold for every draw, and moments within five standard errors ----

double mean_of(const std::vector<float>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }
double sd_of(const std::vector<float>& v) {
    const double m = mean_of(v);
    double s = 0;
    for (float x : v) s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size()));
}
double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double Phi(double x) { return 0.5 * std::erfc(-x / M_SQRT2); }

TEST(LayerInit, TruncatedNormalStaysInsideItsBoundsWithTheTruncatedMoments) {
    fx::seed(5);
    const fx::TruncatedNormal d{.mean = 0.5, .std = 1, .lo = 0, .hi = 2};
    const auto v = d({400, 500}).to_vector<float>();
    ASSERT_EQ(v.size(), 200000u);
    EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0f);
    EXPECT_LE(*std::max_element(v.begin(), v.end()), 2.0f);
    const double a = (0 - 0.5) / 1, b = (2 - 0.5) / 1, z = Phi(b) - Phi(a);
    const double mean = 0.5 + (phi(a) - phi(b)) / z;
    const double var = 1 + (a * phi(a) - b * phi(b)) / z - std::pow((phi(a) - phi(b)) / z, 2);
    EXPECT_NEAR(mean_of(v), mean, 5 * std::sqrt(var / 200000.0));
    EXPECT_NEAR(sd_of(v), std::sqrt(var), 0.01);

    const auto standard = fx::truncated_normal({100000}).to_vector<float>();  // N(0, 1) on [-2, 2]
    EXPECT_LE(*std::max_element(standard.begin(), standard.end()), 2.0f);
    EXPECT_GE(*std::min_element(standard.begin(), standard.end()), -2.0f);
    EXPECT_NEAR(sd_of(standard), std::sqrt(1 - 4 * phi(2) / (Phi(2) - Phi(-2))), 0.01);
    fx::seed(5);
    const auto again = d({400, 500}).to_vector<float>();
    EXPECT_EQ(again, v) << "drawn from the one generator: the seed repeats it";
}

TEST(LayerInit, LecunNormalHasTheFanInStandardDeviation) {
    fx::seed(6);
    const auto v = fx::lecun_normal({256, 400}).to_vector<float>();  // fan_in 400: σ = 0.05, bounds ±2 far away
    EXPECT_NEAR(mean_of(v), 0.0, 5 * 0.05 / std::sqrt(double(v.size())));
    EXPECT_NEAR(sd_of(v), 0.05, 0.05 * 0.02);
    const auto conv = fx::lecun_normal({8, 4, 5, 5}).to_vector<float>();  // fan_in 4·25
    EXPECT_NEAR(sd_of(conv), 0.1, 0.1 * 0.1);
}

TEST(LayerInit, TruncatedNormalRefusesBoundsItCouldNotFill) {
    EXPECT_THROW(fx::TruncatedNormal{.std = 0}({3}), fx::ValueError);
    EXPECT_THROW((fx::TruncatedNormal{.lo = 1, .hi = 1}({3})), fx::ValueError);
    try {
        fx::TruncatedNormal{.mean = 0, .std = 1, .lo = 10, .hi = 11}({3});
        FAIL() << "bounds ten deviations away were accepted";
    } catch (const fx::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("would not end"), std::string::npos) << e.what();
    }
}

// W·Wᵀ (wide) or Wᵀ·W (tall) is gain² times the identity.
void expect_orthonormal(const Tensor& w, double gain, const std::string& what) {
    const std::int64_t rows = w.shape(0), cols = fx::numel(w.shape()) / rows;
    const Tensor m = w.reshape({rows, cols}).to(fx::DType::f64);
    const Tensor g = rows <= cols ? fx::matmul(m, fx::transpose(m)) : fx::matmul(fx::transpose(m), m);
    const std::int64_t k = std::min(rows, cols);
    const auto v = g.to_vector<double>();
    for (std::int64_t i = 0; i < k; ++i)
        for (std::int64_t j = 0; j < k; ++j)
            ASSERT_NEAR(v[static_cast<std::size_t>(i * k + j)], i == j ? gain * gain : 0.0, 1e-5)
                << what << " at (" << i << ", " << j << ")";
}

TEST(LayerInit, OrthogonalGivesOrthonormalRowsOrColumns) {
    fx::seed(7);
    expect_orthonormal(fx::orthogonal({30, 50}), 1, "wide {30, 50}");
    expect_orthonormal(fx::orthogonal({50, 30}), 1, "tall {50, 30}");
    expect_orthonormal(fx::orthogonal({8, 2, 3, 3}), 1, "a convolution {8, 2, 3, 3} as {8, 18}");
    expect_orthonormal(fx::Orthogonal{.gain = 2}({16, 16}), 2, "square with gain 2");
    EXPECT_THROW(fx::orthogonal({5}), fx::ShapeError);
    fx::seed(7);
    const auto a = fx::orthogonal({6, 4}).to_vector<float>();
    fx::seed(7);
    EXPECT_EQ(fx::orthogonal({6, 4}).to_vector<float>(), a);
    fx::Dense d(10, 5, {}, true, fx::Orthogonal{.gain = 1});
    expect_orthonormal(d.weight, 1, "a Dense layer's weight");
}

TEST(LayerInit, SparseInitZeroesTheSameShareOfEveryColumn) {
    fx::seed(8);
    const auto init = fx::sparse_init(0.3, 0.01);
    const Tensor w = init({10, 200});
    const auto v = w.to_vector<float>();
    std::vector<float> nonzero;
    for (std::int64_t j = 0; j < 200; ++j) {
        int zeros = 0;
        for (std::int64_t i = 0; i < 10; ++i) {
            const float x = v[static_cast<std::size_t>(i * 200 + j)];
            if (x == 0) ++zeros;
            else nonzero.push_back(x);
        }
        ASSERT_EQ(zeros, 3) << "column " << j << ": ⌈0.3 · 10⌉ zeros";
    }
    EXPECT_NEAR(sd_of(nonzero), 0.01, 0.001);
    EXPECT_THROW(fx::sparse_init(1.5), fx::ValueError);
    EXPECT_THROW(fx::sparse_init(0.1)({2, 3, 4}), fx::ShapeError);
}

TEST(LayerInit, IdentityInitPassesInputsThrough) {
    EXPECT_EQ(fx::identity_init({2, 3}).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
    EXPECT_EQ(fx::identity_init({3}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
    fx::Dense d(4, 4, {}, true, fx::identity_init);
    const Tensor x = fx::randn({3, 4});
    EXPECT_EQ(d(x).to_vector<float>(), x.to_vector<float>());
    // A 3×3 convolution with padding 1 whose kernel is the identity at its centre (PyTorch's dirac_).
    fx::Conv c({3, 3}, 2, 2, {.pad = 1, .init = fx::identity_init});
    const Tensor image = fx::randn({1, 2, 5, 5});
    EXPECT_EQ(c(image).to_vector<float>(), image.to_vector<float>());
    const auto w = fx::identity_init({3, 2, 3, 3}).to_vector<float>();
    EXPECT_EQ(std::accumulate(w.begin(), w.end(), 0.0f), 2.0f) << "min(out, in) ones";
    EXPECT_EQ(w[(0 * 2 + 0) * 9 + 4], 1.0f);
    EXPECT_EQ(w[(1 * 2 + 1) * 9 + 4], 1.0f);
}

}  // namespace
