// test_onnx_import_math.cpp — fx::onnx::load's rounding, trigonometric, hyperbolic and bitwise
// operators, training-mode BatchNormalization and Dropout, and MaxPool's Indices, on graphs written
// here with ONNX's protocol buffers: values against the C library and by hand, gradients through the
// imported graph against finite differences, every other device against the CPU, and the refusals'
// messages. ONNX's own node suite (test_onnx_backend) checks them against ONNX's reference outputs.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "onnx_graph_writer.hpp"
#include "other_devices.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using io_test::ScratchDir;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

using P = ::onnx::TensorProto;

using fx_test::GraphWriter;
using fx_test::message_of;
using fx_test::set;

// A graph of one unary node `op`, X -> Y.
fx::onnx::Model unary(const ScratchDir& dir, const std::string& op, std::int64_t opset = 22) {
    GraphWriter g(opset);
    g.input("X").node(op, {"X"}, {"Y"});
    return g.output("Y").load(dir / (op + ".onnx"));
}

fx::Tensor f64(const std::vector<double>& v) { return fx::tensor(v, {std::int64_t(v.size())}); }

struct Function {
    const char* op;
    double (*f)(double);
    std::vector<double> x;  // inside the domain, away from its edges
};

}  // namespace

// Each function's value against the C library's, and its gradient through the imported graph
// against finite differences: they are written with exp, log, sqrt, sin and cos, which differentiate.
TEST(OnnxImportMath, TrigonometricAndHyperbolicValuesAndGradients) {
    ScratchDir dir;
    const std::vector<double> wide = {-2.5, -1.1, -0.3, 0.0, 0.2, 0.9, 1.7, 3.0};
    const std::vector<double> unit = {-0.95, -0.6, -0.1, 0.0, 0.05, 0.5, 0.8, 0.97};
    const Function functions[] = {
        {"Tan", [](double v) { return std::tan(v); }, {-1.2, -0.7, -0.1, 0.0, 0.3, 0.9, 1.3}},
        {"Sinh", [](double v) { return std::sinh(v); }, wide},
        {"Cosh", [](double v) { return std::cosh(v); }, wide},
        {"Asinh", [](double v) { return std::asinh(v); }, {-40.0, -2.5, -0.3, 0.0, 0.2, 1.7, 30.0}},
        {"Acosh", [](double v) { return std::acosh(v); }, {1.05, 1.3, 2.0, 4.5, 30.0}},
        {"Atanh", [](double v) { return std::atanh(v); }, unit},
        {"Asin", [](double v) { return std::asin(v); }, unit},
        {"Acos", [](double v) { return std::acos(v); }, unit},
        {"Atan", [](double v) { return std::atan(v); }, {-50.0, -2.5, -1.0, -0.3, 0.0, 0.2, 1.0, 3.0, 800.0}},
    };
    for (const auto& fn : functions) {
        SCOPED_TRACE(fn.op);
        const fx::onnx::Model m = unary(dir, fn.op);
        const fx::Tensor x = f64(fn.x);
        const auto y = m(x).to_vector<double>();
        for (std::size_t i = 0; i < fn.x.size(); ++i)
            EXPECT_NEAR(y[i], fn.f(fn.x[i]), 1e-7 * std::max(1.0, std::abs(fn.f(fn.x[i])))) << "at " << fn.x[i];
        EXPECT_TRUE(fx::testing::gradcheck(
            {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5}, [&](const fx::Tensor& t) { return fx::sum(m(t) * t); }, x));
    }
}

