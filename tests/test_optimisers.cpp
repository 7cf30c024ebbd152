// test_optimisers.cpp — one and two steps of every rule and modifier against PyTorch
// (tests/reference/torch_optimisers.py, run where PyTorch imports; the numbers kept here, checked
// against it there, serve elsewhere), optimiser state, adjust, freeze/thaw, and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/optimiser_constants.hpp"
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

// ---- the longer runs: 50 steps in f64 and f32 (tests/reference/torch_optimiser_steps.py) ----

const fx_test::TorchResults& torch_optimiser_steps() {
    static const fx_test::TorchResults results = fx_test::run_torch_script(
        FLUXION_SOURCE_DIR "/tests/reference/torch_optimiser_steps.py", "", "torch_optimiser_steps");
    return results;
}

// The script's gradients: element i (W's six, then b's two) at step k is ((7k + 13i) mod 17 - 8) / 8.
fx::Dense step_gradient(int k, fx::DType t) {
    std::vector<double> g(8);
    for (int i = 0; i < 8; ++i) g[std::size_t(i)] = double((7 * k + 13 * i) % 17 - 8) / 8;
    return fx::Dense(f64({g.begin(), g.begin() + 6}, {2, 3}).to(t), f64({g.begin() + 6, g.end()}, {2}).to(t));
}

// 50 steps in f64 and f32 must give the script's parameters after every step (f64 to rounding, f32
// to its precision), and the f64 run's last step the numbers kept here where PyTorch is missing.
template <class Rule>
void expect_pytorch_steps(const Rule& rule, const std::string& name, const std::vector<double>& last_f64) {
    for (auto t : {fx::DType::f64, fx::DType::f32}) {
        const fx::Dense s = start();
        fx::Dense model(s.weight.to(t), s.bias.to(t));
        auto opt = fx::setup(rule, model);
        std::vector<std::vector<double>> after;
        for (int k = 0; k < 50; ++k) {
            fx::update(opt, model, step_gradient(k, t));
            after.push_back(flat(model));
        }
        const std::string what = name + (t == fx::DType::f64 ? " f64" : " f32");
        if (t == fx::DType::f64) expect_values(model, last_f64, "after step 50");
        if (!fx_test::ran(torch_optimiser_steps())) continue;
        const auto& script = torch_optimiser_steps().results.at(what);
        const double rtol = t == fx::DType::f64 ? 1e-12 : 1e-5, atol = t == fx::DType::f64 ? 1e-14 : 1e-6;
        for (int k = 0; k < 50; ++k)
            fx_test::expect_close(after[std::size_t(k)], script.at(k), rtol, atol,
                                  what + " after step " + std::to_string(k + 1));
        if (t == fx::DType::f64) fx_test::expect_kept(last_f64, script.at(49), 1e-13, what + " after step 50");
    }
}

