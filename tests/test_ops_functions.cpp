// test_ops_functions.cpp — public functions of ops.hpp, tensor.hpp and layers/init.hpp that the op
// table (test_ops.cpp) does not reach: comparisons, argmin, onehot, sum_to, transpose and
// contiguous, full_like and empty, the initialisers, and zero-size tensors through ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

std::vector<bool> bools(const Tensor& t) {
    std::vector<bool> out;
    for (auto v : fx::cast(t, fx::DType::i64).to_vector<std::int64_t>()) out.push_back(v != 0);
    return out;
}

}  // namespace

TEST(Comparisons, FunctionsAndOperatorsBroadcastAndTreatNaNAsPyTorch) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    Tensor a = fx::tensor(std::vector<double>{1, 2, 3, nan}), b = fx::scalar(2.0, {.dtype = fx::DType::f64});
    using V = std::vector<bool>;
    EXPECT_EQ(bools(fx::eq(a, b)), (V{false, true, false, false}));
    EXPECT_EQ(bools(fx::ne(a, b)), (V{true, false, true, true}));  // NaN != anything
    EXPECT_EQ(bools(fx::lt(a, b)), (V{true, false, false, false}));
    EXPECT_EQ(bools(fx::le(a, b)), (V{true, true, false, false}));
    EXPECT_EQ(bools(fx::gt(a, b)), (V{false, false, true, false}));
    EXPECT_EQ(bools(fx::ge(a, b)), (V{false, true, true, false}));
    EXPECT_EQ(bools(a == b), bools(fx::eq(a, b)));
    EXPECT_EQ(bools(a != b), bools(fx::ne(a, b)));
    EXPECT_EQ(bools(a < b), bools(fx::lt(a, b)));
    EXPECT_EQ(bools(a <= b), bools(fx::le(a, b)));
    EXPECT_EQ(bools(a > b), bools(fx::gt(a, b)));
    EXPECT_EQ(bools(a >= b), bools(fx::ge(a, b)));
    Tensor r = fx::lt(fx::ones({2, 1}), fx::tensor({0, 2, 3}));
    EXPECT_EQ(r.dtype(), fx::DType::boolean);
    EXPECT_EQ(r.shape(), (fx::Shape{2, 3}));
    EXPECT_EQ(bools(r), (V{false, true, true, false, true, true}));
    EXPECT_THROW(fx::eq(fx::ones({2}), fx::ones({3})), fx::ShapeError);
}

// torch.argmin(x, 1) and (x, 0) with x = [[3, 1, 1], [0, 5, -2]]: the first of tied minima.
TEST(Argmin, FirstMinimumAlongAnAxis) {
    Tensor x = fx::tensor({3, 1, 1, 0, 5, -2}, {2, 3});
    EXPECT_EQ(fx::argmin(x, 1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2}));
    EXPECT_EQ(fx::argmin(x, 0).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 1}));
    EXPECT_EQ(fx::argmin(x, -1, true).shape(), (fx::Shape{2, 1}));
    EXPECT_EQ(fx::argmin(x, 1).dtype(), fx::DType::i64);
    EXPECT_THROW(fx::argmin(x, 2), fx::ValueError);
    EXPECT_THROW(fx::argmin(fx::ones({2, 0}), 1), fx::ShapeError);
}

TEST(Onehot, ValuesShapeTypeAndErrors) {
    Tensor labels = fx::tensor(std::vector<std::int64_t>{2, 0, 1, 2}, {2, 2});
    Tensor y = fx::onehot(labels, 3);
    EXPECT_EQ(y.shape(), (fx::Shape{2, 2, 3}));
    EXPECT_EQ(y.dtype(), fx::DType::f32);
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1}));
    EXPECT_EQ(fx::onehot(labels, 3, fx::DType::f64).dtype(), fx::DType::f64);
    EXPECT_THROW(fx::onehot(labels, 2), fx::ValueError);  // label 2 of 2 classes
    EXPECT_THROW(fx::onehot(fx::tensor(std::vector<std::int64_t>{-1}), 3), fx::ValueError);
    EXPECT_THROW(fx::onehot(labels, 0), fx::ValueError);
    EXPECT_THROW(fx::onehot(fx::tensor({1.0f}), 3), fx::DTypeError);
}

