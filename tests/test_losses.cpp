// test_losses.cpp — each loss, its aggregations and its gradient against PyTorch
// (tests/reference/torch_losses.py, run where PyTorch imports; the numbers kept here, checked against
// it there, serve elsewhere), stability for huge logits, and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "fluxion/autodiff.hpp"
#include "fluxion/compile.hpp"
#include "fluxion/layers.hpp"
#include "fluxion/optimisers.hpp"
#include "fluxion/losses.hpp"
#include "fluxion/ops.hpp"
#include "gradcheck.hpp"
#include "torch_reference.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

Tensor f64(std::vector<double> v, fx::Shape shape) { return fx::tensor(v, shape); }

const Tensor yhat = f64({0.2, -1.3, 2.1, 1.7, 0.4, -0.6}, {2, 3});
const Tensor y = f64({0.5, -1.0, 0.0, 1.0, 2.0, -0.5}, {2, 3});
const Tensor logits = f64({1.5, -0.3, 0.8, -2.0, 0.1, 3.2}, {2, 3});
const Tensor onehot = f64({0, 0, 1, 1, 0, 0}, {2, 3});  // labels {2, 0}
const Tensor p = f64({0.2, 0.7, 0.1, 0.05, 0.25, 0.7}, {2, 3});
const Tensor q = f64({0.3, 0.3, 0.4, 0.0, 0.5, 0.5}, {2, 3});
const Tensor binary = f64({1, 0, 1, 0, 0, 1}, {2, 3});

using Loss = Tensor (*)(const Tensor&, const Tensor&, const fx::LossOptions&);

// The script's results, computed once per test process (and cached across them).
const fx_test::TorchResults& torch_losses() {
    static const fx_test::TorchResults results =
        fx_test::run_torch_script(FLUXION_SOURCE_DIR "/tests/reference/torch_losses.py", "", "torch_losses");
    return results;
}

// The mean and the sum, and the gradient of the mean with respect to the prediction: against the
// numbers kept from the script's case `name` (12 significant digits) and, where PyTorch runs, against
// the script's own, with the kept numbers checked against those.
void expect_reference(Loss loss, const Tensor& x, const Tensor& target, const std::string& name, double mean,
                      double sum, const std::vector<double>& grad, const fx::LossOptions& options = {}) {
    auto [value, g] = fx::withgradient([&](const Tensor& v) { return loss(v, target, options); }, x);
    EXPECT_NEAR(value.item(), mean, 1e-9);
    fx::LossOptions summed = options;
    summed.agg = fx::Agg::sum;
    const double total = loss(x, target, summed).item();
    EXPECT_NEAR(total, sum, 1e-9);
    auto gv = g.to_vector<double>();
    ASSERT_EQ(gv.size(), grad.size());
    for (std::size_t i = 0; i < gv.size(); ++i) EXPECT_NEAR(gv[i], grad[i], 1e-7) << "gradient element " << i;
    if (!fx_test::ran(torch_losses())) return;
    const auto& script = torch_losses().results.at(name);
    fx_test::expect_close({value.item(), total}, {script.at("mean"), script.at("sum")}, 1e-13, 1e-15, name);
    fx_test::expect_close(gv, script.at("grad"), 1e-12, 1e-15, name + " gradient");
    fx_test::expect_kept({mean, sum}, {script.at("mean"), script.at("sum")}, 1e-11, name);
    fx_test::expect_kept(grad, script.at("grad"), 1e-11, name + " gradient");
}

TEST(Losses, MseMatchesPyTorch) {
    expect_reference(fx::mse, yhat, y, "mse", 1.275, 7.65,
                     {-0.1, -0.1, 0.7, 0.233333333333, -0.533333333333, -0.0333333333333});
}

TEST(Losses, MaeMatchesPyTorch) {
    double s = 1 / 6.0;
    expect_reference(fx::mae, yhat, y, "mae", 0.85, 5.1, {-s, -s, s, s, -s, -s});
}

TEST(Losses, HuberMatchesPyTorch) {
    expect_reference(fx::huber_loss, yhat, y, "huber_delta_0.5", 0.32, 1.92,
                     {-0.05, -0.05, 0.0833333333333, 0.0833333333333, -0.0833333333333, -0.0166666666667},
                     {.delta = 0.5});
    EXPECT_THROW(fx::huber_loss(yhat, y, {.delta = 0}), fx::ValueError);
}

