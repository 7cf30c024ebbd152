// test_tensor.cpp — tensor handles: factories, views sharing storage, copies, element access,
// printing, seeding, and clear errors for bad shapes.
#include <gtest/gtest.h>

#include <sstream>

#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;

TEST(Tensor, FactoriesHaveShapeTypeAndValues) {
    Tensor z = fx::zeros({2, 3});
    EXPECT_EQ(z.shape(), (fx::Shape{2, 3}));
    EXPECT_EQ(z.dtype(), fx::DType::f32);
    EXPECT_TRUE(z.device().is_cpu());
    EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.0f));
    EXPECT_EQ(fx::ones({2}, {.dtype = fx::DType::i32}).to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, 1}));
    EXPECT_EQ(fx::full({3}, 2.5).to_vector<double>(), (std::vector<double>{2.5, 2.5, 2.5}));
    EXPECT_EQ(fx::arange(5).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(fx::arange(1.0, 2.0, 0.25).to_vector<double>(), (std::vector<double>{1, 1.25, 1.5, 1.75}));
    EXPECT_EQ(fx::tensor({1, 2, 3, 4}, {2, 2}).shape(), (fx::Shape{2, 2}));
    EXPECT_EQ(fx::tensor(std::vector<std::int64_t>{7, 8}).dtype(), fx::DType::i64);
    EXPECT_EQ(fx::scalar(3.0).ndim(), 0);
    EXPECT_EQ(fx::scalar(3.0).item(), 3.0);
}

TEST(Tensor, RandomFactoriesAreReproducibleFromTheSeed) {
    fx::seed(42);
    auto a = fx::rand({100}).to_vector<float>();
    fx::seed(42);
    EXPECT_EQ(fx::rand({100}).to_vector<float>(), a);
    for (float v : a) {
        EXPECT_GE(v, 0.0f);
        EXPECT_LT(v, 1.0f);
    }
}

// Moments of 100,000 draws, each bound about 5 standard errors of its estimate: randn's variance
// 1 ± 0.022 (a standard deviation of 1.1 would give 1.21), its fourth moment 3 ± 0.16 (a uniform
// of the same variance gives 1.8), rand's mean 1/2 ± 0.0046 and variance 1/12 ± 0.0012.
TEST(Tensor, RandomFactoriesHaveTheirDistributionsMoments) {
    fx::seed(7);
    Tensor n = fx::randn({100000}, {.dtype = fx::DType::f64}), u = fx::rand({100000}, {.dtype = fx::DType::f64});
    EXPECT_NEAR(fx::mean(n).item(), 0.0, 0.016);
    EXPECT_NEAR(fx::mean(fx::square(n)).item(), 1.0, 0.022);
    EXPECT_NEAR(fx::mean(fx::square(fx::square(n))).item(), 3.0, 0.16);  // normal, not another shape
    EXPECT_NEAR(fx::mean(u).item(), 0.5, 0.0046);
    EXPECT_NEAR(fx::mean(fx::square(u - 0.5)).item(), 1.0 / 12, 0.0012);
    EXPECT_GE(fx::min(u).item(), 0.0);
    EXPECT_LT(fx::max(u).item(), 1.0);
}

TEST(Tensor, ViewsShareStorage) {
    Tensor x = fx::arange(0.0, 12.0).reshape({3, 4});
    Tensor t = x.transpose();
    EXPECT_EQ(t.shape(), (fx::Shape{4, 3}));
    EXPECT_FALSE(t.is_contiguous());
    EXPECT_EQ(t.data_ptr(), x.data_ptr());
    Tensor row = x.select(0, 1);
    EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
    Tensor col = x.slice(1, 1, 4, 2);
    EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
    row.fill_(-1);
    EXPECT_EQ(x.at({1, 2}), -1.0) << "writing through a view changes the base";
    EXPECT_EQ(t.contiguous().to_vector<float>()[1], -1.0f) << "t[0, 1] is x[1, 0], overwritten through row";
    EXPECT_EQ(x.reshape({-1}).shape(), (fx::Shape{12}));
    EXPECT_EQ(x.unsqueeze(0).shape(), (fx::Shape{1, 3, 4}));
    EXPECT_EQ(x.unsqueeze(0).squeeze(0).shape(), (fx::Shape{3, 4}));
    EXPECT_EQ(x.flatten().shape(), (fx::Shape{12}));
    EXPECT_EQ(fx::ones({3}).expand({2, 3}).strides(), (fx::Shape{0, 1}));
}

