// test_ops_edges.cpp — ops at the edges of their domain, where random differential testing
// against PyTorch found crashes or wrong answers (issue 15). The expected values are PyTorch 1.13's,
// quoted with the expression that gives them.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;

// torch.sum(torch.tensor(1.5), 0) == tensor(1.5), and likewise for dim -1 and keepdim=True; the
// gradient of the one element is 1 (and argmax/argmin give 0).
TEST(OpsEdges, ReducingA0dTensorAlongAxis0GivesItsValue) {
    for (int axis : {0, -1})
        for (bool keep : {false, true}) {
            SCOPED_TRACE("axis " + std::to_string(axis) + (keep ? ", keepdims" : ""));
            Tensor x = fx::scalar(1.5);
            for (const Tensor& r : {fx::sum(x, axis, keep), fx::mean(x, axis, keep), fx::max(x, axis, keep),
                                    fx::min(x, axis, keep), fx::logsumexp(x, axis, keep)}) {
                EXPECT_EQ(r.ndim(), 0);
                EXPECT_EQ(r.item(), 1.5);
            }
            for (const Tensor& r : {fx::argmax(x, axis, keep), fx::argmin(x, axis, keep)}) {
                EXPECT_EQ(r.ndim(), 0);
                EXPECT_EQ(r.dtype(), fx::DType::i64);
                EXPECT_EQ(r.item(), 0.0);
            }
            auto [g] = fx::gradient(
                [&](const Tensor& a) {
                    return fx::sum(a, axis, keep) + fx::mean(a, axis, keep) + fx::max(a, axis, keep) +
                           fx::min(a, axis, keep) + fx::logsumexp(a, axis, keep);
                },
                x);
            EXPECT_EQ(g.ndim(), 0);
            EXPECT_DOUBLE_EQ(g.item(), 5.0);
        }
}

TEST(OpsEdges, AnyOtherAxisOfA0dTensorIsAClearError) {
    Tensor x = fx::scalar(1.5);
    for (int axis : {1, -2}) {
        EXPECT_THROW(fx::sum(x, axis), fx::ValueError);
        EXPECT_THROW(fx::argmin(x, axis), fx::ValueError);
        EXPECT_THROW(fx::logsumexp(x, axis), fx::ValueError);
    }
    try {
        fx::max(x, 1);
        FAIL() << "max(x, 1) of a 0-d tensor did not throw";
    } catch (const fx::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("max: axis 1 is out of range for a tensor with 0 dimension(s)"),
                  std::string::npos)
            << e.what();
    }
    // Axes that do not exist on a 0-d tensor for ops that index along them.
    EXPECT_THROW(x.shape(0), fx::ValueError);
    EXPECT_THROW(x.select(0, 0), fx::ValueError);
    EXPECT_THROW(x.slice(0, 0, 1), fx::ValueError);
    EXPECT_THROW(fx::concat({x, x}, 0), fx::ValueError);
    // torch.softmax(torch.tensor(1.5), -1) == tensor(1.)
    EXPECT_EQ(fx::softmax(x, -1).item(), 1.0);
    EXPECT_EQ(fx::logsoftmax(x, 0).item(), 0.0);
}

namespace {

// Logits spread over a few units around ±1e4, in f32, so that max + log Σ would round at 1e4's ulp
// (about 1e-3) while the result is of order 1.
Tensor large_logits(const fx::Shape& shape, std::uint64_t seed) {
    fx::seed(seed);
    Tensor sign = fx::cast(fx::gt(fx::rand(shape), fx::scalar(0.5f)), fx::DType::f32) * 2.0 - 1.0;
    return sign * 1e4 + fx::randn(shape) * 3.0;
}

// |a - b| <= rel · (|b| + 1) elementwise: relative where values are large, absolute near zero.
void expect_close_f32_to_f64(const Tensor& f32, const Tensor& f64, double rel) {
    ASSERT_EQ(f32.shape(), f64.shape());
    auto a = fx::cast(f32, fx::DType::f64).to_vector<double>(), b = f64.to_vector<double>();
    for (std::size_t i = 0; i < a.size(); ++i)
        ASSERT_LE(std::abs(a[i] - b[i]), rel * (std::abs(b[i]) + 1)) << "at " << i << ": " << a[i] << " vs " << b[i];
}

}  // namespace

