// test_ops_promotion.cpp — the element type an op on two types computes in (fx::promote, PyTorch's
// torch.promote_types), and that arithmetic, comparisons, matmul, scalars and gradients use it, on
// the CPU and on every other functional backend.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"

namespace fx = fluxion;
using fx::DType;
using fx::Tensor;

namespace {

using enum DType;  // the table below reads as PyTorch prints it

constexpr DType kTypes[] = {boolean, u8, i32, i64, f16, bf16, f32, f64};

// torch.promote_types(a, b) for the types above in that order, printed by PyTorch 1.13.
// clang-format off
const DType kTorchTable[8][8] = {
    {boolean, u8,   i32,  i64,  f16, bf16, f32, f64},
    {u8,      u8,   i32,  i64,  f16, bf16, f32, f64},
    {i32,     i32,  i32,  i64,  f16, bf16, f32, f64},
    {i64,     i64,  i64,  i64,  f16, bf16, f32, f64},
    {f16,     f16,  f16,  f16,  f16, f32,  f32, f64},
    {bf16,    bf16, bf16, bf16, f32, bf16, f32, f64},
    {f32,     f32,  f32,  f32,  f32, f32,  f32, f64},
    {f64,     f64,  f64,  f64,  f64, f64,  f64, f64},
};
// clang-format on

TEST(Promotion, EveryPairOfTypesPromotesAsPyTorch) {
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j)
            EXPECT_EQ(fx::promote(kTypes[i], kTypes[j]), kTorchTable[i][j])
                << fx::name(kTypes[i]) << " with " << fx::name(kTypes[j]);
}

TEST(Promotion, ArithmeticComputesInThePromotedType) {
    Tensor ints = fx::tensor(std::vector<std::int32_t>{7, -3});
    Tensor sum = ints + fx::tensor({0.5f, 0.25f});
    EXPECT_EQ(sum.dtype(), DType::f32);
    EXPECT_EQ(sum.to_vector<float>(), (std::vector<float>{7.5f, -2.75f}));
    // u8 widened to i32 before adding: 200 + 100 is 300, not 300 mod 256.
    Tensor wide = fx::tensor(std::vector<std::uint8_t>{200}) + fx::tensor(std::vector<std::int32_t>{100});
    EXPECT_EQ(wide.dtype(), DType::i32);
    EXPECT_EQ(wide.to_vector<std::int32_t>(), (std::vector<std::int32_t>{300}));
    Tensor counted = fx::tensor(std::vector<bool>{true, false}) + fx::tensor(std::vector<std::uint8_t>{5, 5});
    EXPECT_EQ(counted.dtype(), DType::u8);
    EXPECT_EQ(counted.to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{6, 5}));
    // f32 widened to f64: 2^24 + 1 is exact in f64 and not in f32.
    Tensor exact = fx::tensor({16777216.0f}) + fx::tensor(std::vector<double>{1.0});
    EXPECT_EQ(exact.dtype(), DType::f64);
    EXPECT_EQ(exact.to_vector<double>(), (std::vector<double>{16777217.0}));
    Tensor big =
        fx::tensor(std::vector<std::int64_t>{std::int64_t{1} << 40}) * fx::tensor(std::vector<std::int32_t>{3});
    EXPECT_EQ(big.dtype(), DType::i64);
    EXPECT_EQ(big.to_vector<std::int64_t>(), (std::vector<std::int64_t>{std::int64_t{3} << 40}));
    Tensor halves = fx::cast(fx::tensor({1.5f}), DType::f16) - fx::cast(fx::tensor({0.25f}), DType::bf16);
    EXPECT_EQ(halves.dtype(), DType::f32);
    EXPECT_EQ(halves.to_vector<float>(), (std::vector<float>{1.25f}));
}

TEST(Promotion, ComparisonsCompareInThePromotedTypeAndGiveBool) {
    Tensor ints = fx::tensor(std::vector<std::int32_t>{1, 2, 3});
    Tensor lt = fx::lt(ints, fx::tensor({1.5f, 1.5f, 3.0f}));  // not 1 < 1, as a truncation to i32 would give
    EXPECT_EQ(lt.dtype(), DType::boolean);
    EXPECT_EQ(fx::cast(lt, DType::i32).to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, 0, 0}));
    Tensor eq = fx::eq(ints, fx::tensor({1.0f, 2.5f, 3.0f}));
    EXPECT_EQ(fx::cast(eq, DType::i32).to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, 0, 1}));
}