TEST(OnnxImportMath, RoundingClassifyingAndShrinking) {
    ScratchDir dir;
    const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
    const fx::Tensor x = fx::tensor(std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, -1.7f, 1.2f}, {8});
    EXPECT_EQ(unary(dir, "Round")(x).to_vector<float>(),
              (std::vector<float>{-2, -2, -0, 0, 2, 2, -2, 1}));  // halves to even
    EXPECT_EQ(unary(dir, "Floor")(x).to_vector<float>(), (std::vector<float>{-3, -2, -1, 0, 1, 2, -2, 1}));
    EXPECT_EQ(unary(dir, "Ceil")(x).to_vector<float>(), (std::vector<float>{-2, -1, -0, 1, 2, 3, -1, 2}));

    const fx::Tensor special = f64({-inf, -1.0, 0.0, inf, nan});
    EXPECT_EQ(unary(dir, "IsNaN")(special).to_vector<int>(), (std::vector<int>{0, 0, 0, 0, 1}));
    EXPECT_EQ(unary(dir, "IsInf")(special).to_vector<int>(), (std::vector<int>{1, 0, 0, 1, 0}));
    GraphWriter g(20);
    set(g.input("X").node("IsInf", {"X"}, {"Y"}), "detect_negative", std::int64_t{0});
    EXPECT_EQ(g.output("Y").load(dir / "isinf.onnx")(special).to_vector<int>(), (std::vector<int>{0, 0, 0, 1, 0}));

    GraphWriter s(9);
    auto& shrink = s.input("X").node("Shrink", {"X"}, {"Y"});
    set(shrink, "lambd", 1.0f), set(shrink, "bias", 0.25f);
    const fx::onnx::Model m = s.output("Y").load(dir / "shrink.onnx");
    EXPECT_EQ(m(f64({-2.0, -1.0, 0.5, 1.0, 3.0})).to_vector<double>(), (std::vector<double>{-1.75, 0, 0, 0, 2.75}));
}

// Shifts and bit operations on each integer type fluxion has, with ONNX's rules at the edges.
TEST(OnnxImportMath, BitOperationsOnEachIntegerType) {
    ScratchDir dir;
    auto binary = [&](const std::string& op, const std::string& direction, int type) {
        GraphWriter g(28);
        auto& n = g.input("X", type).input("Y", type).node(op, {"X", "Y"}, {"Z"});
        if (!direction.empty()) set(n, "direction", direction);
        return g.output("Z").load(dir / (op + direction + ".onnx"));
    };
    const auto i32 = [](std::vector<std::int32_t> v) { return fx::tensor(v, {std::int64_t(v.size())}); };
    const auto left32 = binary("BitShift", "LEFT", P::INT32), right32 = binary("BitShift", "RIGHT", P::INT32);
    EXPECT_EQ(left32({i32({1, 1073741824, -1, 5, 7}), i32({3, 1, 31, 32, -1})})[0].to_vector<std::int32_t>(),
              (std::vector<std::int32_t>{8, -2147483647 - 1, -2147483647 - 1, 0, 0}));
    EXPECT_EQ(right32({i32({-8, -1, 64, -5, 9}), i32({1, 1, 3, 40, -2})})[0].to_vector<std::int32_t>(),
              (std::vector<std::int32_t>{-4, -1, 8, -1, 0}));
    const auto u8 = [](std::vector<std::uint8_t> v) { return fx::tensor(v, {std::int64_t(v.size())}); };
    EXPECT_EQ(binary("BitShift", "LEFT", P::UINT8)({u8({200, 3}), u8({1, 2})})[0].to_vector<int>(),
              (std::vector<int>{144, 12}));
    EXPECT_EQ(binary("BitwiseAnd", "", P::UINT8)({u8({0xF0, 0x3C}), u8({0x3C, 0xFF})})[0].to_vector<int>(),
              (std::vector<int>{0x30, 0x3C}));
    EXPECT_EQ(binary("BitwiseOr", "", P::INT32)({i32({-8, 5}), i32({3, 2})})[0].to_vector<int>(),
              (std::vector<int>{-5, 7}));
    EXPECT_EQ(binary("BitwiseXor", "", P::INT32)({i32({-1, 6}), i32({5, 3})})[0].to_vector<int>(),
              (std::vector<int>{-6, 5}));
    GraphWriter g(18);
    g.input("X", P::UINT8).node("BitwiseNot", {"X"}, {"Y"});
    EXPECT_EQ(g.output("Y").load(dir / "not.onnx")(u8({0, 15, 255})).to_vector<int>(), (std::vector<int>{255, 240, 0}));
    // fluxion holds int8 and uint16 as i32: the graph's declared type sets the width.
    EXPECT_EQ(binary("BitShift", "LEFT", P::INT8)({i32({64, 1, -1}), i32({1, 8, 7})})[0].to_vector<std::int32_t>(),
              (std::vector<std::int32_t>{-128, 0, -128}));
    GraphWriter w(18);
    w.input("X", P::UINT16).node("BitwiseNot", {"X"}, {"Y"});
    EXPECT_EQ(w.output("Y").load(dir / "not16.onnx")(i32({0, 3034, 65535})).to_vector<std::int32_t>(),
              (std::vector<std::int32_t>{65535, 62501, 0}));
}

