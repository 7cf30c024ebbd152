// test_layers_gradients.cpp — every layer's gradients (parameters and input) against central
// finite differences in f64 (tests/gradcheck.hpp).
#include <gtest/gtest.h>

#include <functional>

#include "fluxion/layers.hpp"
#include "gradcheck.hpp"

namespace fx = fluxion;
using fx::Tensor;
using fx::testing::gradcheck;

namespace {

// A scalar that weighs every output element differently, so no gradient cancels by symmetry.
Tensor weighted(const Tensor& y) {
    Tensor w = fx::sin(fx::arange(0, double(y.numel()), 1, {.dtype = y.dtype(), .device = y.device()}) * 0.9 + 0.3);
    return fx::sum(y * w.reshape(y.shape()));
}

template <class L> ::testing::AssertionResult layer_gradcheck(const L& layer, const Tensor& x) {
    return gradcheck([](const L& l, const Tensor& v) { return weighted(l(v)); }, layer, x);
}

TEST(Gradients, Dense) {
    fx::seed(1);
    EXPECT_TRUE(layer_gradcheck(fx::Dense(4, 3, fx::tanh), fx::randn({5, 4})));
    EXPECT_TRUE(layer_gradcheck(fx::Dense(4, 3, fx::sigmoid, false), fx::randn({4})));
}

TEST(Gradients, Conv) {
    fx::seed(2);
    EXPECT_TRUE(layer_gradcheck(fx::Conv({3, 2}, 2, 3, fx::tanh, {.stride = {2, 1}, .pad = 1}), fx::randn({2, 2, 5, 4})));
    EXPECT_TRUE(layer_gradcheck(fx::Conv({2, 2}, 4, 2, {.pad = fx::SamePad(), .dilation = 2, .groups = 2}),
                                fx::randn({4, 4, 5})));
}

TEST(Gradients, ConvTranspose) {
    fx::seed(3);
    EXPECT_TRUE(layer_gradcheck(fx::ConvTranspose({3, 3}, 2, 3, fx::tanh, {.stride = 2, .pad = fx::SamePad()}),
                                fx::randn({1, 2, 3, 4})));
}

TEST(Gradients, Pools) {
    fx::seed(4);
    Tensor x = fx::randn({2, 2, 6, 5});
    EXPECT_TRUE(layer_gradcheck(fx::MaxPool({2, 2}), x));
    EXPECT_TRUE(layer_gradcheck(fx::MeanPool({3, 3}, {.stride = 2, .pad = 1}), x));
    EXPECT_TRUE(layer_gradcheck(fx::GlobalMeanPool(), x));
    EXPECT_TRUE(layer_gradcheck(fx::AdaptiveMeanPool({3, 2}), x));
    EXPECT_TRUE(layer_gradcheck(fx::AdaptiveMaxPool({4, 3}), x));
    EXPECT_TRUE(layer_gradcheck(fx::GlobalMaxPool(), x));
    EXPECT_TRUE(layer_gradcheck(fx::Flatten(), x));
}

TEST(Gradients, BatchNormTrainingAndTesting) {
    fx::seed(5);
    fx::BatchNorm bn(3, fx::tanh);
    bn.weight = fx::randn({3});
    bn.bias = fx::randn({3});
    fx::trainmode(bn);
    EXPECT_TRUE(layer_gradcheck(bn, fx::randn({4, 3, 2, 2})));
    EXPECT_TRUE(layer_gradcheck(bn, fx::randn({6, 3})));
    fx::testmode(bn);
    EXPECT_TRUE(layer_gradcheck(bn, fx::randn({2, 3})));
}

// The recorded op's other forms: without weight and bias (only x's gradient), and with x a constant
// (only the weight's and bias's).
TEST(Gradients, BatchNormWithoutAffineAndWithAConstantInput) {
    fx::seed(15);
    fx::BatchNorm plain(3, fx::tanh, {.affine = false, .track_stats = false});
    EXPECT_TRUE(layer_gradcheck(plain, fx::randn({4, 3, 2, 3})));
    fx::BatchNorm bn(3, fx::tanh);
    bn.weight = fx::randn({3});
    bn.bias = fx::randn({3});
    fx::trainmode(bn);
    const Tensor x = fx::randn({5, 3, 2, 2}).to(fx::DType::f64);  // gradcheck takes its arguments to f64
    EXPECT_TRUE(gradcheck([&x](const fx::BatchNorm& l) { return weighted(l(x)); }, bn));
}

// The kernel's other loop order (many values per row) and relu inside it.
TEST(Gradients, BatchNormWithReluOnLargerImages) {
    fx::seed(16);
    fx::BatchNorm bn(3, fx::relu);
    bn.weight = fx::randn({3});
    bn.bias = fx::randn({3});
    fx::trainmode(bn);
    EXPECT_TRUE(layer_gradcheck(bn, fx::randn({3, 3, 5, 4})));
    fx::BatchNorm plain(2, fx::tanh, {.affine = false});
    fx::trainmode(plain);
    EXPECT_TRUE(layer_gradcheck(plain, fx::randn({2, 2, 17})));
}

TEST(Gradients, LayerNorm) {
    fx::seed(6);
    fx::LayerNorm ln(fx::Shape{2, 3});
    ln.weight = fx::randn({2, 3});
    ln.bias = fx::randn({2, 3});
    EXPECT_TRUE(layer_gradcheck(ln, fx::randn({3, 2, 3})));
}

TEST(Gradients, DropoutWithAFixedMask) {
    fx::Dropout d(0.4);
    fx::trainmode(d);
    auto f = [](const fx::Dropout& l, const Tensor& v) {
        fx::seed(9);  // the same mask on every evaluation
        return weighted(l(v));
    };
    fx::seed(7);
    EXPECT_TRUE(gradcheck(f, d, fx::randn({3, 4})));
}

TEST(Gradients, EmbeddingWeights) {
    fx::seed(8);
    Tensor idx = fx::tensor(std::vector<std::int64_t>{1, 3, 1, 0}, {2, 2});
    EXPECT_TRUE(gradcheck([](const fx::Embedding& e, const Tensor& i) { return weighted(e(i)); }, fx::Embedding(4, 3), idx));
}

TEST(Gradients, ActivationsAsLayers) {
    fx::seed(10);
    Tensor x = fx::randn({3, 4});
    EXPECT_TRUE(layer_gradcheck(fx::Chain(fx::softmax), x));
    EXPECT_TRUE(layer_gradcheck(fx::Chain(fx::logsoftmax), x));
    EXPECT_TRUE(layer_gradcheck(fx::Chain(fx::elu, fx::gelu, fx::swish, fx::softplus), x));
}

TEST(Gradients, ContainersChainDynamicChainSkipAndParallel) {
    fx::seed(11);
    Tensor x = fx::randn({2, 3});
    EXPECT_TRUE(layer_gradcheck(fx::Chain(fx::Dense(3, 4, fx::tanh), fx::LayerNorm(4), fx::Dense(4, 2)), x));
    fx::DynamicChain dyn(fx::Dense(3, 3, fx::sigmoid), fx::Dense(3, 2));
    EXPECT_TRUE(layer_gradcheck(dyn, x));
    EXPECT_TRUE(layer_gradcheck(fx::SkipConnection(fx::Dense(3, 3, fx::tanh), std::multiplies<>()), x));
    EXPECT_TRUE(layer_gradcheck(fx::Parallel(fx::Concat{}, fx::Dense(3, 2), fx::Dense(3, 1, fx::tanh)), x));
}

TEST(Gradients, CheckerCatchesAWrongGradient) {
    // A function whose recorded gradient is wrong: sign() has gradient zero but x·sign(x) = |x| does not.
    auto wrong = [](const Tensor& x) { return fx::sum(x.detach() * x); };  // d/dx is x, not 2x
    EXPECT_FALSE(gradcheck(wrong, fx::tensor({1, 2, 3})));
}

}  // namespace
