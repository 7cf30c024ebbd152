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