TEST(Losses, LogitCrossEntropyMatchesPyTorch) {
    expect_reference(
        fx::logitcrossentropy, logits, onehot, "logitcrossentropy", 3.22864042935, 6.4572808587,
        {0.300863322729, 0.0497323727538, -0.350595695483, -0.497374479259, 0.0214404484786, 0.475934030781});
}

TEST(Losses, CrossEntropyMatchesPyTorch) {
    expect_reference(fx::crossentropy, p, onehot, "crossentropy", 2.64915689514, 5.29831379027,
                     {0, 0, -4.99999403954, -9.9999761582, 0, 0});
}

TEST(Losses, BinaryCrossEntropyMatchesTheFormula) {
    expect_reference(
        fx::binarycrossentropy, p, binary, "binarycrossentropy", 0.968607246717, 5.8116434803,
        {-0.833332836628, 0.555555334798, -1.66666467985, 0.175438574477, 0.222222186901, -0.238095197548});
}

TEST(Losses, LogitBinaryCrossEntropyMatchesPyTorch) {
    expect_reference(
        fx::logitbinarycrossentropy, logits, binary, "logitbinarycrossentropy", 0.33969119878, 2.03814719268,
        {-0.0304042539677, 0.0709262471981, -0.0516709198121, 0.0198671536704, 0.0874965312465, -0.00652762046613});
}

TEST(Losses, KlDivergenceMatchesPyTorchWithZeroTargets) {
    expect_reference(fx::kldivergence, p, q, "kldivergence", 0.300152180213, 0.600304360425,
                     {-0.749999552965, -0.214285677793, -1.99999761582, 0, -0.999999523163, -0.357142796322});
    EXPECT_NEAR(fx::kldivergence(q, q).item(), 0, 1e-6);
}

TEST(Losses, AggNoneKeepsElementsOrSamples) {
    Tensor e = fx::mse(yhat, y, {.agg = fx::Agg::none});
    EXPECT_EQ(e.shape(), (fx::Shape{2, 3}));
    EXPECT_NEAR(e.to_vector<double>()[2], 2.1 * 2.1, 1e-12);
    Tensor per_sample = fx::logitcrossentropy(logits, onehot, {.agg = fx::Agg::none});
    EXPECT_EQ(per_sample.shape(), (fx::Shape{2}));
    EXPECT_NEAR(fx::sum(per_sample).item(), 6.4572808587, 1e-9);
}

TEST(Losses, ClassAxisCanBeChosen) {
    // Classes along axis 0: the transpose of the usual layout gives the same loss.
    EXPECT_NEAR(fx::logitcrossentropy(logits.transpose(), onehot.transpose(), {.axis = 0}).item(), 3.22864042935, 1e-9);
}