// The f32 result against the same op in f64 on the same inputs (whose own rounding, ~1e-12 here, is
// far below the tolerance): PyTorch 1.13's f32 log_softmax is within 1e-6 of it on such logits.
TEST(OpsEdges, LogSoftmaxKeepsF32PrecisionWithLargeLogits) {
    for (int axis : {1, 0}) {  // a contiguous axis, and a strided one (the kernel's column path)
        SCOPED_TRACE("axis " + std::to_string(axis));
        Tensor x = large_logits({6, 9}, 15 + axis), w = fx::randn({6, 9});
        Tensor x64 = fx::cast(x, fx::DType::f64), w64 = fx::cast(w, fx::DType::f64);
        expect_close_f32_to_f64(fx::logsoftmax(x, axis), fx::logsoftmax(x64, axis), 1e-6);
        auto [g] = fx::gradient([&](const Tensor& a) { return fx::sum(w * fx::logsoftmax(a, axis)); }, x);
        auto [g64] = fx::gradient([&](const Tensor& a) { return fx::sum(w64 * fx::logsoftmax(a, axis)); }, x64);
        expect_close_f32_to_f64(g, g64, 1e-6);
    }
}

TEST(OpsEdges, LogitCrossEntropyKeepsF32PrecisionWithLargeLogits) {
    Tensor x = large_logits({8, 5}, 7), x64 = fx::cast(x, fx::DType::f64);
    Tensor labels = fx::tensor(std::vector<std::int64_t>{0, 1, 2, 3, 4, 0, 1, 2});
    Tensor y = fx::onehot(labels, 5), y64 = fx::onehot(labels, 5, fx::DType::f64);
    auto [l, g] = fx::withgradient([&](const Tensor& a) { return fx::logitcrossentropy(a, y); }, x);
    auto [l64, g64] = fx::withgradient([&](const Tensor& a) { return fx::logitcrossentropy(a, y64); }, x64);
    expect_close_f32_to_f64(l, l64, 1e-6);
    expect_close_f32_to_f64(g, g64, 1e-6);
}

namespace {

struct TransposeCase {
    fx::Shape x, w;
    std::int64_t stride, padding, dilation, output_padding, groups;
};

// Small integers, so that every sum below is exact in f32.
Tensor integers(const fx::Shape& shape, int modulus) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % modulus - modulus / 2);
    return fx::tensor(v, shape);
}

// The transposed convolution by its definition: input pixel (i, j) adds x · w to output pixel
// (i·stride - padding + kh·dilation, j·stride - padding + kw·dilation). With r = ∂loss/∂y, the same
// terms give ∂loss/∂x += r · w and ∂loss/∂w += r · x.
struct TransposeReference {
    std::vector<double> y, gx, gw;
};
TransposeReference transpose_by_definition(const TransposeCase& c, const fx::Shape& y_shape, const std::vector<double>& x,
                                           const std::vector<double>& w, const std::vector<double>& r) {
    const auto N = c.x[0], C = c.x[1], H = c.x[2], W = c.x[3], KH = c.w[2], KW = c.w[3], Kg = c.w[1];
    const auto K = y_shape[1], OH = y_shape[2], OW = y_shape[3], Cg = C / c.groups;
    TransposeReference ref{std::vector<double>(r.size()), std::vector<double>(x.size()), std::vector<double>(w.size())};
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t ci = 0; ci < C; ++ci)
            for (std::int64_t ko = 0; ko < Kg; ++ko)
                for (std::int64_t i = 0; i < H; ++i)
                    for (std::int64_t j = 0; j < W; ++j)
                        for (std::int64_t kh = 0; kh < KH; ++kh)
                            for (std::int64_t kw = 0; kw < KW; ++kw) {
                                std::int64_t oi = i * c.stride - c.padding + kh * c.dilation;
                                std::int64_t oj = j * c.stride - c.padding + kw * c.dilation;
                                if (oi < 0 || oi >= OH || oj < 0 || oj >= OW) continue;
                                std::int64_t k = (ci / Cg) * Kg + ko;
                                auto xi = ((n * C + ci) * H + i) * W + j, wi = ((ci * Kg + ko) * KH + kh) * KW + kw;
                                auto yi = ((n * K + k) * OH + oi) * OW + oj;
                                ref.y[yi] += x[xi] * w[wi];
                                ref.gx[xi] += r[yi] * w[wi];
                                ref.gw[wi] += r[yi] * x[xi];
                            }
    return ref;
}

}  // namespace

