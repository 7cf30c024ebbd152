// test_autodiff.cpp — the tape: gradients of several arguments, structures, unused arguments,
// non-scalar results, no-grad scopes, accumulation, and the seed's basic example.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/tape.hpp"
#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;

struct Pair {
    Tensor a;
    Tensor b;
};
FLUXION_FUNCTOR(Pair, a, b);

TEST(Autodiff, GradientOfSeveralArguments) {
    Tensor x = fx::tensor({1, 2, 3}), y = fx::tensor({4, 5, 6});
    auto [gx, gy] = fx::gradient([](const Tensor& a, const Tensor& b) { return fx::sum(a * b); }, x, y);
    EXPECT_EQ(gx.to_vector<float>(), y.to_vector<float>());
    EXPECT_EQ(gy.to_vector<float>(), x.to_vector<float>());
}

TEST(Autodiff, WithGradientReturnsTheValue) {
    Tensor x = fx::tensor({3});
    auto [value, g] = fx::withgradient([](const Tensor& a) { return fx::sum(a * a * a); }, x);
    EXPECT_EQ(value.item(), 27.0);
    EXPECT_EQ(g.item(), 27.0);
}

TEST(Autodiff, ReusedTensorsAccumulate) {
    Tensor x = fx::tensor({2});
    auto [g] = fx::gradient([](const Tensor& a) { return fx::sum(a * a + a); }, x);
    EXPECT_EQ(g.item(), 5.0);
}

TEST(Autodiff, UnusedArgumentGetsZeros) {
    Tensor x = fx::ones({2, 2}), y = fx::ones({3});
    auto [gx, gy] = fx::gradient([](const Tensor& a, const Tensor&) { return fx::sum(a); }, x, y);
    EXPECT_EQ(gy.shape(), (fx::Shape{3}));
    EXPECT_EQ(gy.to_vector<float>(), std::vector<float>(3, 0.0f));
    auto [g] = fx::gradient([](const Tensor&) { return fx::scalar(1.0); }, x);
    EXPECT_EQ(g.to_vector<float>(), std::vector<float>(4, 0.0f));
}

TEST(Autodiff, NonScalarResultIsAClearError) {
    try {
        fx::gradient([](const Tensor& a) { return a * 2.0; }, fx::ones({3}));
        FAIL();
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("fx::sum"), std::string::npos) << e.what();
    }
}

TEST(Autodiff, StructuresGetGradientsOfTheirOwnType) {
    Pair p{fx::tensor({1, 2}), fx::tensor({3})};
    auto [value, g] = fx::withgradient([](const Pair& q) { return fx::sum(q.a * q.b); }, p);
    EXPECT_EQ(value.item(), 9.0);
    EXPECT_EQ(g.a.to_vector<float>(), (std::vector<float>{3, 3}));
    EXPECT_EQ(g.b.to_vector<float>(), (std::vector<float>{3}));
}

TEST(Autodiff, NoGradScopeRecordsNothing) {
    Tensor x = fx::tensor({2});
    auto [g] = fx::gradient(
        [](const Tensor& a) {
            Tensor c;
            {
                fx::NoGrad no_grad;
                c = a * 10.0;  // treated as a constant
            }
            return fx::sum(a * c);
        },
        x);
    EXPECT_EQ(g.item(), 20.0);
    EXPECT_TRUE(fx::grad_enabled());
}