TEST(Promotion, MatmulOfF32AndF64IsF64) {
    Tensor a = fx::tensor({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
    Tensor b = fx::tensor(std::vector<double>{1e-9, 1.0}, {2, 1});
    Tensor c = fx::matmul(a, b);
    EXPECT_EQ(c.dtype(), DType::f64);
    const auto v = c.to_vector<double>();  // in f32 the 1e-9 would be lost
    ASSERT_EQ(v.size(), 2u);
    EXPECT_NEAR(v[0], 2.000000001, 1e-15);
    EXPECT_NEAR(v[1], 4.000000003, 1e-15);
}

// A scalar takes the tensor's type unless it does not fit it, as PyTorch's Python scalars do.
TEST(Promotion, ScalarsKeepTheTensorsTypeWhenTheyFit) {
    Tensor ints = fx::tensor(std::vector<std::int32_t>{3, -1});
    EXPECT_EQ((ints + 2.0).dtype(), DType::i32);
    EXPECT_EQ((ints + 2.0).to_vector<std::int32_t>(), (std::vector<std::int32_t>{5, 1}));
    Tensor half = ints + 0.5;
    EXPECT_EQ(half.dtype(), DType::f32);
    EXPECT_EQ(half.to_vector<float>(), (std::vector<float>{3.5f, -0.5f}));
    Tensor flags = fx::tensor(std::vector<bool>{true, false}) + 1.0;
    EXPECT_EQ(flags.dtype(), DType::i64);
    EXPECT_EQ(flags.to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 1}));
    Tensor wrapped = fx::tensor(std::vector<std::uint8_t>{200}) * 2.0;  // PyTorch: tensor([144], dtype=torch.uint8)
    EXPECT_EQ(wrapped.dtype(), DType::u8);
    EXPECT_EQ(wrapped.to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{144}));
    Tensor single = fx::tensor({1.0f}) + 1e-10;  // the scalar is rounded to f32: the result stays f32
    EXPECT_EQ(single.dtype(), DType::f32);
    EXPECT_EQ(single.to_vector<float>(), (std::vector<float>{1.0f}));
}

TEST(Promotion, GradientsHaveTheTypeOfTheirArgument) {
    Tensor x = fx::tensor({1.0f, 2.0f}), y = fx::tensor(std::vector<double>{0.1, -3.0});
    auto [gx, gy] = fx::gradient([](const Tensor& a, const Tensor& b) { return fx::sum(a * b); }, x, y);
    EXPECT_EQ(gx.dtype(), DType::f32);
    EXPECT_EQ(gx.to_vector<float>(), (std::vector<float>{0.1f, -3.0f}));
    EXPECT_EQ(gy.dtype(), DType::f64);
    EXPECT_EQ(gy.to_vector<double>(), (std::vector<double>{1.0, 2.0}));
}

// Each mixed-type expression gives the CPU's type and values on every other device that runs
// binary ops and casts on all the types involved.
TEST(Promotion, OtherBackendsPromoteAsTheCpu) {
    struct Case {
        std::string name;
        std::vector<Tensor> args;
        std::function<Tensor(const std::vector<Tensor>&)> f;
    };
    using A = std::vector<Tensor>;
    const Tensor u8 = fx::tensor(std::vector<std::uint8_t>{200, 3}),
                 i32 = fx::tensor(std::vector<std::int32_t>{100, -7});
    const Tensor i64 = fx::tensor(std::vector<std::int64_t>{std::int64_t{1} << 40, 5});
    const Tensor flags = fx::tensor(std::vector<bool>{true, false}), f32 = fx::tensor({16777216.0f, 0.5f});
    const Tensor f64 = fx::tensor(std::vector<double>{1.0, 1e-9});
    const std::vector<Case> cases = {
        {"u8 + i32", {u8, i32}, [](const A& a) { return a[0] + a[1]; }},
        {"bool + u8", {flags, u8}, [](const A& a) { return a[0] + a[1]; }},
        {"i32 * f32", {i32, f32}, [](const A& a) { return a[0] * a[1]; }},
        {"f32 + f64", {f32, f64}, [](const A& a) { return a[0] + a[1]; }},
        {"i64 * i32", {i64, i32}, [](const A& a) { return a[0] * a[1]; }},
        {"i32 < f32", {i32, f32}, [](const A& a) { return fx::lt(a[0], a[1]); }},
        {"u8 * 2", {u8}, [](const A& a) { return a[0] * 2.0; }},
        {"i32 + 0.5", {i32}, [](const A& a) { return a[0] + 0.5; }},
        {"bool + 1", {flags}, [](const A& a) { return a[0] + 1.0; }},
    };
    for (const auto& d : fx::testing::other_devices()) {
        for (const auto& c : cases) {
            const Tensor want = c.f(c.args);
            bool runs = true;
            std::string why;
            for (const auto& t : c.args) runs = runs && fx::supports(d, fx::Op::binary, t.dtype(), &why);
            runs = runs && fx::supports(d, fx::Op::binary, want.dtype(), &why) &&
                   fx::supports(d, fx::Op::cast, want.dtype(), &why);
            if (!runs) {
                std::cout << "  not run: " << c.name << " on " << d.str() << ": " << why << "\n";
                continue;
            }
            A moved;
            for (const auto& t : c.args) moved.push_back(t | d);
            Tensor got;
            try {
                got = c.f(moved);
            } catch (const fx::DTypeError& e) {
                // A clear refusal (Vulkan has no u8 or bool arithmetic, though it compares them), not a wrong value.
                std::cout << "  refused: " << c.name << " on " << d.str() << ": " << e.what() << "\n";
                continue;
            }
            const std::string where = c.name + " on " + d.str();
            EXPECT_EQ(got.device(), d) << where;
            EXPECT_EQ(got.dtype(), want.dtype()) << where;
            EXPECT_EQ(fx::cast(got | fx::cpu, DType::f64).to_vector<double>(),
                      fx::cast(want, DType::f64).to_vector<double>())
                << where;
        }
    }
}

}  // namespace

// The test backend plugin is a second device.
int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