// F.conv_transpose2d(x, w, stride=1, dilation=2, output_padding=1) with x = arange(9) % 7 - 3 and
// w = arange(4) % 5 - 2 gives this {1, 1, 6, 6} result: output_padding may reach the dilation.
TEST(OpsEdges, ConvTransposeOutputPaddingBelowTheDilation) {
    Tensor x = integers({1, 1, 3, 3}, 7), w = integers({1, 1, 2, 2}, 5);
    Tensor y = fx::conv_transpose2d(x, w, {.dilation = {2, 2}}, {1, 1});
    EXPECT_EQ(y.shape(), (fx::Shape{1, 1, 6, 6}));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{6, 4, 5, 2, 1, 0, 0, -2, -4, -1, -2, 0, -6, 6, -2, 1, 1, 0,
                                                        0, 0, 0, 1, 2, 0, 0, 0, 3, -3, -2, 0, 0, 0, 0, 0, 0, 0}));
    // Beyond both the stride and the dilation, PyTorch's rule refuses.
    EXPECT_THROW(fx::conv_transpose2d(x, w, {.dilation = {2, 2}}, {2, 2}), fx::ValueError);
    EXPECT_THROW(fx::conv_transpose2d(x, w, {.stride = {2, 2}}, {0, 2}), fx::ValueError);
}

// Values and both gradients against the definition (which gives PyTorch 1.13's values and gradients
// exactly for these cases), over output paddings at and past the stride,
// paddings smaller and larger than them, groups and unequal axes.
TEST(OpsEdges, ConvTransposeWithLargeOutputPaddingMatchesTheDefinition) {
    const std::vector<TransposeCase> cases = {
        {{1, 1, 3, 3}, {1, 1, 2, 2}, 1, 0, 2, 1, 1},
        {{2, 1, 4, 4}, {1, 1, 2, 2}, 1, 2, 3, 1, 1},  // ConvTranspose((2, 2), 1 => 1, pad = SamePad(), dilation = 3)
        {{1, 2, 3, 2}, {2, 3, 2, 3}, 2, 1, 3, 2, 2},
        {{1, 4, 2, 3}, {4, 1, 3, 2}, 1, 3, 4, 3, 4},
        {{1, 1, 3, 3}, {1, 2, 2, 2}, 2, 0, 1, 1, 1},  // output_padding below the stride: the direct path
    };
    for (const auto& c : cases) {
        SCOPED_TRACE("x " + fx::to_string(c.x) + ", w " + fx::to_string(c.w) + ", stride " + std::to_string(c.stride) +
                     ", padding " + std::to_string(c.padding) + ", dilation " + std::to_string(c.dilation) +
                     ", output_padding " + std::to_string(c.output_padding) + ", groups " + std::to_string(c.groups));
        Tensor x = integers(c.x, 7), w = integers(c.w, 5);
        fx::Conv2dOptions o{.stride = {c.stride, c.stride}, .padding = {c.padding, c.padding},
                            .dilation = {c.dilation, c.dilation}, .groups = c.groups};
        std::vector<std::int64_t> op = {c.output_padding, c.output_padding};
        Tensor y = fx::conv_transpose2d(x, w, o, op);
        Tensor r = integers(y.shape(), 3);
        auto [gx, gw] = fx::gradient(
            [&](const Tensor& a, const Tensor& b) { return fx::sum(r * fx::conv_transpose2d(a, b, o, op)); }, x, w);
        auto as_f64 = [](const Tensor& t) { return fx::cast(t, fx::DType::f64).to_vector<double>(); };
        auto ref = transpose_by_definition(c, y.shape(), as_f64(x), as_f64(w), as_f64(r));
        EXPECT_EQ(as_f64(y), ref.y);
        EXPECT_EQ(as_f64(gx), ref.gx);
        EXPECT_EQ(as_f64(gw), ref.gw);
    }
}

TEST(OpsEdges, ConvTransposeLayerWithSamePadAndDilation) {
    fx::seed(3);
    fx::ConvTranspose layer({2, 2}, 1, 1, {.pad = fx::SamePad(), .dilation = 3});
    Tensor x = fx::rand({2, 1, 5, 5});
    for (int call = 0; call < 2; ++call) EXPECT_EQ(layer(x).shape(), (fx::Shape{2, 1, 5, 5}));
}

namespace {

Tensor f64(const std::vector<double>& v, const fx::Shape& shape) { return fx::tensor(v, shape); }

}  // namespace

