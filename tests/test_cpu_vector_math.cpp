// test_cpu_vector_math.cpp — the accuracy of the CPU's f32 exp, tanh and sigmoid (src/cpu/
// vector_math.hpp, reached through the unary kernel as the library compiled it): the error in units in
// the last place against double-precision std::, over a sweep of every float's sign and exponent, the
// neighbourhoods of the thresholds where the formulas change or the result overflows, underflows or
// saturates, and the special values.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/backend.hpp"

namespace {

namespace be = fluxion::backend;
using fluxion::DType;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> f32_unary(be::Unary op, const std::vector<float>& x) {
    std::vector<float> y(x.size());
    be::cpu_backend().unary(0, op, DType::f32, std::int64_t(x.size()), x.data(), y.data(), 0, 0);
    return y;
}

// |y - r| in units of the last place of the float nearest r: 2^(e - 24) for |r| in [2^(e-1), 2^e),
// 2^-149 among the subnormals. ∞ counts as 2^128, the float after FLT_MAX, so that a result that
// overflows one step early or late measures one ulp, not an infinite error.
double ulps(float y, double r) {
    if (std::isnan(r) || std::isnan(y)) return std::isnan(r) && std::isnan(y) ? 0 : kInf;
    const double top = 0x1p128;
    const double yd = std::isinf(y) ? std::copysign(top, y) : y;
    const double rd = std::clamp(r, -top, top);
    int e = 0;
    std::frexp(std::max(std::abs(rd), double(FLT_MIN)), &e);
    return std::abs(yd - rd) / std::ldexp(1.0, std::min(e, 128) - 24);
}

struct Function {
    be::Unary op;
    const char* name;
    std::function<double(double)> reference;
    double max_ulps;
    // Below this true result the bound is absolute (|error| <= it) instead of in ulps.
    double absolute_below;
};

// The bounds the header states, a little above what all 2^32 floats measure: exp 1.08 ulp, tanh 1.34,
// sigmoid 2.49.
std::vector<Function> functions() {
    using U = be::Unary;
    return {
        {U::exp, "exp", [](double x) { return std::exp(x); }, 1.5, 0},
        {U::tanh, "tanh", [](double x) { return std::tanh(x); }, 2, 0},
        // 1 / (1 + e^-x): e^-x overflows below x = -88.72, where σ(x) < FLT_MIN, and the result is 0.
        {U::sigmoid, "sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, 3, FLT_MIN},
    };
}

// Every 251st float by bit pattern (so every sign and exponent), the floats around each threshold,
// and the special values.
std::vector<float> sweep() {
    std::vector<float> xs;
    for (std::uint64_t bits = 0; bits < (std::uint64_t(1) << 32); bits += 251)
        xs.push_back(std::bit_cast<float>(std::uint32_t(bits)));
    const float thresholds[] = {
        0.0f,       0.625f,   9.01f,    88.72283f, 89.0f,        104.0f, 87.33654f, 103.27893f,
        103.97208f, 0x1p-12f, 0.34657f, FLT_MIN,   FLT_TRUE_MIN, 1.0f,   44.36f,    FLT_MAX,
    };
    for (float t : thresholds)
        for (float sign : {1.0f, -1.0f}) {
            float x = sign * t;
            for (int i = 0; i < 300; ++i) x = std::nextafter(x, -kInf);
            for (int i = 0; i < 600; ++i) xs.push_back(x = std::nextafter(x, kInf));
        }
    for (float x : {0.0f, -0.0f, kInf, -kInf, kNaN, -kNaN, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MAX, -FLT_MAX})
        xs.push_back(x);
    return xs;
}

TEST(CpuVectorMath, F32WithinTheStatedUlpBounds) {
    const std::vector<float> xs = sweep();
    for (const Function& f : functions()) {
        const std::vector<float> ys = f32_unary(f.op, xs);
        double worst = 0;
        float worst_at = 0;
        for (std::size_t i = 0; i < xs.size(); ++i) {
            const double r = f.reference(double(xs[i]));
            if (std::abs(r) < f.absolute_below) {
                ASSERT_LE(std::abs(double(ys[i]) - r), f.absolute_below)
                    << f.name << "(" << std::hexfloat << xs[i] << ") = " << ys[i] << ", expected " << r;
                continue;
            }
            const double u = ulps(ys[i], r);
            if (!(u <= worst)) worst = u, worst_at = xs[i];
        }
        EXPECT_LE(worst, f.max_ulps) << f.name << ": " << worst << " ulp at x = " << std::hexfloat << worst_at;
        EXPECT_GT(worst, 0.5) << f.name << ": no input measured above half an ulp; is the sweep reaching the kernel?";
    }
}

// Softmax's rows take exp through their own sixteen-lane copy of the formula where the CPU has
// AVX-512 (softmax.cpp), the last vector of a row masked. Log-softmax's gradient gy - exp(y) Σgy
// with gy = (-1, 0, 0, ...) is exp(y) exactly after a row's first column: held to exp's bound over
// the sweep, in rows of 2, 17 and 49, with exp's exact special values.
TEST(CpuVectorMath, F32ExpInSoftmaxRowsWithinTheStatedUlpBound) {
    const std::vector<float> xs = sweep();
    const std::int64_t count = std::int64_t(xs.size());
    for (const std::int64_t n : {2, 17, 49}) {
        const std::int64_t per_row = n - 1, rows = (count + per_row - 1) / per_row;
        std::vector<float> y(rows * n, 0.0f), gy(rows * n, 0.0f), gx(rows * n);
        auto value = [&](std::int64_t r, std::int64_t j) { return r * per_row + j - 1; };  // of xs, for j >= 1
        for (std::int64_t r = 0; r < rows; ++r) {
            gy[r * n] = -1;
            for (std::int64_t j = 1; j < n && value(r, j) < count; ++j) y[r * n + j] = xs[value(r, j)];
        }
        be::cpu_backend().softmax_backward(0, true, DType::f32, rows, n, 1, y.data(), gy.data(), gx.data());
        double worst = 0;
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 1; j < n && value(r, j) < count; ++j) {
                const float x = xs[value(r, j)], e = gx[r * n + j];
                if (std::isnan(x) || std::isinf(x) || x == 0) {
                    const float want = std::isnan(x) ? kNaN : x == kInf ? kInf : x == -kInf ? 0.0f : 1.0f;
                    ASSERT_TRUE(std::isnan(want) ? std::isnan(e) : e == want) << "exp(" << x << ") = " << e;
                    continue;
                }
                worst = std::max(worst, ulps(e, std::exp(double(x))));
            }
        EXPECT_LE(worst, 1.5) << "rows of " << n;
        EXPECT_GT(worst, 0.5) << "rows of " << n << ": is the sweep reaching the kernel?";
    }
}

// Exact answers, where std:: gives them exactly too: signs of zero, limits at ±∞, NaN.
TEST(CpuVectorMath, F32SpecialValuesAreExact) {
    const std::vector<float> x{0.0f, -0.0f, kInf, -kInf, kNaN, 1e-30f, -FLT_TRUE_MIN, 200.0f, -200.0f};
    const std::vector<float> e = f32_unary(be::Unary::exp, x);
    EXPECT_EQ(e[0], 1.0f);
    EXPECT_EQ(e[1], 1.0f);
    EXPECT_EQ(e[2], kInf);
    EXPECT_EQ(e[3], 0.0f);
    EXPECT_TRUE(std::isnan(e[4]));
    EXPECT_EQ(e[5], 1.0f);
    EXPECT_EQ(e[7], kInf);
    EXPECT_EQ(e[8], 0.0f);
    const std::vector<float> t = f32_unary(be::Unary::tanh, x);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(t[0]), std::bit_cast<std::uint32_t>(0.0f));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(t[1]), std::bit_cast<std::uint32_t>(-0.0f));
    EXPECT_EQ(t[2], 1.0f);
    EXPECT_EQ(t[3], -1.0f);
    EXPECT_TRUE(std::isnan(t[4]));
    EXPECT_EQ(t[5], 1e-30f);
    EXPECT_EQ(t[6], -FLT_TRUE_MIN);  // a subnormal is its own tanh
    EXPECT_EQ(t[7], 1.0f);
    EXPECT_EQ(t[8], -1.0f);
    const std::vector<float> s = f32_unary(be::Unary::sigmoid, x);
    EXPECT_EQ(s[0], 0.5f);
    EXPECT_EQ(s[1], 0.5f);
    EXPECT_EQ(s[2], 1.0f);
    EXPECT_EQ(s[3], 0.0f);
    EXPECT_TRUE(std::isnan(s[4]));
    EXPECT_EQ(s[7], 1.0f);
    EXPECT_EQ(s[8], 0.0f);
}

// The kernel splits long arrays among threads and vectorises with a scalar remainder: every
// position of an odd-sized array gets the same value as the same input alone.
TEST(CpuVectorMath, F32SameValueAtEveryPosition) {
    std::vector<float> x(100003);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = -20.0f + 40.0f * float(i % 997) / 997.0f;
    for (const Function& f : functions()) {
        const std::vector<float> y = f32_unary(f.op, x);
        for (std::size_t i = 0; i < x.size(); i += 1009) {
            const std::vector<float> one = f32_unary(f.op, {x[i]});
            ASSERT_EQ(y[i], one[0]) << f.name << " at position " << i << ", x = " << x[i];
        }
    }
}

}  // namespace
