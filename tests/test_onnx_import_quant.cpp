// test_onnx_import_quant.cpp — fx::onnx::load's quantization operators and the optimisers of
// ai.onnx.preview.training, on graphs written here with ONNX's protocol buffers: a QuantizeLinear ->
// DequantizeLinear round trip against values by hand (ties to even, saturation), QLinearMatMul
// against a float reference, MatMulInteger past f32's exact range, Momentum's step against values
// by hand, TensorScatter's values and gradients (against finite differences), and the refusals'
// messages. ONNX's own node suite (test_onnx_backend) checks them against ONNX's reference outputs.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "onnx_graph_writer.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using io_test::ScratchDir;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

using P = ::onnx::TensorProto;

using fx_test::message_of;
using fx_test::set;

// The operators of opset 21 and of ai.onnx.preview.training.
fx_test::GraphWriter writer() {
    fx_test::GraphWriter g(21);
    g.domain("ai.onnx.preview.training");
    return g;
}

fx::Tensor f32(const std::vector<float>& v) { return fx::tensor(v, {std::int64_t(v.size())}); }

}  // namespace

// x / 2 lands on halves (rounded to even), inside uint8's range and past both of its ends; the zero
// point 10 shifts them, and dequantizing gives back the rounded, saturated values.
TEST(OnnxImportQuant, QuantizeDequantizeRoundTripRoundsHalfToEvenAndSaturates) {
    ScratchDir dir;
    fx_test::GraphWriter g = writer();
    g.input("X").scalar("scale", P::FLOAT, 2.0).scalar("zp", P::UINT8, 10);
    g.node("QuantizeLinear", {"X", "scale", "zp"}, {"Q"});
    g.node("DequantizeLinear", {"Q", "scale", "zp"}, {"Y"});
    const fx::onnx::Model m = g.output("Q").output("Y").load(dir / "round_trip.onnx");
    // x / 2:                 0.5  1.5  2.5  -0.5  -1.5  7   300   -40
    const auto out = m(std::vector<fx::Tensor>{f32({1, 3, 5, -1, -3, 14, 600, -80})});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].dtype(), fx::DType::u8);
    EXPECT_EQ(out[0].to_vector<int>(), (std::vector<int>{10, 12, 12, 10, 8, 17, 255, 0}));
    EXPECT_EQ(out[1].dtype(), fx::DType::f32);
    EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{0, 4, 4, 0, -4, 14, 490, -20}));
}

// int8 per axis: each column has its own scale and zero point, saturated to [-128, 127].
TEST(OnnxImportQuant, QuantizeLinearPerAxisInt8) {
    ScratchDir dir;
    fx_test::GraphWriter g = writer();
    g.input("X").initializer("scale", P::FLOAT, {1.0, 0.5}).initializer("zp", P::INT8, {0, -100});
    set(g.node("QuantizeLinear", {"X", "scale", "zp"}, {"Q"}), "axis", std::int64_t(1));
    const fx::onnx::Model m = g.output("Q").load(dir / "per_axis.onnx");
    const auto q = m(fx::tensor(std::vector<float>{-200.5f, 3.5f, 126.5f, -20.25f}, {2, 2}));
    // column 0: round(x) + 0; column 1: round(2x) - 100.
    EXPECT_EQ(q.to_vector<int>(), (std::vector<int>{-128, -93, 126, -128}));
}

// QLinearMatMul's uint8 x int8 product, requantized to uint8, against the same product computed
// in floating point here.
TEST(OnnxImportQuant, QLinearMatMulMatchesAFloatReference) {
    ScratchDir dir;
    const float as = 0.1f, bs = 0.05f, ys = 0.2f;
    const int azp = 3, bzp = -2, yzp = 100;
    fx_test::GraphWriter g = writer();
    g.input("A", P::UINT8).input("B", P::INT8);
    g.scalar("as", P::FLOAT, as).scalar("azp", P::UINT8, double(azp));
    g.scalar("bs", P::FLOAT, bs).scalar("bzp", P::INT8, double(bzp));
    g.scalar("ys", P::FLOAT, ys).scalar("yzp", P::UINT8, double(yzp));
    g.node("QLinearMatMul", {"A", "as", "azp", "B", "bs", "bzp", "ys", "yzp"}, {"Y"});
    const fx::onnx::Model m = g.output("Y").load(dir / "qlinear_matmul.onnx");
    const std::vector<int> a = {0, 7, 200, 13, 255, 40}, b = {-128, 5, 17, 127, -60, 33};  // 2x3, 3x2
    const auto y = m({fx::tensor(std::vector<std::int64_t>(a.begin(), a.end()), {2, 3}).to(fx::DType::u8),
                      fx::tensor(std::vector<std::int64_t>(b.begin(), b.end()), {3, 2}).to(fx::DType::i32)})[0];
    EXPECT_EQ(y.dtype(), fx::DType::u8);
    std::vector<int> want;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            double real = 0;
            for (int k = 0; k < 3; ++k) real += (a[3 * i + k] - azp) * double(as) * (b[2 * k + j] - bzp) * double(bs);
            want.push_back(int(std::clamp(std::nearbyint(real / ys) + yzp, 0.0, 255.0)));
        }
    EXPECT_EQ(y.to_vector<int>(), want);
}

