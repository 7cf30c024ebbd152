// test_layers_transformer.cpp — TransformerEncoder (a stack) and TransformerDecoderLayer /
// TransformerDecoder against PyTorch's (tests/reference/torch_transformer.py): the same state names,
// then with the same weights the same outputs and input gradients, masks included; printing, errors
// and every other device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "layer_reference.hpp"
#include "other_devices.hpp"
#include "torch_reference.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

using reference::wave;  // the reference scripts' inputs: sin(a·i + b)

// The script's weights: parameter i in sorted-name order is wave(shape, 0.1 + 0.01 i, 0.3 i) / 2.
template <class M> std::vector<std::string> fill(M& model) {
    std::vector<std::string> names;
    fx::visit_tensors(model, [&](const std::string& p, const Tensor&) { names.push_back(p); });
    std::sort(names.begin(), names.end());
    fx::visit_tensors(model, [&](const std::string& p, Tensor& t) {
        const auto i = static_cast<double>(std::find(names.begin(), names.end(), p) - names.begin());
        t = wave(t.shape(), 0.1 + 0.01 * i, 0.3 * i) * 0.5;
    });
    return names;
}

Tensor checksum(const Tensor& y) {
    return fx::sum(y * fx::cos(fx::arange(0, double(y.numel()), 1, {.dtype = fx::DType::f64}) * 0.7).reshape(y.shape()));
}

const fx_test::TorchResults& torch_transformer() {
    static const auto r =
        fx_test::run_torch_script(FLUXION_SOURCE_DIR "/tests/reference/torch_transformer.py", "", "torch_transformer");
    return r;
}

const Tensor tgt = wave({2, 3, 8}, 0.37, 0.1);
const Tensor memory = wave({2, 4, 8}, 0.23, 0.5);
fx::DecoderMasks decoder_masks() {
    return {.self = {.causal = true},
            .memory = {.key_padding = fx::tensor(std::vector<std::uint8_t>{0, 0, 0, 0, 0, 0, 0, 1}, {2, 4})
                                          .to(fx::DType::boolean)}};
}

TEST(TransformerDecoder, MatchesPyTorchWithTheSameNamesAndWeights) {
    for (bool norm_first : {false, true}) {
        const std::string name = norm_first ? "decoder_norm_first" : "decoder";
        fx::TransformerDecoder dec(8, 2, 2, {.feedforward = 16, .dropout = 0, .norm_first = norm_first}, true);
        const auto names = fill(dec);
        EXPECT_EQ(names.size(), 38u) << name;
        const fx::DecoderMasks masks = decoder_masks();
        auto [y, g_tgt, g_mem] = [&] {
            Tensor out;
            auto [gt, gm] = fx::gradient(
                [&](const Tensor& t, const Tensor& m) {
                    out = dec(t, m, masks);
                    return checksum(out);
                },
                tgt, memory);
            return std::tuple{out, gt, gm};
        }();
        EXPECT_EQ(y.shape(), tgt.shape());
        if (!fx_test::ran(torch_transformer())) continue;
        const auto& r = torch_transformer().results.at(name);
        EXPECT_EQ(names, r.at("names").get<std::vector<std::string>>()) << "PyTorch's state names";
        fx_test::expect_close(y.to_vector<double>(), r.at("out"), 1e-10, 1e-12, name + " output");
        fx_test::expect_close(g_tgt.to_vector<double>(), r.at("dtgt"), 1e-9, 1e-11, name + " gradient of tgt");
        fx_test::expect_close(g_mem.to_vector<double>(), r.at("dmemory"), 1e-9, 1e-11, name + " gradient of memory");
    }
}

TEST(TransformerEncoder, AStackMatchesPyTorch) {
    fx::TransformerEncoder enc(8, 2, 3, {.feedforward = 16, .dropout = 0}, true);
    const auto names = fill(enc);
    const fx::AttentionMasks masks{.key_padding = decoder_masks().memory.key_padding};
    Tensor y;
    auto [g] = fx::gradient(
        [&](const Tensor& x) {
            y = enc(x, masks);
            return checksum(y);
        },
        memory);
    EXPECT_EQ(enc.layers.size(), 3u);
    if (!fx_test::ran(torch_transformer())) return;
    const auto& r = torch_transformer().results.at("encoder");
    EXPECT_EQ(names, r.at("names").get<std::vector<std::string>>());
    fx_test::expect_close(y.to_vector<double>(), r.at("out"), 1e-10, 1e-12, "encoder output");
    fx_test::expect_close(g.to_vector<double>(), r.at("dx"), 1e-9, 1e-11, "encoder gradient");
}

TEST(TransformerDecoder, PrintsRefusesAndRunsOnEveryDevice) {
    fx::seed(12);
    fx::TransformerDecoder dec(8, 2, 2, {.feedforward = 16, .dropout = 0});
    EXPECT_EQ(dec.describe(), "TransformerDecoder(2 × TransformerDecoderLayer(8, heads = 2, feedforward = 16))");
    EXPECT_EQ(fx::TransformerEncoder(8, 2, 1, {.feedforward = 16}, true).describe(),
              "TransformerEncoder(1 × TransformerEncoderLayer(8, heads = 2, feedforward = 16), norm)");
    EXPECT_THROW(fx::TransformerDecoder(8, 2, 0), fx::ValueError);
    EXPECT_THROW(dec(tgt.to(fx::DType::f32), memory.to(fx::DType::f32).select(0, 0)), fx::ShapeError);
    ASSERT_TRUE(plugin_path_set);
    const Tensor t = tgt.to(fx::DType::f32), m = memory.to(fx::DType::f32);
    const auto want = dec(t, m, {.self = {.causal = true}}).to_vector<float>();
    for (const auto& d : fx::testing::other_devices()) {
        const auto got = ((dec | d)(t | d, m | d, {.self = {.causal = true}}) | fx::cpu).to_vector<float>();
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << d.str() << " element " << i;
    }
}

}  // namespace