// Normalised by the batch's statistics (variance without Bessel's correction); the running ones
// moved by 1 − momentum; the gradients of all three outputs through the graph match finite differences.
TEST(OnnxImportMath, BatchNormalizationInTrainingMode) {
    ScratchDir dir;
    GraphWriter g(15);
    g.input("X")
        .initializer("scale", {1.5f, -0.5f})
        .initializer("bias", {0.25f, 1.0f})
        .initializer("mean", {0.1f, -0.2f})
        .initializer("var", {0.9f, 1.3f});
    auto& n = g.node("BatchNormalization", {"X", "scale", "bias", "mean", "var"}, {"Y", "running_mean", "running_var"});
    set(n, "training_mode", std::int64_t{1}), set(n, "momentum", 0.8f), set(n, "epsilon", 1e-3f);
    const fx::onnx::Model m = g.output("Y").output("running_mean").output("running_var").load(dir / "bn.onnx");
    const fx::Tensor x = fx::randn({3, 2, 2, 2}, {.dtype = fx::DType::f64});
    const auto out = m(std::vector<fx::Tensor>{x});
    ASSERT_EQ(out.size(), 3u);
    const auto xs = x.to_vector<double>(), ys = out[0].to_vector<double>();
    const auto rm = out[1].to_vector<double>(), rv = out[2].to_vector<double>();
    const double scale[] = {1.5, -0.5}, bias[] = {0.25, 1.0}, mean0[] = {0.1, -0.2}, var0[] = {0.9, 1.3};
    for (int c = 0; c < 2; ++c) {
        double s = 0, ss = 0;
        for (int b = 0; b < 3; ++b)
            for (int k = 0; k < 4; ++k) s += xs[std::size_t(b * 8 + c * 4 + k)];
        const double mu = s / 12;
        for (int b = 0; b < 3; ++b)
            for (int k = 0; k < 4; ++k) ss += std::pow(xs[std::size_t(b * 8 + c * 4 + k)] - mu, 2);
        const double var = ss / 12;
        EXPECT_NEAR(rm[std::size_t(c)], 0.8 * double(float(mean0[c])) + 0.2 * mu, 1e-6);
        EXPECT_NEAR(rv[std::size_t(c)], 0.8 * double(float(var0[c])) + 0.2 * var, 1e-6);
        for (int b = 0; b < 3; ++b)
            for (int k = 0; k < 4; ++k) {
                const std::size_t i = std::size_t(b * 8 + c * 4 + k);
                EXPECT_NEAR(ys[i], (xs[i] - mu) / std::sqrt(var + double(1e-3f)) * scale[c] + bias[c], 1e-5);
            }
    }
    // In x through all three outputs; in x, scale and bias through Y (the running statistics are
    // state, as fx::BatchNorm's, and Y does not read them in training).
    const fx::Tensor w = fx::randn({3, 2, 2, 2}, {.dtype = fx::DType::f64});
    const auto m64 = fx::fmap([](const fx::Tensor& t) { return t.to(fx::DType::f64); }, m);
    EXPECT_TRUE(fx::testing::gradcheck(
        {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5},
        [&](const fx::Tensor& t) {
            const auto o = m64(std::vector<fx::Tensor>{t});
            return fx::sum(o[0] * w) + fx::sum(o[1] * o[1]) + fx::sum(o[2] * o[2]);
        },
        x));
    EXPECT_TRUE(fx::testing::gradcheck(
        {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5},
        [&](const fx::onnx::Model& model, const fx::Tensor& t) {
            return fx::sum(model(std::vector<fx::Tensor>{t})[0] * w);
        },
        m, x));
}