TEST(Optimisers, AMSGradMatchesPyTorch) {
    expect_pytorch_steps(fx::AMSGrad{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.99, .epsilon = 1e-8}, "AMSGrad",
                         {0.518819047615553, -1.19745015298519, 0.273750017009003, 2.01440959922226, 0.11142912136176,
                          -0.720778496921179, 0.250437722020045, -0.47564857631944});
}
TEST(Optimisers, OAdamMatchesItsFormulas) {
    expect_pytorch_steps(fx::OAdam{.eta = 0.01, .beta1 = 0.5, .beta2 = 0.9, .epsilon = 1e-8}, "OAdam",
                         {0.507082495122284, -1.20805860025339, 0.27628533302927, 2.02019340698579, 0.110375752645159,
                          -0.706341127726539, 0.233547549713487, -0.477507814772485});
}
TEST(Optimisers, AdaGradMatchesPyTorch) {
    expect_pytorch_steps(fx::AdaGrad{.eta = 0.1, .epsilon = 1e-8}, "AdaGrad",
                         {0.565509162046438, -1.21878463842701, 0.135139024396543, 2.0638950631911, 0.142075805361162,
                          -0.757740134060153, 0.198608412496363, -0.391448578875609});
}
TEST(Optimisers, AdaDeltaMatchesPyTorch) {
    expect_pytorch_steps(fx::AdaDelta{.eta = 1.0, .rho = 0.9, .epsilon = 1e-6}, "AdaDelta",
                         {0.500452602396947, -1.20189772627752, 0.294069576005783, 2.00541658346351, 0.101798558251019,
                          -0.700210972188991, 0.244410056563603, -0.493166078544537});
}
TEST(Optimisers, AdaMaxMatchesPyTorch) {
    expect_pytorch_steps(fx::AdaMax{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.99, .epsilon = 1e-8}, "AdaMax",
                         {0.516948796092047, -1.20137649007135, 0.279541175070867, 2.0131846802745, 0.111436475749307,
                          -0.717045754099681, 0.247470890486964, -0.481224680286519});
}
TEST(Optimisers, NAdamMatchesPyTorch) {
    expect_pytorch_steps(fx::NAdam{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.99, .epsilon = 1e-8, .psi = 4e-3}, "NAdam",
                         {0.504623419238501, -1.20416956324935, 0.279397997116538, 2.01500731434468, 0.106029233701388,
                          -0.708664377289527, 0.236497921366765, -0.479473700549536});
}
TEST(Optimisers, RAdamMatchesPyTorchBeforeAndAfterTheRectificationStarts) {
    expect_pytorch_steps(fx::RAdam{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.99, .epsilon = 1e-8}, "RAdam",
                         {0.51505081874643, -1.200069322112, 0.286381317968212, 2.00624772051184, 0.110338806157886,
                          -0.709399564371187, 0.25405210782502, -0.493304339631396});
}
TEST(Optimisers, AdaBeliefMatchesItsFormulas) {
    expect_pytorch_steps(fx::AdaBelief{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.99, .epsilon = 1e-12}, "AdaBelief",
                         {0.523626262463884, -1.19777240864053, 0.266848248369454, 2.01759934730511, 0.114653235356499,
                          -0.724856417295467, 0.250178568986341, -0.470736167191035});
}
TEST(Optimisers, LionMatchesItsFormulas) {
    expect_pytorch_steps(fx::Lion{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.95}, "Lion",
                         {0.56, -1.16, 0.32, 2.04, 0.14, -0.68, 0.29, -0.44});
}
TEST(Optimisers, RpropMatchesPyTorch) {
    expect_pytorch_steps(
        fx::Rprop{.eta = 0.01, .ell_minus = 0.5, .ell_plus = 1.2, .gamma_min = 1e-4, .gamma_max = 0.05}, "Rprop",
        {0.5236475, -1.21254625, 0.2704225, 2.01055375, 0.0871725, -0.7213275, 0.24536, -0.47932});
}

// NAdam's product of momentum weights μ_1 ⋯ μ_t comes in closed form (no state): it must be the
// running product that PyTorch keeps, to rounding while it is not negligible, and to 1e-15 where it
// enters the step (as 1 - product) ever after.
TEST(Optimisers, NAdamsClosedFormProductIsTheRunningProduct) {
    for (double psi : {4e-3, 0.0, 0.5}) {
        double running = 1;
        for (int t = 1; t <= 3000; ++t) {
            running *= fx::backend::detail::nadam_mu(0.9, psi, t);
            const double closed = fx::backend::detail::nadam_mu_product(0.9, psi, t);
            ASSERT_NEAR(closed, running, 1e-15) << "psi " << psi << ", t " << t;
            if (t <= 50) {
                ASSERT_NEAR(closed, running, 1e-13 * running) << "psi " << psi << ", t " << t;
            }
        }
    }
}

TEST(Optimisers, SignDecayAddsKappaTimesTheSignOfTheParameter) {
    std::vector<Tensor> g{f64({0.5, 0.5, 0.5}, {3})}, p{f64({-2.0, 0.0, 3.0}, {3})};
    fx::SignDecay{0.25}.modify(g, p);
    EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{0.25, 0.5, 0.75}));
}

// Optimisers.jl's example: two gradients, no change after the first, their mean after the second.
TEST(Optimisers, AccumGradPassesTheMeanOfNGradientsOnEveryNthStep) {
    fx::Dense model(f64({1.0}, {1, 1}), f64({2.0}, {1}));
    auto opt = fx::setup(fx::OptimiserChain(fx::AccumGrad{2}, fx::WeightDecay{0.01}, fx::Descent{0.1}), model);
    fx::update(opt, model, fx::Dense(f64({33.0}, {1, 1}), f64({0.0}, {1})));
    EXPECT_EQ(flat(model), (std::vector<double>{1.0, 2.0}));
    EXPECT_EQ(opt.params[0].t, 0);
    fx::update(opt, model, fx::Dense(f64({0.0}, {1, 1}), f64({444.0}, {1})));
    expect_values(model, {-0.651, -20.202}, "after the second gradient");
    EXPECT_EQ(opt.params[0].t, 1);
    EXPECT_EQ(opt.params[0].accumulated_steps, 0);
}