TEST(Autodiff, ArgumentsAreNotModified) {
    Tensor x = fx::tensor({1, 2});
    const void* p = x.data_ptr();
    fx::gradient([](const Tensor& a) { return fx::sum(fx::exp(a)); }, x);
    EXPECT_EQ(x.data_ptr(), p);
    EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(Autodiff, IntegerResultIsRefused) {
    EXPECT_THROW(fx::gradient([](const Tensor& a) { return fx::argmax(a); }, fx::ones({2})), fx::DTypeError);
}

// docs/ARCHITECTURE.md, "Autodiff": the seed's basic example, gradient checked against finite differences.
TEST(Autodiff, BasicExampleMatchesFiniteDifferences) {
    fx::seed(1);
    Tensor W = fx::rand({2, 5}, {.dtype = fx::DType::f64}), b = fx::rand({2}, {.dtype = fx::DType::f64});
    Tensor x = fx::rand({5}, {.dtype = fx::DType::f64}), y = fx::rand({2}, {.dtype = fx::DType::f64});
    auto loss = [&](const Tensor& W_, const Tensor& b_) { return fx::sum(fx::square(fx::matmul(W_, x) + b_ - y)); };
    auto [dW, db] = fx::gradient(loss, W, b);
    ASSERT_EQ(dW.shape(), W.shape());
    ASSERT_EQ(db.shape(), b.shape());
    // Each argument's gradient against central differences in each of its elements.
    auto check = [&](const Tensor& grad, const Tensor& arg, auto&& loss_of) {
        auto base = arg.to_vector<double>(), g = grad.to_vector<double>();
        for (std::size_t i = 0; i < base.size(); ++i) {
            auto at = [&](double d) {
                auto v = base;
                v[i] += d;
                return loss_of(fx::tensor(v, arg.shape())).item();
            };
            EXPECT_NEAR(g[i], (at(1e-6) - at(-1e-6)) / 2e-6, 1e-6) << "element " << i;
        }
    };
    check(dW, W, [&](const Tensor& v) { return loss(v, b); });
    check(db, b, [&](const Tensor& v) { return loss(W, v); });
    // And the closed form: db = 2 (W x + b - y), dW = db xᵀ.
    auto r = (fx::matmul(W, x) + b - y).to_vector<double>(), xs = x.to_vector<double>();
    auto gb = db.to_vector<double>(), gw = dW.to_vector<double>();
    for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_NEAR(gb[i], 2 * r[i], 1e-12);
        for (std::size_t j = 0; j < 5; ++j) EXPECT_NEAR(gw[i * 5 + j], 2 * r[i] * xs[j], 1e-12);
    }
}

// The reverse sweep tells an observer of each argument's gradient as soon as no entry left adds
// to it (data parallelism starts its allreduce there): in a Chain, the last layer's tensors before
// the first's, each with the value the sweep ends with; an argument the result does not use is
// told at once, without a gradient.
namespace {
struct Told {
    std::vector<std::pair<const void*, fx::Tensor>> leaves;  // storage and gradient, in the order told
    int sweeps = 0;
};
class Recording final : public fx::detail::LeafObserver {
public:
    explicit Recording(Told& told) : told_(told) { fx::detail::set_leaf_observer(this); }
    ~Recording() override { fx::detail::set_leaf_observer(nullptr); }
    void sweep_begins() override { ++told_.sweeps; }
    void leaf_ready(const fx::Tensor& leaf, const fx::Tensor& grad) override {
        told_.leaves.emplace_back(leaf.data_ptr(), grad.defined() ? grad.clone() : fx::Tensor());
    }

private:
    Told& told_;
};
}  // namespace