// x = [[1, 3, 3], [2, 2, 0], [5, 5, 5]]; v, i = torch.max(x, 1); (v * [1, 2, 3]).sum().backward()
// gives i = [1, 0, 0] and the gradient to those indices only; torch.min(x, 0) likewise; torch.max(x)
// over everything splits it among the tied elements.
TEST(OpsEdges, TiedExtremaAlongAnAxisGiveTheGradientToTheIndexReturned) {
    Tensor x = f64({1, 3, 3, 2, 2, 0, 5, 5, 5}, {3, 3}), w = f64({1, 2, 3}, {3});
    EXPECT_EQ(fx::argmax(x, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 0}));
    auto [gmax] = fx::gradient([&](const Tensor& a) { return fx::sum(fx::max(a, 1) * w); }, x);
    EXPECT_EQ(gmax.to_vector<double>(), (std::vector<double>{0, 1, 0, 2, 0, 0, 3, 0, 0}));
    auto [gkeep] = fx::gradient([&](const Tensor& a) { return fx::sum(fx::max(a, -1, true) * w.reshape({3, 1})); }, x);
    EXPECT_EQ(gkeep.to_vector<double>(), gmax.to_vector<double>());
    EXPECT_EQ(fx::argmin(x, 0).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 1}));
    auto [gmin] = fx::gradient([&](const Tensor& a) { return fx::sum(fx::min(a, 0) * w); }, x);
    EXPECT_EQ(gmin.to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 2, 3, 0, 0, 0}));
    auto [gall] = fx::gradient([](const Tensor& a) { return fx::max(a); }, x);
    EXPECT_EQ(gall.to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 0, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}));
}

// a = [1, 2, 3], b = [1, 5, 3]; (torch.maximum(a, b) * [1, 2, 4]).sum().backward() gives
// a.grad = [0.5, 0, 2], b.grad = [0.5, 2, 2]: equal arguments split the gradient.
TEST(OpsEdges, MaximumAndMinimumOfEqualArgumentsSplitTheGradient) {
    Tensor a = f64({1, 2, 3}, {3}), b = f64({1, 5, 3}, {3}), w = f64({1, 2, 4}, {3});
    auto [ga, gb] = fx::gradient([&](const Tensor& p, const Tensor& q) { return fx::sum(fx::maximum(p, q) * w); }, a, b);
    EXPECT_EQ(ga.to_vector<double>(), (std::vector<double>{0.5, 0, 2}));
    EXPECT_EQ(gb.to_vector<double>(), (std::vector<double>{0.5, 2, 2}));
    auto [ha, hb] = fx::gradient([&](const Tensor& p, const Tensor& q) { return fx::sum(fx::minimum(p, q) * w); }, a, b);
    EXPECT_EQ(ha.to_vector<double>(), (std::vector<double>{0.5, 2, 2}));
    EXPECT_EQ(hb.to_vector<double>(), (std::vector<double>{0.5, 0, 2}));
    // Broadcast: the scalar collects its halves and wins.
    auto [gs] = fx::gradient([&](const Tensor& s) { return fx::sum(fx::maximum(a, s)); }, f64({2}, {}));
    EXPECT_EQ(gs.item(), 1.5);
}