TEST(Tensor, NonContiguousReshapeCopies) {
    Tensor x = fx::arange(0.0, 6.0).reshape({2, 3});
    Tensor r = x.transpose().reshape({6});
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Tensor, CloneAndCopyAndCast) {
    Tensor x = fx::tensor({1.5, -2.5, 3.0});
    Tensor c = x.clone();
    c.fill_(0);
    EXPECT_EQ(x.to_vector<float>()[0], 1.5f);
    Tensor y = fx::zeros({3});
    y.copy_(x);
    EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
    EXPECT_EQ(x.to(fx::DType::i32).to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, -2, 3}));
    EXPECT_EQ(x.to(fx::DType::f16).to(fx::DType::f32).to_vector<float>(), x.to_vector<float>());
    EXPECT_THROW(y.copy_(fx::ones({4})), fx::ShapeError);
}

TEST(Tensor, ItemAndAt) {
    EXPECT_EQ(fx::full({1, 1}, 4.0).item(), 4.0);
    EXPECT_THROW(fx::ones({2}).item(), fx::ShapeError);
    Tensor x = fx::arange(0.0, 6.0).reshape({2, 3});
    EXPECT_EQ(x.at({1, 2}), 5.0);
    EXPECT_THROW(x.at({2, 0}), fx::ValueError);
    EXPECT_THROW(x.at({1}), fx::ShapeError);
}

TEST(Tensor, BadShapesGiveClearErrors) {
    Tensor x = fx::ones({2, 3});
    try {
        x.reshape({4, 2});
        FAIL();
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("{2, 3}"), std::string::npos) << e.what();
    }
    EXPECT_THROW(fx::tensor({1, 2, 3}, {2, 2}), fx::ShapeError);
    EXPECT_THROW(x.permute({0, 0}), fx::ShapeError);
    EXPECT_THROW(x.transpose(0, 5), fx::ValueError);
    try {
        (void)(x + fx::ones({4}));
        FAIL();
    } catch (const fx::ShapeError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("add"), std::string::npos) << m;
        EXPECT_NE(m.find("{2, 3}"), std::string::npos) << m;
        EXPECT_NE(m.find("{4}"), std::string::npos) << m;
    }
    try {
        (void)fx::linear(x, fx::ones({4, 2}), fx::ones({4}));
        FAIL();
    } catch (const fx::ShapeError& e) {
        std::string m = e.what();
        EXPECT_EQ(m.rfind("linear: input {2, 3}, weight {4, 2} and bias {4} do not fit", 0), 0u) << m;
    }
    EXPECT_THROW((void)fx::linear(x, fx::ones({4, 3}), fx::ones({3})), fx::ShapeError);
    EXPECT_EQ(fx::linear(x, fx::ones({4, 3})).shape(), (fx::Shape{2, 4}));  // no bias: a plain product
    Tensor empty;
    EXPECT_THROW(empty.shape(), fx::ValueError);
}

TEST(Tensor, FailedOpsLeaveArgumentsUntouched) {
    Tensor a = fx::tensor({1, 2, 3}), b = fx::tensor({1, 2});
    EXPECT_THROW(a.copy_(b), fx::ShapeError);
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(Tensor, PrintsLikeJulia) {
    std::ostringstream s;
    s << fx::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
    EXPECT_EQ(s.str(), "2×3 Tensor<f32, CPU>:\n 1 2 3\n 4 5 6");
    std::ostringstream v;
    v << fx::arange(20, {.dtype = fx::DType::i64});
    EXPECT_EQ(v.str(), "20-element Tensor<i64, CPU>:\n  0\n  1\n  2\n  ⋮\n 17\n 18\n 19");
    EXPECT_EQ(fx::summary(fx::zeros({2, 5})), "2×5 Tensor<f32, CPU>");
    std::ostringstream big;
    big << fx::zeros({20, 20});
    EXPECT_NE(big.str().find("⋱"), std::string::npos);
}
