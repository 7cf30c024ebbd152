// test_ops_strided.cpp — convolution and pooling on inputs that are views, not contiguous tensors:
// channels-last data permuted to NCHW, strided slices, broadcast (stride 0) batches, and permuted
// weights, on the CPU and every other functional backend. Each must give the values and the
// gradients that its contiguous copy gives on the same device (the op table, test_ops.cpp, checks
// the contiguous ones against PyTorch and across backends). The convolution and pooling kernels
// take no strides: conv_forward and pool (src/core/ops/nn.cpp) copy a view dense first, so this
// tests that copy on each backend and the gradients' way back through the view, not strided
// kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

struct View {
    std::string name;
    Tensor x;  // {2, 3, 6, 7}, not contiguous
};

// The same {2, 3, 6, 7} values three ways on `device`, none of them contiguous: views of tensors
// moved there.
std::vector<View> views(fx::DType dtype, const fx::Device& device = {}) {
    fx::seed(21);
    Tensor nhwc = fx::randn({2, 6, 7, 3}, {.dtype = dtype}) | device;
    Tensor wide = fx::randn({2, 3, 12, 10}, {.dtype = dtype}) | device;
    Tensor one = fx::randn({1, 3, 6, 7}, {.dtype = dtype}) | device;
    return {{"channels-last permuted", nhwc.permute({0, 3, 1, 2})},
            {"strided slice", wide.slice(2, 0, 12, 2).slice(3, 2, 9)},
            {"broadcast batch", one.expand({2, 3, 6, 7})}};
}

using Op = std::function<Tensor(const Tensor&)>;

// f(view) against f(view.contiguous()) on the view's device: values, and the gradient of Σ f(x)·w.
void expect_same_as_contiguous(const Op& f, const Tensor& view, double tol) {
    ASSERT_FALSE(view.is_contiguous());
    Tensor c = view.contiguous();
    Tensor want = f(c) | fx::cpu, got = f(view);
    ASSERT_EQ(got.device(), view.device());
    ASSERT_EQ(got.shape(), want.shape());
    auto g = (got | fx::cpu).to_vector<double>(), e = want.to_vector<double>();
    for (std::size_t i = 0; i < e.size(); ++i) ASSERT_NEAR(g[i], e[i], tol * (1 + std::abs(e[i]))) << "value " << i;
    fx::seed(22);
    Tensor w = fx::randn(want.shape(), {.dtype = want.dtype()}) | view.device();
    auto [gv] = fx::gradient([&](const Tensor& a) { return fx::sum(f(a) * w); }, view);
    auto [gc] = fx::gradient([&](const Tensor& a) { return fx::sum(f(a) * w); }, c);
    ASSERT_EQ(gv.shape(), view.shape());
    g = (gv | fx::cpu).to_vector<double>(), e = (gc | fx::cpu).to_vector<double>();
    for (std::size_t i = 0; i < e.size(); ++i) ASSERT_NEAR(g[i], e[i], tol * (1 + std::abs(e[i]))) << "gradient " << i;
}

class Strided : public ::testing::TestWithParam<fx::DType> {
protected:
    double tol() const { return GetParam() == fx::DType::f64 ? 1e-12 : 1e-5; }
    Tensor weight(const fx::Shape& shape) const {
        fx::seed(23);
        return fx::randn(shape, {.dtype = GetParam()});
    }
    // The CPU and every other device that runs this element type.
    std::vector<fx::Device> devices() const {
        std::vector<fx::Device> out{fx::Device{}};
        for (const auto& d : fx::testing::other_devices(GetParam())) out.push_back(d);
        return out;
    }
    void expect_every_view(const std::string& what, const Op& f) const {
        for (const auto& d : devices())
            for (const auto& v : views(GetParam(), d)) {
                SCOPED_TRACE(what + " of a " + v.name + " input on " + d.str());
                expect_same_as_contiguous(f, v.x, tol());
            }
    }
};

TEST_P(Strided, Conv2dOfAViewIsConv2dOfItsCopy) {
    Tensor w = weight({4, 3, 3, 2});
    expect_every_view("conv2d", [&](const Tensor& x) {
        return fx::conv2d(x, w | x.device(), {.stride = {2, 1}, .padding = {1, 1}});
    });
}

TEST_P(Strided, Conv2dWithAPermutedWeightIsConv2dWithItsCopy) {
    for (const auto& d : devices()) {
        SCOPED_TRACE("on " + d.str());
        Tensor x = views(GetParam(), d)[1].x.contiguous();
        Tensor hwio = weight({3, 2, 3, 4}) | d;  // {kh, kw, in, out} data, seen as {out, in, kh, kw}
        const Op dilated = [&](const Tensor& k) { return fx::conv2d(x, k, {.dilation = {2, 1}}); };
        expect_same_as_contiguous(dilated, hwio.permute({3, 2, 0, 1}), tol());
    }
}

TEST_P(Strided, ConvTranspose2dOfAViewIsConvTranspose2dOfItsCopy) {
    Tensor w = weight({3, 2, 3, 3});
    expect_every_view("conv_transpose2d", [&](const Tensor& x) {
        return fx::conv_transpose2d(x, w | x.device(), {.stride = {2, 2}, .padding = {1, 0}}, {1, 0});
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

// The test backend plugin is a second device.
int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