TEST(Losses, HugeLogitsStayFiniteAndCorrect) {
    Tensor big = f64({1e4, 0, -1e4, -1e4, 1e4, 0}, {2, 3});
    Tensor labels1 = f64({0, 1, 0, 0, 1, 0}, {2, 3});
    auto [l, g] = fx::withgradient([&](const Tensor& v) { return fx::logitcrossentropy(v, labels1); }, big);
    auto [lb, gb] = fx::withgradient([&](const Tensor& v) { return fx::logitbinarycrossentropy(v, binary); }, big);
    Tensor big32 = big.to(fx::DType::f32);
    const float l32 = fx::logitcrossentropy(big32, labels1.to(fx::DType::f32)).item<float>();
    const float lb32 = fx::logitbinarycrossentropy(big32, binary.to(fx::DType::f32)).item<float>();
    // Kept from the script (exact at these digits): -(labels1 * log_softmax(big, 1)).sum(1).mean() =
    // 5000 with gradient [[0.5, -0.5, 0], [0, 0, 0]]; binary_cross_entropy_with_logits(big, binary) =
    // 3333.56438239352 with gradient [[0, 1/12, -1/6], [0, 1/6, -1/12]], 3333.564453125 in f32.
    const std::vector<double> g_kept = {0.5, -0.5, 0, 0, 0, 0},
                              gb_kept = {0, 1.0 / 12, -1.0 / 6, 0, 1.0 / 6, -1.0 / 12};
    EXPECT_DOUBLE_EQ(l.item(), 5000.0);
    EXPECT_EQ(g.to_vector<double>(), g_kept);
    EXPECT_FLOAT_EQ(l32, 5000.0f);
    EXPECT_NEAR(lb.item(), 3333.56438239352, 1e-6);
    for (std::size_t i = 0; i < gb_kept.size(); ++i) EXPECT_NEAR(gb.to_vector<double>()[i], gb_kept[i], 1e-15);
    EXPECT_FLOAT_EQ(lb32, 3333.564453125f);
    if (!fx_test::ran(torch_losses())) return;
    const auto& ce = torch_losses().results.at("logitcrossentropy_huge");
    const auto& bce = torch_losses().results.at("logitbinarycrossentropy_huge");
    fx_test::expect_kept({5000.0, 5000.0}, {ce.at("value"), ce.at("value_f32")}, 0, "huge logitcrossentropy");
    fx_test::expect_kept(g_kept, ce.at("grad"), 0, "huge logitcrossentropy gradient");
    fx_test::expect_kept({3333.56438239352, 3333.564453125}, {bce.at("value"), bce.at("value_f32")}, 1e-15,
                         "huge logitbinarycrossentropy");
    fx_test::expect_kept(gb_kept, bce.at("grad"), 1e-15, "huge logitbinarycrossentropy gradient");
}

