// test_ops_strided.cpp — convolution and pooling on inputs that are views, not contiguous tensors:
// channels-last data permuted to NCHW, strided slices, broadcast (stride 0) batches, and permuted
// weights. Each must give the values and the gradients that its contiguous copy gives (the op
// table, test_ops.cpp, checks the contiguous ones against PyTorch).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

struct View {
    std::string name;
    Tensor x;  // {2, 3, 6, 7}, not contiguous
};

// The same {2, 3, 6, 7} values three ways, none of them contiguous.
std::vector<View> views(fx::DType dtype) {
    fx::seed(21);
    Tensor nhwc = fx::randn({2, 6, 7, 3}, {.dtype = dtype});
    Tensor wide = fx::randn({2, 3, 12, 10}, {.dtype = dtype});
    Tensor one = fx::randn({1, 3, 6, 7}, {.dtype = dtype});
    return {{"channels-last permuted", nhwc.permute({0, 3, 1, 2})},
            {"strided slice", wide.slice(2, 0, 12, 2).slice(3, 2, 9)},
            {"broadcast batch", one.expand({2, 3, 6, 7})}};
}

using Op = std::function<Tensor(const Tensor&)>;

// f(view) against f(view.contiguous()): values, and the gradient of Σ f(x)·w.
void expect_same_as_contiguous(const Op& f, const Tensor& view, double tol) {
    ASSERT_FALSE(view.is_contiguous());
    Tensor c = view.contiguous();
    Tensor want = f(c), got = f(view);
    ASSERT_EQ(got.shape(), want.shape());
    auto g = got.to_vector<double>(), e = want.to_vector<double>();
    for (std::size_t i = 0; i < e.size(); ++i) ASSERT_NEAR(g[i], e[i], tol * (1 + std::abs(e[i]))) << "value " << i;
    fx::seed(22);
    Tensor w = fx::randn(want.shape(), {.dtype = want.dtype()});
    auto [gv] = fx::gradient([&](const Tensor& a) { return fx::sum(f(a) * w); }, view);
    auto [gc] = fx::gradient([&](const Tensor& a) { return fx::sum(f(a) * w); }, c);
    ASSERT_EQ(gv.shape(), view.shape());
    g = gv.to_vector<double>(), e = gc.to_vector<double>();
    for (std::size_t i = 0; i < e.size(); ++i) ASSERT_NEAR(g[i], e[i], tol * (1 + std::abs(e[i]))) << "gradient " << i;
}

class Strided : public ::testing::TestWithParam<fx::DType> {
protected:
    double tol() const { return GetParam() == fx::DType::f64 ? 1e-12 : 1e-5; }
    Tensor weight(const fx::Shape& shape) const {
        fx::seed(23);
        return fx::randn(shape, {.dtype = GetParam()});
    }
    void expect_every_view(const std::string& what, const Op& f) const {
        for (const auto& v : views(GetParam())) {
            SCOPED_TRACE(what + " of a " + v.name + " input");
            expect_same_as_contiguous(f, v.x, tol());
        }
    }
};

TEST_P(Strided, Conv2dOfAViewIsConv2dOfItsCopy) {
    Tensor w = weight({4, 3, 3, 2});
    expect_every_view("conv2d", [&](const Tensor& x) {
        return fx::conv2d(x, w, {.stride = {2, 1}, .padding = {1, 1}});
    });
}

TEST_P(Strided, Conv2dWithAPermutedWeightIsConv2dWithItsCopy) {
    Tensor x = views(GetParam())[1].x.contiguous();
    Tensor hwio = weight({3, 2, 3, 4});  // {kh, kw, in, out} data, seen as {out, in, kh, kw}
    const Op dilated = [&](const Tensor& k) { return fx::conv2d(x, k, {.dilation = {2, 1}}); };
    expect_same_as_contiguous(dilated, hwio.permute({3, 2, 0, 1}), tol());
}

TEST_P(Strided, ConvTranspose2dOfAViewIsConvTranspose2dOfItsCopy) {
    Tensor w = weight({3, 2, 3, 3});
    expect_every_view("conv_transpose2d", [&](const Tensor& x) {
        return fx::conv_transpose2d(x, w, {.stride = {2, 2}, .padding = {1, 0}}, {1, 0});
    });
}

TEST_P(Strided, PoolingOfAViewIsPoolingOfItsCopy) {
    expect_every_view("maxpool2d", [](const Tensor& x) {
        return fx::maxpool2d(x, {.window = {3, 2}, .stride = {2, 1}, .padding = {1, 1}});
    });
    expect_every_view("meanpool2d", [](const Tensor& x) {
        return fx::meanpool2d(x, {.window = {2, 3}, .padding = {1, 1}});
    });
}

INSTANTIATE_TEST_SUITE_P(Types, Strided, ::testing::Values(fx::DType::f32, fx::DType::f64),
                         [](const auto& info) { return std::string(fx::name(info.param)); });

}  // namespace