TEST(Autodiff, TheSweepTellsEachArgumentsGradientWhenItIsFinal) {
    fx::seed(3);
    auto model = fx::Chain(fx::Dense(4, 5, fx::tanh), fx::Dense(5, 2));
    const fx::Tensor x = fx::randn({3, 4}), unused = fx::randn({2});
    Told told;
    fx::Tensor dW1, db1, dW2, db2;
    {
        Recording recording(told);
        auto [g, du] =
            fx::gradient([&](const auto& m, const fx::Tensor&) { return fx::sum(fx::square(m(x))); }, model, unused);
        dW1 = std::get<0>(g.layers).weight, db1 = std::get<0>(g.layers).bias;
        dW2 = std::get<1>(g.layers).weight, db2 = std::get<1>(g.layers).bias;
        EXPECT_EQ(fx::max(fx::abs(du)).item(), 0.0);
    }
    EXPECT_EQ(told.sweeps, 1);
    ASSERT_EQ(told.leaves.size(), 5u);
    EXPECT_EQ(told.leaves[0].first, unused.data_ptr());
    EXPECT_FALSE(told.leaves[0].second.defined());
    auto position = [&](const fx::Tensor& t) {
        for (std::size_t i = 0; i < told.leaves.size(); ++i)
            if (told.leaves[i].first == t.data_ptr()) return i;
        ADD_FAILURE() << "not told";
        return std::size_t{0};
    };
    const auto& l1 = std::get<0>(model.layers);
    const auto& l2 = std::get<1>(model.layers);
    EXPECT_LT(position(l2.weight), position(l1.weight));
    EXPECT_LT(position(l2.bias), position(l1.weight));
    EXPECT_LT(position(l2.weight), position(l1.bias));
    const std::pair<const fx::Tensor*, const fx::Tensor*> pairs[] = {
        {&l1.weight, &dW1}, {&l1.bias, &db1}, {&l2.weight, &dW2}, {&l2.bias, &db2}};
    for (auto [param, grad] : pairs)
        EXPECT_EQ(fx::max(fx::abs(told.leaves[position(*param)].second - *grad)).item(), 0.0);
}

// autodiff.hpp: gradients of gradients are not supported; a gradient taken inside f records on its
// own tape, is right, and is a constant to the outer one, which records on after it.
TEST(Autodiff, NestedGradientIsRightAndAConstantToTheOuterTape) {
    Tensor x = fx::tensor(std::vector<double>{1.0, -2.0, 0.5});
    std::vector<double> inner_seen;
    auto [value, g] = fx::withgradient(
        [&](const Tensor& a) {
            auto [da] = fx::gradient([](const Tensor& v) { return fx::sum(v * v * v); }, a);  // 3a²
            inner_seen = da.to_vector<double>();
            return fx::sum(a * da) + fx::sum(a * a);
        },
        x);
    EXPECT_EQ(inner_seen, (std::vector<double>{3.0, 12.0, 0.75}));
    EXPECT_DOUBLE_EQ(value.item(), 3.0 - 24.0 + 0.375 + 1.0 + 4.0 + 0.25);  // Σ 3a³ + Σ a²
    // d/da [a·c + a²] with c = 3a² held constant: 3a² + 2a (not 9a² + 2a, the second-order answer).
    EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{5.0, 8.0, 1.75}));
}

// A gradient has its tensor's dtype all the way back: f32 or bf16 logits times f64 targets compute
// in f64, and the gradient reaching logsoftmax must be f32 or bf16 again (it was handed on as f64,
// which logsoftmax's kernel read as its own type: garbage, and mixed-precision training of LeNet-5,
// bf16 logits against f32 targets, diverged).
TEST(Autodiff, AGradientThroughAPromotingOpTakesItsInputsDtype) {
    const Tensor logits = fx::tensor(std::vector<double>{1, 2, 3, 4, -1, 0.5}, {2, 3});
    const Tensor targets = fx::tensor(std::vector<double>{0.5, -1, 2, 8, 0.25, 1}, {2, 3});
    auto loss = [&](const Tensor& x) { return fx::mean(-fx::sum(targets * fx::logsoftmax(x), 1)); };
    const auto want = std::get<0>(fx::gradient(loss, logits)).to_vector<double>();
    for (fx::DType narrow : {fx::DType::f32, fx::DType::bf16, fx::DType::f16}) {
        const Tensor g = std::get<0>(fx::gradient(loss, logits.to(narrow)));
        ASSERT_EQ(g.dtype(), narrow);
        const auto got = g.to(fx::DType::f64).to_vector<double>();
        const double tolerance = narrow == fx::DType::f32 ? 1e-6 : 1e-2;
        for (std::size_t i = 0; i < want.size(); ++i)
            EXPECT_NEAR(got[i], want[i], tolerance * (std::abs(want[i]) + 1)) << fx::name(narrow) << " element " << i;
    }
}