// Each element kept with probability 1 − ratio and scaled by 1 / (1 − ratio); the mask says which.
// The draws are fluxion's own: fx::seed repeats them.
TEST(OnnxImportMath, DropoutInTrainingModeDrawsAMaskFromFluxionsGenerator) {
    ScratchDir dir;
    GraphWriter g(22);
    g.input("X").input("ratio").input("training", P::BOOL).node("Dropout", {"X", "ratio", "training"}, {"Y", "mask"});
    const fx::onnx::Model m = g.output("Y").output("mask").load(dir / "dropout.onnx");
    const fx::Tensor x = fx::randn({40, 50}) + 3.0f, training = fx::scalar(1, {.dtype = fx::DType::boolean});
    fx::seed(7);
    const auto out = m({x, fx::scalar(0.25), training});
    fx::seed(7);
    EXPECT_EQ(m({x, fx::scalar(0.25), training})[1].to_vector<int>(), out[1].to_vector<int>());
    const auto xs = x.to_vector<float>(), ys = out[0].to_vector<float>();
    const auto mask = out[1].to_vector<int>();
    EXPECT_EQ(out[1].dtype(), fx::DType::boolean);
    int kept = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
        kept += mask[i];
        EXPECT_FLOAT_EQ(ys[i], mask[i] ? xs[i] / 0.75f : 0.0f);
    }
    EXPECT_NEAR(kept / 2000.0, 0.75, 0.04);  // 4 standard deviations
    const auto off = m({x, fx::scalar(0.25), fx::scalar(0, {.dtype = fx::DType::boolean})});
    EXPECT_EQ(off[0].to_vector<float>(), xs);
    EXPECT_EQ(off[1].to_vector<int>(), std::vector<int>(xs.size(), 1));
    const std::string e = message_of([&] { (void)m({x, fx::scalar(1.0), training}); });
    EXPECT_NE(e.find("(Dropout, opset 22): a ratio of 1.0"), std::string::npos) << e;
}

// Indices count through the batch and channels; storage_order=1 counts the spatial axes from the
// first (the values and indices are ONNX Runtime's). An integer input pools on the host.
TEST(OnnxImportMath, MaxPoolIndicesAndIntegerInputs) {
    ScratchDir dir;
    auto pool = [&](std::int64_t order, int type) {
        GraphWriter g(22);
        auto& n = g.input("X", type).node("MaxPool", {"X"}, {"Y", "I"});
        set(n, "kernel_shape", std::vector<std::int64_t>{2, 2}), set(n, "pads", std::vector<std::int64_t>{0, 0, 1, 1});
        set(n, "storage_order", order);
        return g.output("Y").output("I").load(dir / ("pool" + std::to_string(order) + ".onnx"));
    };
    // {1, 2, 2, 3}: channel 1 is channel 0 reversed.
    const std::vector<float> v = {1, 5, 2, 4, 0, 3, 3, 0, 4, 2, 5, 1};
    const fx::Tensor x = fx::tensor(v, {1, 2, 2, 3});
    const auto rows = pool(0, P::FLOAT)(std::vector<fx::Tensor>{x});
    EXPECT_EQ(rows[0].shape(), (fx::Shape{1, 2, 2, 3}));
    EXPECT_EQ(rows[0].to_vector<float>(), (std::vector<float>{5, 5, 3, 4, 3, 3, 5, 5, 4, 5, 5, 1}));
    EXPECT_EQ(rows[1].to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 1, 5, 3, 5, 5, 10, 10, 8, 10, 10, 11}));
    const auto columns = pool(1, P::FLOAT)(std::vector<fx::Tensor>{x});
    EXPECT_EQ(columns[1].to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 2, 5, 1, 5, 5, 9, 9, 10, 9, 9, 11}));
    const auto bytes = pool(0, P::UINT8)(std::vector<fx::Tensor>{x.to(fx::DType::u8)});
    EXPECT_EQ(bytes[0].dtype(), fx::DType::u8);
    EXPECT_EQ(bytes[0].to_vector<float>(), rows[0].to_vector<float>());
    EXPECT_EQ(bytes[1].to_vector<std::int64_t>(), rows[1].to_vector<std::int64_t>());
}