TEST(Losses, MismatchedShapesNameTheLossAndBothShapes) {
    try {
        fx::mse(yhat, fx::ones({3}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("mse: prediction has shape {2, 3} but target has shape {3}"), std::string::npos) << m;
    }
    EXPECT_THROW(fx::logitcrossentropy(logits, fx::ones({2})), fx::ShapeError);
}

TEST(Losses, GradientsAgreeWithFiniteDifferences) {
    using fx::testing::gradcheck;
    EXPECT_TRUE(gradcheck([](const Tensor& a) { return fx::huber_loss(a, y, {.delta = 0.7}); }, yhat * 1.01));
    EXPECT_TRUE(gradcheck([](const Tensor& a) { return fx::logitcrossentropy(a, onehot); }, logits));
    EXPECT_TRUE(gradcheck([](const Tensor& a) { return fx::logitbinarycrossentropy(a, binary); }, logits));
    EXPECT_TRUE(gradcheck([](const Tensor& a) { return fx::kldivergence(a, q); }, p));
}

// ---- class indices, weights, ignored labels, label smoothing; Flux's other losses; CTC. Each against
// the script's PyTorch values (PyTorch's own losses, or Flux's formula written in PyTorch where
// PyTorch has none) where PyTorch runs, and against finite differences everywhere ----

const Tensor logits4 = f64({1.5, -0.3, 0.8, -2.0, 0.1, 3.2, 0.4, 0.4, -1.1, 2.2, -0.7, 0.3}, {4, 3});
const Tensor labels4 = fx::tensor(std::vector<std::int64_t>{2, 0, 1, 2}, {4});
const Tensor labels4_ignored = fx::tensor(std::vector<std::int64_t>{2, -100, 1, 2}, {4});
const Tensor weight3 = f64({0.2, 1.0, 2.5}, {3});
const Tensor positive = f64({0.7, 1.3, 0.2, 2.5, 0.9, 1.1}, {2, 3});
const Tensor counts = f64({1, 0, 2, 3, 1, 0}, {2, 3});
const Tensor signs = f64({1, -1, 1, -1, -1, 1}, {2, 3});
const Tensor unit = f64({0.9, 0.2, 0.6, 0.1, 0.35, 0.8}, {2, 3});

Tensor spatial_logits() { return fx::sin(fx::arange(0, 24, 1, {.dtype = fx::DType::f64}) * 0.7).reshape({2, 3, 2, 2}) * 2; }
Tensor soft4() { return fx::softmax(fx::cos(fx::arange(0, 12, 1, {.dtype = fx::DType::f64})).reshape({4, 3}), 1); }

// fn(x, agg): the mean, the sum and the mean's gradient against the script's case `name`, and the
// gradient against finite differences.
void expect_script(const std::function<Tensor(const Tensor&, fx::Agg)>& fn, const Tensor& x, const std::string& name) {
    auto [value, g] = fx::withgradient([&](const Tensor& v) { return fn(v, fx::Agg::mean); }, x);
    const double total = fn(x, fx::Agg::sum).item();
    EXPECT_TRUE(std::isfinite(value.item())) << name;
    EXPECT_TRUE(fx::testing::gradcheck([&](const Tensor& v) { return fn(v, fx::Agg::mean); }, x)) << name;
    if (!fx_test::ran(torch_losses())) return;
    const auto& script = torch_losses().results.at(name);
    fx_test::expect_close({value.item(), total}, {script.at("mean"), script.at("sum")}, 1e-12, 1e-14, name);
    fx_test::expect_close(g.to_vector<double>(), script.at("grad"), 1e-11, 1e-14, name + " gradient");
}

TEST(Losses, CrossEntropyOnClassIndicesMatchesPyTorch) {
    auto ce = [](const Tensor& labels, fx::LossOptions o) {
        return [labels, o](const Tensor& x, fx::Agg agg) {
            fx::LossOptions with = o;
            with.agg = agg;
            return fx::logitcrossentropy(x, labels, with);
        };
    };
    expect_script(ce(labels4, {}), logits4, "ce_index");
    expect_script(ce(labels4, {.weight = weight3}), logits4, "ce_index_weight");
    expect_script(ce(labels4_ignored, {}), logits4, "ce_index_ignore");
    expect_script(ce(labels4, {.label_smoothing = 0.1}), logits4, "ce_index_smooth");
    expect_script(ce(labels4_ignored, {.weight = weight3, .label_smoothing = 0.2}), logits4, "ce_index_all");
    // The same loss as one-hot targets, where nothing is weighted, ignored or smoothed.
    EXPECT_NEAR(fx::logitcrossentropy(logits4, labels4).item(),
                fx::logitcrossentropy(logits4, fx::onehot(labels4, 3, fx::DType::f64)).item(), 1e-14);
    EXPECT_EQ(fx::logitcrossentropy(logits4, labels4, {.agg = fx::Agg::none}).shape(), (fx::Shape{4}));
    EXPECT_EQ(fx::logitcrossentropy(logits4, labels4_ignored, {.agg = fx::Agg::none}).to_vector<double>()[1], 0.0)
        << "an ignored label costs nothing";
    // i32 labels read as i64.
    EXPECT_NEAR(fx::logitcrossentropy(logits4, labels4.to(fx::DType::i32)).item(),
                fx::logitcrossentropy(logits4, labels4).item(), 0);
}

TEST(Losses, CrossEntropyOnSpatialIndicesAndSoftTargetsMatchesPyTorch) {
    const Tensor spatial_labels = fx::tensor(std::vector<std::int64_t>{0, 2, 1, 1, 2, 7, 0, 1}, {2, 2, 2});
    expect_script([&](const Tensor& x, fx::Agg agg) {
        return fx::logitcrossentropy(x, spatial_labels,
                                     {.agg = agg, .axis = 1, .weight = weight3, .ignore_index = 7, .label_smoothing = 0.1});
    }, spatial_logits(), "ce_spatial");
    expect_script([&](const Tensor& x, fx::Agg agg) {
        return fx::logitcrossentropy(x, soft4(), {.agg = agg, .weight = weight3, .label_smoothing = 0.15});
    }, logits4, "ce_soft_weight_smooth");
    // Probabilities with class indices: PyTorch's nll_loss of log(p + ε).
    expect_script([&](const Tensor& x, fx::Agg agg) {
        return fx::crossentropy(x, labels4_ignored, {.agg = agg, .weight = weight3});
    }, fx::softmax(logits4, 1), "nll_prob_weight");
}

TEST(Losses, CrossEntropyRefusesLabelsItCannotRead) {
    EXPECT_THROW(fx::logitcrossentropy(logits4, fx::tensor(std::vector<std::int64_t>{0, 1, 2})), fx::ShapeError);
    EXPECT_THROW(fx::logitcrossentropy(logits4, fx::tensor(std::vector<std::int64_t>{0, 1, 3, 0})), fx::ValueError)
        << "class 3 of 3";
    EXPECT_THROW(fx::logitcrossentropy(logits4, labels4, {.weight = f64({1, 2}, {2})}), fx::ShapeError);
    EXPECT_THROW(fx::logitcrossentropy(logits4, labels4, {.label_smoothing = 1.5}), fx::ValueError);
    EXPECT_THROW(fx::logitcrossentropy(logits4, labels4, {.axis = 2}), fx::ValueError);
    try {
        fx::logitcrossentropy(spatial_logits(), fx::tensor(std::vector<std::int64_t>{0, 1}), {.axis = 1});
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("{2, 2, 2}"), std::string::npos) << e.what();
    }
}

