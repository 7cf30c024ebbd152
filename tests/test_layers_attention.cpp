// test_layers_attention.cpp — MultiHeadAttention and TransformerEncoderLayer: outputs and every
// gradient against PyTorch's nn.MultiheadAttention and nn.TransformerEncoderLayer on the same
// weights (moved through safetensors under PyTorch's names; tests/reference/torch_attention.py,
// skipped where Debian's PyTorch cannot be imported), gradients against finite differences in f64,
// every other backend against the CPU, masks, errors and printing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "other_devices.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

bool torch_importable() {
    static const bool ok = std::system((std::string(kPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
    return ok;
}

// A weight per output element, so that no gradient cancels by symmetry.
Tensor weights_like(const Tensor& y) {
    Tensor w = fx::sin(fx::arange(0, double(y.numel()), 1, {.dtype = y.dtype(), .device = y.device()}) * 0.7 + 0.2);
    return w.reshape(y.shape());
}

template <class M> M f64(const M& m) {
    return fx::fmap([](const Tensor& t) { return t.to(fx::DType::f64); }, m);
}

Tensor bools(const std::vector<std::uint8_t>& v, const fx::Shape& shape) {
    return fx::tensor(v, shape).to(fx::DType::boolean);
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what, double tol = 1e-9) {
    ASSERT_EQ(actual.shape(), expected.shape()) << what;
    auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
    for (std::size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], e[i], tol * (1 + std::abs(e[i]))) << what << ", element " << i;
}

// Runs the reference and returns what it wrote.
std::map<std::string, Tensor> torch_reference(const io_test::ScratchDir& dir, const std::string& args) {
    const auto script = std::filesystem::path(FLUXION_SOURCE_DIR) / "tests" / "reference" / "torch_attention.py";
    const std::string command = std::string(kPython) + " '" + script.string() + "' " + args;
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return fx::load_state(dir / "out.safetensors");
}

// Every parameter gradient of `grads` (fluxion's, by PyTorch's name) against the reference's.
template <class M> void expect_parameter_gradients(const M& grads, const std::map<std::string, Tensor>& ref) {
    int compared = 0;
    for (const auto& [name, g] : fx::state(grads)) {
        ASSERT_TRUE(ref.count("grad." + name)) << "PyTorch has no parameter " << name;
        expect_close(g, ref.at("grad." + name), "gradient of " + name);
        ++compared;
    }
    EXPECT_GT(compared, 3);
}

class AttentionVsPyTorch : public ::testing::Test {
protected:
    void SetUp() override {
        if (!torch_importable()) GTEST_SKIP() << kPython << " cannot import torch (Debian's python3-torch)";
    }
};

TEST_F(AttentionVsPyTorch, SelfAttentionWithPaddingAndCausalMasks) {
    io_test::ScratchDir dir;
    fx::seed(1);
    auto mha = f64(fx::MultiHeadAttention(8, 2));
    mha.in_proj_bias = fx::randn({24}, {.dtype = fx::DType::f64}) * 0.1;  // zeros would hide a bias mix-up
    Tensor x = fx::randn({2, 5, 8}, {.dtype = fx::DType::f64});
    Tensor pad = bools({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5});
    fx::AttentionMasks masks{.key_padding = pad, .causal = true};
    Tensor y = mha(x, masks), r = weights_like(y);
    fx::save(dir / "model.safetensors", mha);
    fx::save_state(dir / "in.safetensors",
                   std::map<std::string, Tensor>{{"q", x},
                                                 {"k", x},
                                                 {"v", x},
                                                 {"r", r},
                                                 {"key_padding", pad},
                                                 {"causal", fx::tensor(std::vector<std::int64_t>{1})}});
    auto ref = torch_reference(dir, "mha '" + (dir / "model.safetensors").string() + "' '" +
                                        (dir / "in.safetensors").string() + "' '" + (dir / "out.safetensors").string() +
                                        "' 8 2");
    expect_close(y, ref.at("y"), "output");
    auto [gm, gq, gk, gv] = fx::gradient([&](const fx::MultiHeadAttention& m, const Tensor& q, const Tensor& k,
                                             const Tensor& v) { return fx::sum(m(q, k, v, masks) * r); },
                                         mha, x, x, x);
    expect_close(gq, ref.at("grad.q"), "gradient of the query");
    expect_close(gk, ref.at("grad.k"), "gradient of the key");
    expect_close(gv, ref.at("grad.v"), "gradient of the value");
    expect_parameter_gradients(gm, ref);
}

TEST_F(AttentionVsPyTorch, CrossAttentionWithAMask) {
    io_test::ScratchDir dir;
    fx::seed(2);
    auto mha = f64(fx::MultiHeadAttention(6, 3));
    Tensor q = fx::randn({2, 3, 6}, {.dtype = fx::DType::f64}), k = fx::randn({2, 4, 6}, {.dtype = fx::DType::f64}),
           v = fx::randn({2, 4, 6}, {.dtype = fx::DType::f64});
    Tensor mask = bools({0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1}, {3, 4});
    fx::AttentionMasks masks{.mask = mask};
    Tensor y = mha(q, k, v, masks), r = weights_like(y);
    fx::save(dir / "model.safetensors", mha);
    fx::save_state(dir / "in.safetensors",
                   std::map<std::string, Tensor>{{"q", q}, {"k", k}, {"v", v}, {"r", r}, {"mask", mask}});
    auto ref = torch_reference(dir, "mha '" + (dir / "model.safetensors").string() + "' '" +
                                        (dir / "in.safetensors").string() + "' '" + (dir / "out.safetensors").string() +
                                        "' 6 3");
    expect_close(y, ref.at("y"), "output");
    auto [gm, gq, gk, gv] = fx::gradient([&](const fx::MultiHeadAttention& m, const Tensor& a, const Tensor& b,
                                             const Tensor& c) { return fx::sum(m(a, b, c, masks) * r); },
                                         mha, q, k, v);
    expect_close(gq, ref.at("grad.q"), "gradient of the query");
    expect_close(gk, ref.at("grad.k"), "gradient of the key");
    expect_close(gv, ref.at("grad.v"), "gradient of the value");
    expect_parameter_gradients(gm, ref);
}

void encoder_vs_torch(bool norm_first, fx::Activation activation, const char* torch_activation) {
    io_test::ScratchDir dir;
    fx::seed(norm_first ? 3 : 4);
    auto enc = f64(fx::TransformerEncoderLayer(
        8, 2, {.feedforward = 12, .dropout = 0.0, .activation = activation, .norm_first = norm_first}));
    enc.norm1.weight = fx::randn({8}, {.dtype = fx::DType::f64}) * 0.2 + 1.0;  // not ones: a swap would show
    enc.norm2.bias = fx::randn({8}, {.dtype = fx::DType::f64}) * 0.1;
    Tensor x = fx::randn({2, 4, 8}, {.dtype = fx::DType::f64});
    Tensor pad = bools({0, 0, 0, 1, 0, 0, 0, 0}, {2, 4});
    fx::AttentionMasks masks{.key_padding = pad};
    Tensor y = enc(x, masks), r = weights_like(y);
    fx::save(dir / "model.safetensors", enc);
    fx::save_state(dir / "in.safetensors", std::map<std::string, Tensor>{{"x", x}, {"r", r}, {"key_padding", pad}});
    auto ref = torch_reference(dir, "encoder '" + (dir / "model.safetensors").string() + "' '" +
                                        (dir / "in.safetensors").string() + "' '" + (dir / "out.safetensors").string() +
                                        "' 8 2 12 " + torch_activation + (norm_first ? " 1" : " 0"));
    expect_close(y, ref.at("y"), "output");
    auto [ge, gx] = fx::gradient(
        [&](const fx::TransformerEncoderLayer& m, const Tensor& a) { return fx::sum(m(a, masks) * r); }, enc, x);
    expect_close(gx, ref.at("grad.x"), "gradient of the input");
    expect_parameter_gradients(ge, ref);
}

TEST_F(AttentionVsPyTorch, EncoderLayerPostNorm) { encoder_vs_torch(false, fx::relu, "relu"); }
TEST_F(AttentionVsPyTorch, EncoderLayerPreNormWithGelu) { encoder_vs_torch(true, fx::gelu_erf, "gelu"); }

TEST(Attention, GradientsMatchFiniteDifferences) {
    fx::seed(5);
    fx::MultiHeadAttention mha(4, 2);
    mha.in_proj_bias = fx::randn({12}) * 0.1;
    Tensor q = fx::randn({2, 3, 4}), kv = fx::randn({2, 3, 4});
    fx::AttentionMasks masks{.key_padding = bools({0, 0, 1, 0, 0, 0}, {2, 3}), .causal = true};
    EXPECT_TRUE(fx::testing::gradcheck([&](const fx::MultiHeadAttention& m, const Tensor& a,
                                           const Tensor& b) { return fx::sum(m(a, b, b, masks) * weights_like(a)); },
                                       mha, q, kv));
    fx::TransformerEncoderLayer enc(4, 2, {.feedforward = 6, .dropout = 0.0, .activation = fx::tanh});
    EXPECT_TRUE(fx::testing::gradcheck(
        [](const fx::TransformerEncoderLayer& m, const Tensor& x) { return fx::sum(m(x) * weights_like(x)); }, enc, q));
}

TEST(Attention, OneSampleIsABatchOfOne) {
    fx::seed(6);
    fx::MultiHeadAttention mha(6, 2);
    Tensor x = fx::randn({4, 6});
    Tensor pad = bools({0, 0, 0, 1}, {4});
    Tensor one = mha(x, {.key_padding = pad});
    Tensor batch = mha(x.unsqueeze(0), {.key_padding = pad.unsqueeze(0)});
    EXPECT_EQ(one.shape(), x.shape());
    EXPECT_EQ(one.to_vector<float>(), batch.reshape({4, 6}).to_vector<float>());
}

// Masked keys take no part: changing them changes nothing; a fully masked query row is NaN (PyTorch too).
TEST(Attention, MaskedKeysDoNotMatter) {
    fx::seed(7);
    fx::MultiHeadAttention mha(4, 1);
    Tensor x = fx::randn({1, 3, 4});
    Tensor changed = x.clone();
    changed.slice(1, 2, 3).copy_(fx::randn({1, 1, 4}) * 10);
    fx::AttentionMasks pad{.key_padding = bools({0, 0, 1}, {1, 3})};
    Tensor a = mha(x, x, x, pad), b = mha(x, changed, changed, pad);
    EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
    // Causal: the first query sees only the first key, so later keys cannot change its output.
    Tensor c1 = mha(x, {.causal = true}), c2 = mha(x.slice(1, 0, 1), x.slice(1, 0, 1), x.slice(1, 0, 1));
    auto first = c1.slice(1, 0, 1).to_vector<float>(), alone = c2.to_vector<float>();
    for (std::size_t i = 0; i < first.size(); ++i) EXPECT_NEAR(first[i], alone[i], 1e-6);
    Tensor all = mha(x, {.key_padding = bools({1, 1, 1}, {1, 3})});
    EXPECT_TRUE(std::isnan(all.to_vector<float>()[0]));
}

TEST(Attention, BadInputsAreClearErrors) {
    fx::MultiHeadAttention mha(8, 2);
    EXPECT_THROW(fx::MultiHeadAttention(10, 3), fx::ValueError);
    try {
        mha(fx::randn({2, 5, 6}));
        FAIL() << "expected fx::ShapeError";
    } catch (const fx::ShapeError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("MultiHeadAttention(8, heads = 2)"), std::string::npos) << m;
        EXPECT_NE(m.find("{2, 5, 6}"), std::string::npos) << m;
    }
    Tensor x = fx::randn({2, 5, 8});
    EXPECT_THROW(mha(x, {.key_padding = fx::zeros({2, 5})}), fx::DTypeError);
    EXPECT_THROW(mha(x, {.key_padding = bools(std::vector<std::uint8_t>(10, 0), {5, 2})}), fx::ShapeError);
    EXPECT_THROW(mha(x, x.slice(1, 0, 3), x.slice(1, 0, 3), {.causal = true}), fx::ShapeError);
    EXPECT_THROW(mha(x, x.slice(1, 0, 3), x.slice(1, 0, 4)), fx::ShapeError);
}

TEST(Attention, PrintsLikeALayer) {
    std::ostringstream a, e;
    a << fx::MultiHeadAttention(64, 4, {.dropout = 0.1});
    EXPECT_NE(a.str().find("MultiHeadAttention(64, heads = 4, dropout = 0.1)"), std::string::npos) << a.str();
    EXPECT_NE(a.str().find("16_640 parameters"), std::string::npos) << a.str();  // 3·64·64 + 3·64 + 64·64 + 64
    e << fx::TransformerEncoderLayer(64, 4, {.feedforward = 128});
    EXPECT_NE(e.str().find("TransformerEncoderLayer(64, heads = 4, feedforward = 128)"), std::string::npos) << e.str();
}

TEST(Attention, EveryOtherDeviceMatchesTheCpu) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(8);
        fx::TransformerEncoderLayer enc(8, 2, {.feedforward = 16, .dropout = 0.0});
        Tensor x = fx::randn({2, 5, 8});
        fx::AttentionMasks masks{.key_padding = bools({0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, {2, 5}), .causal = true};
        auto loss = [&](const fx::TransformerEncoderLayer& m, const Tensor& a, const fx::AttentionMasks& mk) {
            return fx::sum(m(a, mk) * weights_like(a));
        };
        auto [g_cpu, gx_cpu] = fx::gradient([&](const auto& m, const Tensor& a) { return loss(m, a, masks); }, enc, x);
        auto there = enc | d;
        fx::AttentionMasks masks_there{.key_padding = masks.key_padding | d, .causal = true};
        auto [g_dev, gx_dev] =
            fx::gradient([&](const auto& m, const Tensor& a) { return loss(m, a, masks_there); }, there, x | d);
        EXPECT_EQ(gx_dev.device(), d);
        expect_close(gx_dev, gx_cpu, d.str() + ": gradient of the input", 1e-4);
        auto sc = fx::state(g_cpu), sd = fx::state(g_dev);
        ASSERT_EQ(sc.size(), sd.size());
        for (std::size_t i = 0; i < sc.size(); ++i)
            expect_close(sd[i].second, sc[i].second, d.str() + ": gradient of " + sc[i].first, 1e-4);
        expect_close(there(x | d, masks_there), enc(x, masks), d.str() + ": output", 1e-5);
    }
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