// LpPool is the p-th root of each window's sum of |x|^p; MaxUnpool places x's values by MaxPool's
// indices. Both differentiate in x.
TEST(OnnxImportMath, LpPoolAndMaxUnpoolValuesAndGradients) {
    ScratchDir dir;
    GraphWriter lp(22);
    auto& n = lp.input("X").node("LpPool", {"X"}, {"Y"});
    set(n, "kernel_shape", std::vector<std::int64_t>{2, 2}), set(n, "strides", std::vector<std::int64_t>{2, 1});
    set(n, "pads", std::vector<std::int64_t>{1, 0, 0, 1}), set(n, "p", std::int64_t{3});
    const fx::onnx::Model lp_pool = lp.output("Y").load(dir / "lp.onnx");
    const fx::Tensor x = fx::randn({1, 2, 3, 3}, {.dtype = fx::DType::f64});
    const fx::Tensor y = lp_pool(x);
    ASSERT_EQ(y.shape(), (fx::Shape{1, 2, 2, 3}));
    const auto xs = x.to_vector<double>();
    // Output (1, 2) of channel 1: rows 1 and 2 (the pad above shifts them by one), columns 2 and the pad.
    const double sum = std::pow(std::abs(xs[9 + 5]), 3) + std::pow(std::abs(xs[9 + 8]), 3);
    EXPECT_NEAR(y.to_vector<double>()[6 + 5], std::cbrt(sum), 1e-12);
    EXPECT_TRUE(fx::testing::gradcheck([&](const fx::Tensor& t) { return fx::sum(lp_pool(t) * lp_pool(t)); }, x));

    GraphWriter un(22);
    auto& u = un.input("X").input("I", P::INT64).input("S", P::INT64).node("MaxUnpool", {"X", "I", "S"}, {"Y"});
    set(u, "kernel_shape", std::vector<std::int64_t>{2, 2}), set(u, "strides", std::vector<std::int64_t>{2, 2});
    const fx::onnx::Model unpool = un.output("Y").load(dir / "unpool.onnx");
    const fx::Tensor v = fx::tensor(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2});
    const fx::Tensor i = fx::tensor(std::vector<std::int64_t>{0, 3, 9, 14, 16, 18, 25, 31}, {1, 2, 2, 2});
    const fx::Tensor shape = fx::tensor(std::vector<std::int64_t>{1, 2, 4, 5}, {4});
    std::vector<double> want(40, 0.0);  // the 4×4 planes' values, each row then padded to 5
    const double at[][3] = {{0, 0, 1},     {0, 3, 2},     {2, 1, 3},     {3, 2, 4},
                            {4 + 0, 0, 5}, {4 + 0, 2, 6}, {4 + 2, 1, 7}, {4 + 3, 3, 8}};
    for (const auto& a : at) want[std::size_t(a[0] * 5 + a[1])] = a[2];
    EXPECT_EQ(unpool({v, i, shape})[0].to_vector<double>(), want);
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& t) {
            return fx::sum(unpool({t, i, shape})[0] *
                           fx::arange(0, 40, 1, {.dtype = fx::DType::f64}).reshape({1, 2, 4, 5}));
        },
        v));
}