// F.max_pool2d(zeros(1, 1, 4, 4), 2, padding=2) raises "pad should be at most half of kernel size";
// padding of half the window is accepted.
TEST(OpsEdges, PoolingPaddingBeyondHalfTheWindowIsRefused) {
    Tensor x = fx::zeros({1, 1, 4, 4});
    EXPECT_THROW(fx::maxpool2d(x, {.window = {2, 2}, .padding = {2, 2}}), fx::ValueError);
    EXPECT_THROW(fx::meanpool2d(x, {.window = {3, 3}, .padding = {0, 2}}), fx::ValueError);
    try {
        fx::maxpool2d(x, {.window = {3, 2}, .padding = {2, 1}});
        FAIL() << "maxpool2d accepted padding 2 with a window of 3";
    } catch (const fx::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("padding {2, 1} must be at most half the window {3, 2}"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(fx::maxpool2d(x, {.window = {3, 3}, .padding = {1, 1}}).shape(), (fx::Shape{1, 1, 2, 2}));
    EXPECT_THROW(fx::MaxPool({2, 2}, {.stride = 2, .pad = 2})(x), fx::ValueError);
}

// x = [-3, -1, -0.5, 0, 0.7, 2, 4]; y = F.gelu(x) (exact, PyTorch's default); (y * arange(1, 8)).sum()
// .backward(). Flux's names: gelu is the tanh approximation, gelu_erf the exact form.
TEST(OpsEdges, GeluErfIsPyTorchsDefaultGelu) {
    Tensor x = f64({-3, -1, -0.5, 0, 0.7, 2, 4}, {7}), w = f64({1, 2, 3, 4, 5, 6, 7}, {7});
    const std::vector<double> y = {-0.00404969409489031, -0.15865525393145702, -0.15426876936299344, 0.0,
                                   0.5306254434438489,   1.9544997361036416,   3.9998733150326675};
    const std::vector<double> g = {-0.01194564720418392, -0.1666309411753727, 0.39751462603151133, 2.0,
                                   4.883070505668299,    6.511390806469182,   7.003525547628586};
    auto [value, grad] = fx::withgradient([&](const Tensor& a) { return fx::sum(fx::gelu_erf(a) * w); }, x);
    auto got = fx::gelu_erf(x).to_vector<double>(), got_g = grad.to_vector<double>();
    for (std::size_t i = 0; i < y.size(); ++i) {
        EXPECT_NEAR(got[i], y[i], 1e-15 * (1 + std::abs(y[i])));
        EXPECT_NEAR(got_g[i], g[i], 1e-14 * (1 + std::abs(g[i])));
    }
    EXPECT_GT(std::abs(fx::gelu(x).to_vector<double>()[0] - y[0]), 1e-4);  // the tanh form differs
    EXPECT_EQ(fx::Dense(2, 3, fx::gelu_erf).describe(), "Dense(2 => 3, gelu_erf)");
}

// torch.logsumexp(torch.tensor([[1., inf, 2.], [-inf, -inf, -inf]]), 1) == tensor([inf, -inf]),
// and the row without ±inf is unchanged; found by test_differential.
TEST(OpsEdges, LogSumExpOfARowHoldingInfIsInf) {
    Tensor x = fx::tensor<double>({1, INFINITY, 2, -INFINITY, -INFINITY, -INFINITY, 0.5, -1, 3}, {3, 3});
    auto r = fx::logsumexp(x, 1).to_vector<double>();
    EXPECT_EQ(r[0], INFINITY);
    EXPECT_EQ(r[1], -INFINITY);
    EXPECT_NEAR(r[2], 3.0956743294143823, 1e-12);  // torch.logsumexp(torch.tensor([0.5, -1., 3.]), 0)
}

// x = [1, nan, -2, nan]; torch.min(x).backward() gives x.grad = [0, 0.5, 0, 0.5]: the NaN result's
// gradient goes to the NaN elements; found by test_differential.
TEST(OpsEdges, ExtremumOverEverythingGivesANaNResultsGradientToTheNaNs) {
    Tensor x = fx::tensor<double>({1, NAN, -2, NAN}, {4});
    for (bool max : {false, true}) {
        auto [g] = fx::gradient([max](const Tensor& a) { return max ? fx::max(a) : fx::min(a); }, x);
        EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 0.5, 0, 0.5})) << (max ? "max" : "min");
    }
}

// a = [1, nan, 3, 2], b = [nan, 5, 3, 1], w = [1, 2, 4, 8]; (torch.maximum(a, b) * w).sum().backward()
// gives a.grad = [1, 2, 2, 8], b.grad = [1, 2, 2, 0]: where either is NaN both get all of it (and
// minimum likewise); found by test_differential.
TEST(OpsEdges, MaximumAndMinimumGiveANaNResultsGradientToBothArguments) {
    Tensor a = fx::tensor<double>({1, NAN, 3, 2}, {4}), b = fx::tensor<double>({NAN, 5, 3, 1}, {4});
    Tensor w = fx::tensor<double>({1, 2, 4, 8}, {4});
    auto [ga, gb] = fx::gradient([&](const Tensor& p, const Tensor& q) { return fx::sum(fx::maximum(p, q) * w); }, a, b);
    EXPECT_EQ(ga.to_vector<double>(), (std::vector<double>{1, 2, 2, 8}));
    EXPECT_EQ(gb.to_vector<double>(), (std::vector<double>{1, 2, 2, 0}));
    auto [ha, hb] = fx::gradient([&](const Tensor& p, const Tensor& q) { return fx::sum(fx::minimum(p, q) * w); }, a, b);
    EXPECT_EQ(ha.to_vector<double>(), (std::vector<double>{1, 2, 2, 0}));
    EXPECT_EQ(hb.to_vector<double>(), (std::vector<double>{1, 2, 2, 8}));
}
