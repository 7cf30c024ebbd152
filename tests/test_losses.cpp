// test_losses.cpp — each loss, its aggregations and its gradient against PyTorch
// (tests/reference/torch_losses.py, run where PyTorch imports; the numbers kept here, checked against
// it there, serve elsewhere), stability for huge logits, and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "fluxion/autodiff.hpp"
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

}  // namespace