// The host's operators return on the input's device; every operator here gives the CPU's values.
TEST(OnnxImportMath, RunsOnEveryOtherDeviceAsOnTheCpu) {
    ScratchDir dir;
    GraphWriter g(22);
    g.input("X").input("S", P::INT32);
    g.node("Floor", {"X"}, {"f"});
    g.node("Atan", {"f"}, {"a"});
    g.node("Cosh", {"a"}, {"c"});
    auto& mp = g.node("MaxPool", {"c"}, {"p", "I"});
    set(mp, "kernel_shape", std::vector<std::int64_t>{2, 2});
    set(g.node("Cast", {"I"}, {"i"}), "to", std::int64_t{P::INT32});
    auto& shift = g.node("BitShift", {"i", "S"}, {"shifted"});
    set(shift, "direction", std::string("LEFT"));
    g.node("IsNaN", {"p"}, {"nan"});
    const fx::onnx::Model m = g.output("p").output("shifted").output("nan").load(dir / "devices.onnx");
    const fx::Tensor x = fx::randn({2, 3, 4, 6}) * 3.0f, s = fx::tensor(std::vector<std::int32_t>{2}, {1});
    const auto want = m({x, s});
    for (const auto& d : fx::testing::other_devices()) {
        SCOPED_TRACE(d.str());
        const auto got = m({x.to(d), s.to(d)});
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(got[i].device(), d) << "output " << i;
            const auto a = got[i].to(fx::Device{}).to_vector<double>(), b = want[i].to_vector<double>();
            ASSERT_EQ(a.size(), b.size());
            for (std::size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5 * std::max(1.0, std::abs(b[k])));
        }
    }
}

TEST(OnnxImportMath, RefusalsNameTheNodeAndWhatItLacks) {
    ScratchDir dir;
    auto error_of = [&](GraphWriter& g, const std::vector<fx::Tensor>& in) {
        return message_of([&] { (void)g.output("Y").load(dir / "refused.onnx")(in); });
    };
    {
        GraphWriter g(22);
        g.input("X").input("Z").node("BitwiseAnd", {"X", "Z"}, {"Y"});
        const std::string e = error_of(g, {fx::randn({2}), fx::randn({2})});
        EXPECT_NE(e.find("(BitwiseAnd, opset 22): an input of type f32 (bit operations take integers)"),
                  std::string::npos)
            << e;
    }
    {
        GraphWriter g(22);
        set(g.input("X", P::INT32).input("Z", P::INT32).node("BitShift", {"X", "Z"}, {"Y"}), "direction",
            std::string("UP"));
        const fx::Tensor i = fx::tensor(std::vector<std::int32_t>{1}, {1});
        const std::string e = error_of(g, {i, i});
        EXPECT_NE(e.find("(BitShift, opset 22): direction='UP'"), std::string::npos) << e;
    }
    {
        GraphWriter g(9);
        g.input("X", P::INT32).node("Shrink", {"X"}, {"Y"});
        const std::string e = error_of(g, {fx::tensor(std::vector<std::int32_t>{1}, {1})});
        EXPECT_NE(e.find("(Shrink, opset 9): an integer input"), std::string::npos) << e;
    }
    {
        GraphWriter g(22);
        auto& n = g.input("X").node("LpPool", {"X"}, {"Y"});
        set(n, "kernel_shape", std::vector<std::int64_t>{2, 2}), set(n, "p", std::int64_t{0});
        const std::string e = error_of(g, {fx::randn({1, 1, 3, 3})});
        EXPECT_NE(e.find("(LpPool, opset 22): p=0"), std::string::npos) << e;
    }
    {
        GraphWriter g(9);
        g.input("X").initializer("s", {1}).initializer("b", {0}).initializer("m", {0}).initializer("v", {1});
        g.node("BatchNormalization", {"X", "s", "b", "m", "v"}, {"Y", "rm", "rv"});
        const std::string e = error_of(g, {fx::randn({2, 1, 3})});
        EXPECT_NE(e.find("(BatchNormalization, opset 9): the running statistics' outputs of training (before opset "
                         "14's training_mode)"),
                  std::string::npos)
            << e;
    }
}
