// test_optimisers.cpp — one and two steps of every rule and modifier against PyTorch
// (tests/reference/torch_optimisers.py, run where PyTorch imports; the numbers kept here, checked
// against it there, serve elsewhere), optimiser state, adjust, freeze/thaw, and errors.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fluxion/layers.hpp"
#include "fluxion/optimisers.hpp"
#include "torch_reference.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

Tensor f64(std::vector<double> v, fx::Shape shape) { return fx::tensor(v, shape); }

fx::Dense start() { return fx::Dense(f64({0.5, -1.2, 0.3, 2.0, 0.1, -0.7}, {2, 3}), f64({0.25, -0.5}, {2})); }
fx::Dense grad1() { return fx::Dense(f64({0.3, -0.2, 0.1, 1.5, -0.4, 0.05}, {2, 3}), f64({0.2, -0.1}, {2})); }
fx::Dense grad2() { return fx::Dense(f64({-0.1, 0.4, 0.2, 0.7, 0.3, -0.6}, {2, 3}), f64({0.05, 0.3}, {2})); }

std::vector<double> flat(const fx::Dense& d) {
    auto w = d.weight.to_vector<double>(), b = d.bias.to_vector<double>();
    w.insert(w.end(), b.begin(), b.end());
    return w;
}

void expect_values(const fx::Dense& d, const std::vector<double>& want, const char* when) {
    auto got = flat(d);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << when << ", element " << i;
}

// The script's results, computed once per test process (and cached across them).
const fx_test::TorchResults& torch_optimisers() {
    static const fx_test::TorchResults results =
        fx_test::run_torch_script(FLUXION_SOURCE_DIR "/tests/reference/torch_optimisers.py", "", "torch_optimisers");
    return results;
}

// Two steps (gradients g1, g2) must give PyTorch's parameters after each: the numbers kept from the
// script's case `name` (15 significant digits) and, where PyTorch runs, the script's own, with the
// kept numbers checked against those.
template <class Rule> void expect_pytorch(const Rule& rule, const std::string& name, const std::vector<double>& step1,
                                          const std::vector<double>& step2) {
    fx::Dense model = start();
    auto opt = fx::setup(rule, model);
    fx::update(opt, model, grad1());
    expect_values(model, step1, "after step 1");
    const auto after1 = flat(model);
    fx::update(opt, model, grad2());
    expect_values(model, step2, "after step 2");
    if (!fx_test::ran(torch_optimisers())) return;
    const auto& script = torch_optimisers().results.at(name);
    fx_test::expect_close(after1, script.at(0), 1e-14, 1e-15, name + " after step 1");
    fx_test::expect_close(flat(model), script.at(1), 1e-14, 1e-15, name + " after step 2");
    fx_test::expect_kept(step1, script.at(0), 1e-13, name + " after step 1");
    fx_test::expect_kept(step2, script.at(1), 1e-13, name + " after step 2");
}

TEST(Optimisers, DescentMatchesPyTorch) {
    expect_pytorch(fx::Descent{.eta = 0.1}, "Descent(0.1)", {0.47, -1.18, 0.29, 1.85, 0.14, -0.705, 0.23, -0.49},
                   {0.48, -1.22, 0.27, 1.78, 0.11, -0.645, 0.225, -0.52});
}

TEST(Optimisers, MomentumMatchesPyTorch) {
    expect_pytorch(fx::Momentum{.eta = 0.05, .rho = 0.8}, "Momentum(0.05, 0.8)",
                   {0.485, -1.19, 0.295, 1.925, 0.12, -0.7025, 0.24, -0.495},
                   {0.478, -1.202, 0.281, 1.83, 0.121, -0.6745, 0.2295, -0.506});
}

TEST(Optimisers, NesterovMatchesPyTorch) {
    expect_pytorch(fx::Nesterov{.eta = 0.05, .rho = 0.8}, "Nesterov(0.05, 0.8)",
                   {0.473, -1.182, 0.291, 1.865, 0.136, -0.7045, 0.232, -0.491},
                   {0.4724, -1.2116, 0.2698, 1.754, 0.1218, -0.6521, 0.2211, -0.5148});
}

TEST(Optimisers, RMSPropMatchesPyTorch) {
    expect_pytorch(fx::RMSProp{.eta = 0.01, .rho = 0.9, .epsilon = 1e-8}, "RMSProp(0.01, 0.9, 1e-8)",
                   {0.468377226731649, -1.16837722839832, 0.268377233398313, 1.96837722406498, 0.131622774101684,
                    -0.731622756601696, 0.218377228398315, -0.468377233398313},
                   {0.478860073999967, -1.19694865492893, 0.239805808908517, 1.95441903628338, 0.112011161869917,
                    -0.700098342008447, 0.210319000056763, -0.498528364825787});
}