TEST(Losses, FluxsOtherLossesMatchTheirFormulas) {
    auto with = [](auto loss, Tensor target, fx::LossOptions o = {}) {
        return [loss, target, o](const Tensor& x, fx::Agg agg) {
            fx::LossOptions a = o;
            a.agg = agg;
            return loss(x, target, a);
        };
    };
    expect_script(with(fx::msle, counts), positive, "msle");
    expect_script(with(fx::poisson_loss, counts), positive, "poisson");
    expect_script(with(fx::hinge_loss, signs), yhat, "hinge");
    expect_script(with(fx::squared_hinge_loss, signs), yhat, "squared_hinge");
    expect_script(with(fx::dice_coeff_loss, binary), unit, "dice");
    expect_script(with(fx::tversky_loss, binary), unit, "tversky");
    expect_script(with(fx::focal_loss, f64({0, 1, 0, 0, 0, 1}, {2, 3})), p, "focal");
    expect_script(with(fx::focal_loss, q, {.gamma = 1.5}), p, "focal_gamma_1_5");
    expect_script(with(fx::binary_focal_loss, binary), unit, "binary_focal");
    expect_script(with(fx::siamese_contrastive_loss, binary, {.margin = 1.5}), positive, "siamese");
    EXPECT_THROW(fx::siamese_contrastive_loss(positive, binary, {.margin = -1}), fx::ValueError);
    EXPECT_THROW(fx::dice_coeff_loss(unit, fx::ones({3})), fx::ShapeError);
    EXPECT_NEAR(fx::dice_coeff_loss(binary, binary).item(), 0, 1e-15) << "a perfect mask";
}

// The script's CTC inputs: logits sin(1.3 t + 0.7 n + 2.1 c)·2, {T = 12, N = 4, C = 5}.
struct CtcInputs {
    Tensor logits, targets, input_lengths, target_lengths;
};
CtcInputs ctc_inputs() {
    std::vector<double> x;
    for (int t = 0; t < 12; ++t)
        for (int n = 0; n < 4; ++n)
            for (int c = 0; c < 5; ++c) x.push_back(std::sin(1.3 * t + 0.7 * n + 2.1 * c) * 2);
    return {fx::tensor(x, {12, 4, 5}),
            fx::tensor(std::vector<std::int64_t>{1, 2, 2, 3, 0, 4, 0, 0, 0, 0, 1, 1, 1, 1, 1, 3, 4, 1, 2, 1}, {4, 5}),
            fx::tensor(std::vector<std::int64_t>{12, 9, 12, 7}), fx::tensor(std::vector<std::int64_t>{4, 1, 5, 0})};
}