// Six steps of AccumGrad{3} and Adam are two Adam steps on the means of three gradients.
TEST(Optimisers, AccumGradThenAdamIsAdamOnTheMeans) {
    fx::Dense accumulating = start(), plain = start();
    auto opt = fx::setup(fx::OptimiserChain(fx::AccumGrad{3}, fx::Adam{.eta = 0.01}), accumulating);
    auto opt_plain = fx::setup(fx::Adam{.eta = 0.01}, plain);
    for (int k = 0; k < 6; k += 3) {
        const auto g0 = step_gradient(k, fx::DType::f64), g1 = step_gradient(k + 1, fx::DType::f64),
                   g2 = step_gradient(k + 2, fx::DType::f64);
        for (const auto& g : {g0, g1, g2}) fx::update(opt, accumulating, g);
        fx::update(opt_plain, plain,
                   fx::Dense(g0.weight / 3.0 + g1.weight / 3.0 + g2.weight / 3.0,
                             g0.bias / 3.0 + g1.bias / 3.0 + g2.bias / 3.0));
    }
    expect_values(accumulating, flat(plain), "after six accumulated steps");
    EXPECT_EQ(opt.params[0].t, 2);
    static_assert(!fx::replayable<fx::OptimiserChain<fx::AccumGrad, fx::Adam>>());  // compile refuses it
}

TEST(Optimisers, AccumGradOfNoGradientIsAnError) {
    fx::Dense model = start();
    EXPECT_THROW(fx::setup(fx::OptimiserChain(fx::AccumGrad{0}, fx::Adam{}), model), fx::ValueError);
}

// A modifier after the rule changes its update: Adam then WeightDecay{η λ} is AdamW's decoupled
// decay (to rounding: p - Δ - ηλ p against AdamW's p (1 - ηλ) - Δ), and ClipGrad after Descent{1}
// clips the update itself. The two formulas round apart by an ulp or so a step; after 50 steps in
// f32 that reached 10 ulps (1.2e-6 at 1.9) in the sanitizers' build, whose code rounds differently
// from the release build's, so f32 is held to 1e-5 relative: still a thousand times below the
// 0.01-0.1 by which coupled decay (the modifier before the rule) moves these parameters.
TEST(Optimisers, ModifiersAfterTheRuleTransformItsUpdate) {
    for (auto t : {fx::DType::f64, fx::DType::f32}) {
        const fx::Dense s = start();
        fx::Dense chained(s.weight.to(t), s.bias.to(t)), adamw(s.weight.to(t), s.bias.to(t));
        const fx::Adam adam{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.99};
        auto opt = fx::setup(fx::OptimiserChain(adam, fx::WeightDecay{1e-3}), chained);
        auto opt_w = fx::setup(fx::AdamW{.eta = 0.01, .beta1 = 0.8, .beta2 = 0.99, .lambda = 0.1}, adamw);
        for (int k = 0; k < 50; ++k) {
            fx::update(opt, chained, step_gradient(k, t));
            fx::update(opt_w, adamw, step_gradient(k, t));
        }
        const auto got = flat(chained), want = flat(adamw);
        for (std::size_t i = 0; i < got.size(); ++i)
            EXPECT_NEAR(got[i], want[i], t == fx::DType::f64 ? 1e-13 : 1e-5 * std::max(1.0, std::abs(want[i])))
                << fx::name(t) << " element " << i;
        EXPECT_EQ(opt.params[0].t, 50);
    }
    fx::Dense model = start();
    auto opt = fx::setup(fx::OptimiserChain(fx::Descent{1.0}, fx::ClipGrad{0.5}), model);
    fx::update(opt, model, grad1());  // 1.5 in W[1, 0] is clipped to 0.5
    expect_values(model, {0.2, -1.0, 0.2, 1.5, 0.5, -0.75, 0.05, -0.4}, "after a clipped update");
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