TEST(Onecold, InvertsOnehotAndPicksTheFirstLargest) {
    Tensor labels = fx::tensor(std::vector<std::int64_t>{2, 0, 1, 2}, {2, 2});
    EXPECT_EQ(fx::onecold(fx::onehot(labels, 3)).to_vector<std::int64_t>(), labels.to_vector<std::int64_t>());
    EXPECT_EQ(fx::onecold(fx::onehot(labels, 3)).shape(), (fx::Shape{2, 2}));
    // Scores, not only one-hot rows; a tie goes to the first, as argmax (and Flux's onecold).
    Tensor scores = fx::tensor({0.1f, 0.7f, 0.2f, 0.5f, 0.5f, 0.0f}, {2, 3});
    EXPECT_EQ(fx::onecold(scores).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 0}));
    EXPECT_EQ(fx::onecold(scores).dtype(), fx::DType::i64);
    EXPECT_THROW(fx::onecold(fx::tensor({1.0f}).reshape({})), fx::ShapeError);
}

TEST(SumTo, ReversesBroadcasting) {
    Tensor x = fx::arange(0, 24).reshape({2, 3, 4});
    EXPECT_EQ(fx::sum_to(x, {2, 3, 4}).to_vector<float>(), x.to_vector<float>());
    EXPECT_EQ(fx::sum_to(x, {4}).to_vector<float>(), (std::vector<float>{60, 66, 72, 78}));
    EXPECT_EQ(fx::sum_to(x, {3, 1}).to_vector<float>(), (std::vector<float>{60, 92, 124}));
    EXPECT_EQ(fx::sum_to(x, {2, 1, 1}).to_vector<float>(), (std::vector<float>{66, 210}));
    EXPECT_EQ(fx::sum_to(x, {}).item(), 276.0);
    EXPECT_THROW(fx::sum_to(x, {2}), fx::ShapeError);  // {2} does not broadcast to {2, 3, 4}
    EXPECT_THROW(fx::sum_to(x, {1, 2, 3, 4}), fx::ShapeError);
}

TEST(Transpose, ViewsUntilContiguousCopies) {
    Tensor x = fx::arange(0, 6).reshape({2, 3});
    Tensor t = fx::transpose(x);
    EXPECT_EQ(t.shape(), (fx::Shape{3, 2}));
    EXPECT_FALSE(t.is_contiguous());
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
    Tensor c = t.contiguous();
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_EQ(c.strides(), (fx::Shape{2, 1}));
    EXPECT_EQ(c.to_vector<float>(), t.to_vector<float>());
    EXPECT_EQ(x.contiguous().data_ptr(), x.data_ptr());  // already contiguous: the same storage
    c.fill_(7);
    EXPECT_EQ(x.to_vector<float>()[1], 1.0f);  // the copy does not alias x
    Tensor y = fx::arange(0, 24).reshape({2, 3, 4});
    EXPECT_EQ(fx::transpose(y, 0, 2).shape(), (fx::Shape{4, 3, 2}));
    EXPECT_EQ(fx::transpose(y, 0, 2).at({3, 1, 0}), y.at({0, 1, 3}));
    EXPECT_THROW(fx::transpose(y, 0, 3), fx::ValueError);
}

TEST(Factories, FullLikeAndEmpty) {
    Tensor t = fx::zeros({2, 3}, {.dtype = fx::DType::f64});
    Tensor f = fx::full_like(t, 2.5);
    EXPECT_EQ(f.shape(), t.shape());
    EXPECT_EQ(f.dtype(), fx::DType::f64);
    EXPECT_EQ(f.to_vector<double>(), std::vector<double>(6, 2.5));
    Tensor i = fx::full_like(fx::zeros({2}, {.dtype = fx::DType::i32}), 7);
    EXPECT_EQ(i.dtype(), fx::DType::i32);
    EXPECT_EQ(i.to_vector<std::int32_t>(), (std::vector<std::int32_t>{7, 7}));
    Tensor e = fx::empty({4, 0, 2}, {.dtype = fx::DType::i64});
    EXPECT_EQ(e.shape(), (fx::Shape{4, 0, 2}));
    EXPECT_EQ(e.numel(), 0);
    EXPECT_EQ(e.dtype(), fx::DType::i64);
    EXPECT_EQ(fx::empty({3}).numel(), 3);
}

namespace {

double sample_std(const Tensor& t) {
    Tensor d = fx::cast(t, fx::DType::f64);
    return std::sqrt(fx::mean(fx::square(d - fx::mean(d))).item());
}

}  // namespace