// A long sum of large 8-bit products (past f32's 2^24), exact as int64 arithmetic gives it.
TEST(OnnxImportQuant, MatMulIntegerIsExactPastF32) {
    ScratchDir dir;
    fx_test::GraphWriter g = writer();
    g.input("A", P::UINT8).input("B", P::UINT8).scalar("azp", P::UINT8, 0).scalar("bzp", P::UINT8, 1);
    g.node("MatMulInteger", {"A", "B", "azp", "bzp"}, {"Y"});
    const fx::onnx::Model m = g.output("Y").load(dir / "matmul_integer.onnx");
    const std::int64_t k = 1001;
    std::vector<std::int64_t> a(static_cast<std::size_t>(k)), b(static_cast<std::size_t>(2 * k));
    for (std::int64_t i = 0; i < k; ++i) a[std::size_t(i)] = 255 - i % 3;
    for (std::int64_t i = 0; i < 2 * k; ++i) b[std::size_t(i)] = 255 - i % 7;
    const auto y =
        m(std::vector<fx::Tensor>{fx::tensor(a, {1, k}).to(fx::DType::u8), fx::tensor(b, {k, 2}).to(fx::DType::u8)})[0];
    EXPECT_EQ(y.dtype(), fx::DType::i32);
    std::vector<std::int64_t> want(2, 0);
    for (std::int64_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < 2; ++j) want[j] += a[std::size_t(i)] * (b[std::size_t(2 * i) + j] - 1);
    EXPECT_GT(want[0], std::int64_t(1) << 24);
    EXPECT_EQ(y.to_vector<std::int64_t>(), want);
}

// One Momentum step by hand (alpha 0.9, beta 0.1, rate 0.1): standard and Nesterov, and the first
// step (T = 0), which takes the whole gradient.
TEST(OnnxImportQuant, MomentumStepMatchesValuesByHand) {
    ScratchDir dir;
    const auto step = [&](const std::string& mode, std::int64_t t) {
        fx_test::GraphWriter g = writer();
        g.input("X").input("G").input("V").scalar("R", P::FLOAT, 0.1).scalar("T", P::INT64, double(t));
        auto& n = g.node("Momentum", {"R", "T", "X", "G", "V"}, {"X2", "V2"}, "ai.onnx.preview.training");
        set(n, "alpha", 0.9f), set(n, "beta", 0.1f), set(n, "norm_coefficient", 0.0f), set(n, "mode", mode);
        const fx::onnx::Model m = g.output("X2").output("V2").load(dir / ("momentum_" + mode + ".onnx"));
        return m({f32({1, 2}), f32({1, -2}), f32({0.5, 0.5})});
    };
    const auto standard = step("standard", 1), nesterov = step("nesterov", 1), first = step("standard", 0);
    const auto near = [](const fx::Tensor& t, const std::vector<double>& want) {
        const auto got = t.to_vector<double>();
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
    };
    near(standard[1], {0.55, 0.25});      // 0.9 v + 0.1 g
    near(standard[0], {0.945, 1.975});    // x - 0.1 v'
    near(nesterov[0], {0.8505, 2.1775});  // x - 0.1 (g + 0.9 v')
    near(first[1], {1.45, -1.55});        // 0.9 v + g
}

// A cache of 2 batch entries x 4 positions x 2 features; a 2-position update written at 1 (entry 0)
// and, circularly, at 3 (entry 1: positions 3 and 0). Gradients reach the cache where it is kept and
// the update where it is written.
TEST(OnnxImportQuant, TensorScatterWritesAtEachEntrysIndexAndDifferentiates) {
    ScratchDir dir;
    fx_test::GraphWriter g = writer();
    g.input("past").input("update").initializer("write", P::INT64, {1, 3});
    set(g.node("TensorScatter", {"past", "update", "write"}, {"present"}), "mode", std::string("circular"));
    const fx::onnx::Model m = g.output("present").load(dir / "tensor_scatter.onnx");
    const fx::Tensor past = fx::arange(0.0, 16.0).reshape({2, 4, 2}).to(fx::DType::f64);
    const fx::Tensor update = (fx::arange(0.0, 8.0) + 100).reshape({2, 2, 2}).to(fx::DType::f64);
    const auto y = m(std::vector<fx::Tensor>{past, update})[0].to_vector<double>();
    EXPECT_EQ(y, (std::vector<double>{0, 1, 100, 101, 102, 103, 6, 7, 106, 107, 10, 11, 12, 13, 104, 105}));
    const fx::Tensor w = fx::randn({2, 4, 2}, {.dtype = fx::DType::f64});
    EXPECT_TRUE(fx::testing::gradcheck(
        {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5},
        [&](const fx::Tensor& a, const fx::Tensor& b) {
            return fx::sum(m(std::vector<fx::Tensor>{a, b})[0] * w);
        },
        past, update));
}

TEST(OnnxImportQuant, RefusalsNameTheNodeAndWhatIsMissing) {
    ScratchDir dir;
    fx_test::GraphWriter g = writer();
    g.input("X").input("G").input("V").scalar("R", P::FLOAT, 0.1).scalar("T", P::INT64, 1);
    set(g.node("Momentum", {"R", "T", "X", "G", "V"}, {"X2", "V2"}, "ai.onnx.preview.training"), "mode",
        std::string("heavy"));
    const fx::onnx::Model m = g.output("X2").load(dir / "heavy.onnx");
    EXPECT_EQ(message_of([&] {
                  m({f32({1}), f32({1}), f32({1})});
              }),
              "fx::onnx: node 'n1' (Momentum, opset 21): mode='heavy' (it is standard or nesterov)");

    fx_test::GraphWriter q = writer();
    q.input("X").scalar("scale", P::FLOAT, 1.0);
    set(q.node("QuantizeLinear", {"X", "scale"}, {"Q"}), "output_dtype", std::int64_t(P::UINT64));
    const fx::onnx::Model mq = q.output("Q").load(dir / "int4.onnx");
    EXPECT_NE(message_of([&] { mq(f32({1})); }).find("UINT64, which fluxion has no type for"), std::string::npos);
}