TEST(Losses, CtcMatchesPyTorchInEveryReduction) {
    const CtcInputs in = ctc_inputs();
    auto ctc = [&](const Tensor& x, fx::Agg agg) {
        return fx::ctc_loss(fx::logsoftmax(x, 2), in.targets, in.input_lengths, in.target_lengths, {.agg = agg});
    };
    auto [mean, g_mean] = fx::withgradient([&](const Tensor& x) { return ctc(x, fx::Agg::mean); }, in.logits);
    auto [total, g_sum] = fx::withgradient([&](const Tensor& x) { return ctc(x, fx::Agg::sum); }, in.logits);
    const Tensor each = ctc(in.logits, fx::Agg::none);
    EXPECT_EQ(each.shape(), (fx::Shape{4}));
    // The sum is the sum of each, the mean divides each by its target length (at least 1).
    const auto e = each.to_vector<double>();
    EXPECT_NEAR(total.item(), e[0] + e[1] + e[2] + e[3], 1e-12);
    EXPECT_NEAR(mean.item(), (e[0] / 4 + e[1] / 1 + e[2] / 5 + e[3] / 1) / 4, 1e-12);
    // Frames past a sequence's input length get no gradient.
    const auto g = g_sum.to_vector<double>();
    for (int t = 7; t < 12; ++t)
        for (int c = 0; c < 5; ++c) EXPECT_EQ(g[static_cast<std::size_t>((t * 4 + 3) * 5 + c)], 0.0) << "t " << t;
    EXPECT_TRUE(fx::testing::gradcheck([&](const Tensor& x) { return ctc(x, fx::Agg::mean); }, in.logits));
    if (!fx_test::ran(torch_losses())) return;
    const auto& r = torch_losses().results;
    fx_test::expect_close(e, r.at("ctc_none"), 1e-12, 1e-13, "ctc none");
    fx_test::expect_close({mean.item()}, {r.at("ctc_mean").at("value")}, 1e-12, 1e-13, "ctc mean");
    fx_test::expect_close({total.item()}, {r.at("ctc_sum").at("value")}, 1e-12, 1e-13, "ctc sum");
    fx_test::expect_close(g_mean.to_vector<double>(), r.at("ctc_mean").at("grad"), 1e-9, 1e-12, "ctc mean gradient");
    fx_test::expect_close(g, r.at("ctc_sum").at("grad"), 1e-9, 1e-12, "ctc sum gradient");
}

TEST(Losses, CtcStepsAreNotReplayedWithTheFirstTargets) {
    const CtcInputs in = ctc_inputs();
    fx::Dense d(5, 5);
    auto opt = fx::setup(fx::Descent{}, d);
    auto lossfn = [&](const fx::Dense& m, const Tensor& x, const Tensor& y) {
        return fx::ctc_loss(fx::logsoftmax(m(x), 2), y, in.input_lengths, in.target_lengths);
    };
    auto step = fx::compile(lossfn, d, opt);
    try {
        step(in.logits.to(fx::DType::f32), in.targets);
        FAIL() << "a step reading its targets on the host was compiled";
    } catch (const fx::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("ctc_loss"), std::string::npos) << e.what();
    }
}

TEST(Losses, CtcImpossibleAlignmentsAndBadArguments) {
    const CtcInputs in = ctc_inputs();
    // 1 1 1 needs five frames (a blank between repeats); three are given.
    const Tensor lp = fx::logsoftmax(in.logits.slice(0, 0, 3).slice(1, 0, 1), 2);
    const Tensor three = fx::tensor(std::vector<std::int64_t>{1, 1, 1}, {1, 3});
    const Tensor len3 = fx::tensor(std::vector<std::int64_t>{3});
    EXPECT_TRUE(std::isinf(fx::ctc_loss(lp, three, len3, len3, {.agg = fx::Agg::sum}).item()));
    auto [zero, g] = fx::withgradient(
        [&](const Tensor& x) { return fx::ctc_loss(x, three, len3, len3, {.agg = fx::Agg::sum, .zero_infinity = true}); },
        lp);
    EXPECT_EQ(zero.item(), 0.0);
    for (double v : g.to_vector<double>()) EXPECT_EQ(v, 0.0);
    if (fx_test::ran(torch_losses())) {
        EXPECT_EQ(torch_losses().results.at("ctc_impossible"), "inf");
    }

    const Tensor lp_all = fx::logsoftmax(in.logits, 2);
    EXPECT_THROW(fx::ctc_loss(lp_all, in.targets.to(fx::DType::f64), in.input_lengths, in.target_lengths), fx::DTypeError);
    EXPECT_THROW(fx::ctc_loss(lp_all, in.targets, fx::tensor(std::vector<std::int64_t>{13, 9, 12, 7}), in.target_lengths),
                 fx::ValueError);
    EXPECT_THROW(fx::ctc_loss(lp_all, fx::zeros({4, 5}, {.dtype = fx::DType::i64}), in.input_lengths, in.target_lengths),
                 fx::ValueError) << "the blank as a target";
    EXPECT_THROW(fx::ctc_loss(lp_all.select(1, 0), in.targets, in.input_lengths, in.target_lengths), fx::ShapeError);
}

}  // namespace