// Shapes with fan_in = 200·9 = 1800 and fan_out = 100·9 = 900 (docs/ARCHITECTURE.md,
// "Conventions"): each initialiser's bound or standard deviation from its formula in init.hpp, over
// 180,000 draws.
TEST(Initialisers, SpreadsFollowTheFans) {
    const fx::Shape shape{100, 200, 3, 3};
    const double fan_in = 1800, fan_out = 900;
    fx::seed(11);
    struct Case {
        const char* name;
        fx::Init init;
        double bound, std;  // bound 0: unbounded (normal)
    };
    const double glorot_bound = std::sqrt(6 / (fan_in + fan_out)), kaiming_bound = std::sqrt(6 / fan_in);
    const Case cases[] = {
        {"glorot_uniform", fx::glorot_uniform, glorot_bound, glorot_bound / std::sqrt(3.0)},
        {"glorot_normal", fx::glorot_normal, 0, std::sqrt(2 / (fan_in + fan_out))},
        {"kaiming_uniform", fx::kaiming_uniform, kaiming_bound, kaiming_bound / std::sqrt(3.0)},
        {"kaiming_normal", fx::kaiming_normal, 0, std::sqrt(2 / fan_in)},
        {"randn32", fx::randn32, 0, 1},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        Tensor w = c.init(shape);
        EXPECT_EQ(w.shape(), shape);
        EXPECT_EQ(w.dtype(), fx::DType::f32);
        EXPECT_TRUE(w.device().is_cpu());
        EXPECT_NEAR(sample_std(w), c.std, 0.01 * c.std);  // ~6 standard errors of the estimate
        EXPECT_NEAR(fx::mean(fx::cast(w, fx::DType::f64)).item(), 0.0, 0.015 * c.std);
        if (c.bound > 0) {
            EXPECT_LE(fx::max(w).item(), c.bound);
            EXPECT_GE(fx::min(w).item(), -c.bound);
            EXPECT_GT(fx::max(w).item(), 0.99 * c.bound);  // the whole interval is used
        }
    }
    EXPECT_EQ(fx::zeros32({2, 2}).to_vector<float>(), std::vector<float>(4, 0));
    EXPECT_EQ(fx::ones32({3}).to_vector<float>(), std::vector<float>(3, 1));
    // A 1-dimensional shape {n}: fan_in 1, fan_out n.
    EXPECT_NEAR(sample_std(fx::kaiming_normal({100000})), std::sqrt(2.0), 0.01 * std::sqrt(2.0));
}

// Ops on tensors with a zero-length axis give empty results of the right shape, or the reduction's
// identity, as PyTorch does: torch.zeros(0, 3).sum(0) == zeros(3), .mean() is nan, matmul of
// {2, 0} by {0, 3} is zeros(2, 3).
TEST(ZeroSize, TensorsWithAnEmptyAxisGoThroughOps) {
    Tensor x = fx::zeros({0, 3});
    EXPECT_EQ((x + 1.0).shape(), (fx::Shape{0, 3}));
    EXPECT_EQ(fx::exp(x).shape(), (fx::Shape{0, 3}));
    EXPECT_EQ((x * fx::ones({3})).shape(), (fx::Shape{0, 3}));
    EXPECT_EQ(fx::sum(x, 0).to_vector<float>(), (std::vector<float>{0, 0, 0}));
    EXPECT_EQ(fx::sum(x, 1).shape(), (fx::Shape{0}));
    EXPECT_EQ(fx::sum(x).item(), 0.0);
    EXPECT_TRUE(std::isnan(fx::mean(x).item()));
    EXPECT_THROW(fx::max(x, 0), fx::ShapeError);  // no maximum of nothing
    EXPECT_EQ(fx::max(x, 1).shape(), (fx::Shape{0}));
    EXPECT_EQ(fx::softmax(x, 1).shape(), (fx::Shape{0, 3}));
    EXPECT_EQ(fx::matmul(fx::ones({2, 0}), fx::ones({0, 3})).to_vector<float>(), std::vector<float>(6, 0));
    EXPECT_EQ(fx::matmul(x, fx::ones({3, 4})).shape(), (fx::Shape{0, 4}));
    EXPECT_EQ(fx::concat({x, fx::ones({2, 3})}, 0).to_vector<float>(), std::vector<float>(6, 1));
    EXPECT_EQ(x.transpose().contiguous().shape(), (fx::Shape{3, 0}));
    auto [g] = fx::gradient([](const Tensor& a) { return fx::sum(fx::square(a) * 2.0); }, x);
    EXPECT_EQ(g.shape(), (fx::Shape{0, 3}));
    EXPECT_EQ(fx::conv2d(fx::zeros({0, 1, 5, 5}), fx::ones({2, 1, 3, 3})).shape(), (fx::Shape{0, 2, 3, 3}));
    EXPECT_EQ(fx::maxpool2d(fx::zeros({0, 2, 4, 4}), {.window = {2, 2}}).shape(), (fx::Shape{0, 2, 2, 2}));
}