TEST(Optimisers, AdamMatchesPyTorch) {
    expect_pytorch(fx::Adam{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.99, .epsilon = 1e-8}, "Adam(0.01, 0.8, 0.99, 1e-8)",
                   {0.490000000333333, -1.1900000005, 0.290000001, 1.99000000006667, 0.10999999975, -0.709999998,
                    0.2400000005, -0.490000001},
                   {0.486514659759404, -1.19421002858123, 0.28017660245398, 1.98096719050829, 0.110314490749463,
                    -0.702710409370039, 0.231978931541518, -0.495454990895044});
}

TEST(Optimisers, AdamWMatchesPyTorch) {
    expect_pytorch(fx::AdamW{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.99, .lambda = 0.1, .epsilon = 1e-8},
                   "AdamW(0.01, 0.8, 0.99, 0.1, 1e-8)",
                   {0.489500000333333, -1.1888000005, 0.289700001, 1.98800000006667, 0.10989999975, -0.709299998,
                    0.2397500005, -0.489500001},
                   {0.485525159759071, -1.19182122858073, 0.27958690245298, 1.97697919050823, 0.110104590749713,
                    -0.701301109372039, 0.231489181541018, -0.494465490894044});
}

TEST(Optimisers, WeightDecayInAChainMatchesPyTorchsWeightDecay) {
    expect_pytorch(
        fx::OptimiserChain(fx::WeightDecay{0.01}, fx::Momentum{.eta = 0.05, .rho = 0.8}),
        "WeightDecay(0.01) + Momentum(0.05, 0.8)",
        {0.48475, -1.1894, 0.29485, 1.924, 0.11995, -0.70215, 0.239875, -0.49475},
        {0.477307625, -1.2003253, 0.280582575, 1.827238, 0.120850025, -0.673518925, 0.2291550625, -0.505302625});
}

TEST(Optimisers, ClipGradMatchesPyTorchsClipGradValue) {
    expect_pytorch(fx::OptimiserChain(fx::ClipGrad{0.5}, fx::Descent{.eta = 0.1}), "ClipGrad(0.5) + Descent(0.1)",
                   {0.47, -1.18, 0.29, 1.95, 0.14, -0.705, 0.23, -0.49},
                   {0.48, -1.22, 0.27, 1.9, 0.11, -0.655, 0.225, -0.52});
}

TEST(Optimisers, ClipNormScalesByTheGlobalNormAsPyTorchsClipGradNorm) {
    expect_pytorch(fx::OptimiserChain(fx::ClipNorm{1.0}, fx::Adam{.eta = 0.01}), "ClipNorm(1.0) + Adam(0.01)",
                   {0.490000000537743, -1.19000000080661, 0.290000001613227, 1.99000000010755, 0.109999999596693,
                    -0.709999996773546, 0.240000000806614, -0.490000001613227},
                   {0.487200154159687, -1.19484678623952, 0.280779131797908, 1.98028178170317, 0.109064761336295,
                    -0.702955911207124, 0.231166627693726, -0.495748510300258});
}

TEST(Optimisers, ClipNormLeavesSmallGradientsAlone) {
    std::vector<Tensor> g{fx::tensor({0.3f, 0.4f})}, p{fx::zeros({2})};
    fx::ClipNorm{1.0}.modify(g, p);
    EXPECT_NEAR(g[0].to_vector<float>()[0], 0.3f, 1e-6);
    fx::ClipNorm{0.25}.modify(g, p);  // norm 0.5 -> 0.25
    EXPECT_NEAR(g[0].to_vector<float>()[1], 0.2f, 1e-5);
}

TEST(Optimisers, StateIsShapedLikeTheTrainableTensorsOnTheModelsDevice) {
    const fx::Device host0{"TestHost", 0};
    auto model = fx::Chain(fx::Dense(3, 4), fx::BatchNorm(4)) | host0;
    auto opt = fx::setup(fx::Adam{}, model);
    ASSERT_EQ(opt.params.size(), 4u);  // the running statistics are not trainable
    EXPECT_EQ(opt.params[0].path, "layers.0.weight");
    EXPECT_EQ(opt.params[3].path, "layers.1.bias");
    EXPECT_EQ(opt.params[0].state1.shape(), (fx::Shape{4, 3}));
    EXPECT_EQ(opt.params[0].state2.device(), host0);
    EXPECT_FALSE(fx::setup(fx::Descent{}, model).params[0].state1.defined());

    auto grads = fx::fmap([](const Tensor& t) { return fx::ones_like(t); }, model);
    Tensor running_before = std::get<1>(model.layers).running_mean | fx::cpu;
    fx::update(opt, model, grads);
    EXPECT_EQ(opt.params[0].t, 1);
    EXPECT_NEAR((std::get<0>(model.layers).bias | fx::cpu).to_vector<float>()[0], -1e-3f, 1e-7);
    EXPECT_EQ((std::get<1>(model.layers).running_mean | fx::cpu).to_vector<float>(), running_before.to_vector<float>());
}

TEST(Optimisers, AdjustChangesTheLearningRateOfTheRule) {
    fx::Dense model = start();
    auto opt = fx::setup(fx::OptimiserChain(fx::ClipGrad{10}, fx::Descent{.eta = 0.1}), model);
    fx::adjust(opt, 0.01);
    EXPECT_EQ(opt.rule.rule().eta, 0.01);
    fx::update(opt, model, grad1());
    EXPECT_NEAR(flat(model)[0], 0.5 - 0.01 * 0.3, 1e-12);
}

TEST(Optimisers, FreezeAndThawByPathPrefix) {
    auto model = fx::Chain(fx::Dense(2, 2), fx::Dense(2, 1));
    auto opt = fx::setup(fx::Descent{}, model);
    auto ones = fx::fmap([](const Tensor& t) { return fx::ones_like(t); }, model);
    auto w0 = std::get<0>(model.layers).weight.to_vector<float>();
    auto w1 = std::get<1>(model.layers).weight.to_vector<float>();
    fx::freeze(opt, "layers.0");
    fx::update(opt, model, ones);
    EXPECT_EQ(std::get<0>(model.layers).weight.to_vector<float>(), w0);
    EXPECT_NE(std::get<1>(model.layers).weight.to_vector<float>(), w1);
    EXPECT_EQ(opt.params[0].t, 0);
    fx::thaw(opt, "layers.0.weight");
    fx::update(opt, model, ones);
    EXPECT_NE(std::get<0>(model.layers).weight.to_vector<float>(), w0);
    EXPECT_TRUE(opt.params[1].frozen);  // layers.0.bias stays frozen
    EXPECT_THROW(fx::freeze(opt, "layers.2"), fx::ValueError);
    EXPECT_THROW(fx::freeze(opt, "layers.0.w"), fx::ValueError);  // prefixes end at a dot
}

TEST(Optimisers, BadArgumentsChangeNothing) {
    fx::DynamicChain model(fx::Dense(2, 2));
    auto opt = fx::setup(fx::Momentum{}, model);
    auto before = model[0].as<fx::Dense>().weight.to_vector<float>();

    fx::DynamicChain wrong_shape(fx::Dense(3, 2));
    EXPECT_THROW(fx::update(opt, model, wrong_shape), fx::ShapeError);
    fx::DynamicChain grown = model;
    grown.push_back(fx::Dense(2, 2));
    EXPECT_THROW(fx::update(opt, grown, grown), fx::ValueError);
    fx::DynamicChain elsewhere = model | fx::Device{"TestHost", 0};
    EXPECT_THROW(fx::update(opt, model, elsewhere), fx::DeviceError);

    EXPECT_EQ(model[0].as<fx::Dense>().weight.to_vector<float>(), before);
    EXPECT_EQ(opt.params[0].t, 0);
    EXPECT_EQ(opt.params[0].state1.to_vector<float>(), std::vector<float>(4, 0.0f));
}

TEST(Optimisers, StridedParametersAreUpdatedInPlace) {
    Tensor base = fx::tensor({1, 2, 3, 4}, {2, 2});
    fx::Dense model(base.transpose());  // a non-contiguous view of `base`
    auto opt = fx::setup(fx::Descent{.eta = 1}, model);
    fx::update(opt, model, fx::Dense(fx::tensor({1, 0, 0, 0}, {2, 2})));
    EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{0, 2, 3, 4}));
}

TEST(Optimisers, TrainAnF32ModelWithWithgradient) {
    fx::seed(1);
    fx::Dense model(3, 1);
    Tensor x = fx::randn({16, 3}), w = fx::tensor({1, -2, 0.5f}, {3, 1});
    Tensor y = fx::matmul(x, w);
    auto opt = fx::setup(fx::Adam{.eta = 0.05}, model);
    double first = 0, last = 0;
    for (int i = 0; i < 200; ++i) {
        auto [loss, grads] = fx::withgradient(
            [&](const fx::Dense& m) { return fx::mean(fx::square(m(x) - y)); }, model);
        if (i == 0) first = loss.item();
        last = loss.item();
        fx::update(opt, model, grads);
    }
    EXPECT_LT(last, first * 1e-3);
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
