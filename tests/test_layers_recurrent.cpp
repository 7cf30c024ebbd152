// test_layers_recurrent.cpp — RNN, LSTM, GRU and their cells: outputs, final states and every
// gradient against PyTorch's nn.RNN, nn.LSTM, nn.GRU (and cells) on the same weights, moved through
// safetensors under PyTorch's names both ways (tests/reference/torch_recurrent.py, skipped where
// Debian's PyTorch cannot be imported), gradients against finite differences in f64, every other
// backend against the CPU, errors and printing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "other_devices.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

bool torch_importable() {
    static const bool ok =
        std::system((std::string(kPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
    return ok;
}

// A weight per output element, so that no gradient cancels by symmetry.
Tensor weights_like(const Tensor& y, double phase = 0.2) {
    Tensor w = fx::sin(
        fx::arange(0, double(y.numel()), 1, {.dtype = y.dtype(), .device = y.device()}) * 0.7 +
        phase);
    return w.reshape(y.shape());
}

template <class M> M f64(const M& m) {
    return fx::fmap([](const Tensor& t) { return t.to(fx::DType::f64); }, m);
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what,
                  double tol = 1e-9) {
    ASSERT_TRUE(actual.defined()) << what;
    ASSERT_EQ(actual.shape(), expected.shape()) << what;
    auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
    for (std::size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], e[i], tol * (1 + std::abs(e[i]))) << what << ", element " << i;
}

// Whatever a recurrent layer or cell returns, as one shape: outputs (sequence layers), h, and c
// (LSTMs).
template <class M>
fx::LSTMOutput run(const M& m, const Tensor& x, const Tensor& h0, const Tensor& c0) {
    if constexpr (std::is_same_v<M, fx::LSTM>)
        return m(x, {h0, c0});
    else if constexpr (std::is_same_v<M, fx::LSTMCell>) {
        auto [h, c] = m(x, {h0, c0});
        return {{}, h, c};
    } else if constexpr (std::is_same_v<M, fx::RNN> || std::is_same_v<M, fx::GRU>) {
        auto [y, h] = m(x, h0);
        return {y, h, {}};
    } else
        return {{}, m(x, h0), {}};
}

template <class M> constexpr bool is_lstm =
    std::is_same_v<M, fx::LSTM> || std::is_same_v<M, fx::LSTMCell>;

// sum(y r) + sum(h rh) (+ sum(c rc)): every output and state reaches the gradient.
Tensor loss_of(const fx::LSTMOutput& o) {
    Tensor l = fx::sum(o.h * weights_like(o.h, 0.5));
    if (o.output.defined()) l = l + fx::sum(o.output * weights_like(o.output));
    if (o.c.defined()) l = l + fx::sum(o.c * weights_like(o.c, 0.9));
    return l;
}

struct Case {
    std::int64_t batch = 3, steps = 4, in = 5, hidden = 3, layers = 1;
    bool bidirectional = false, bias = true, initial = true;
    const char* nonlinearity = "tanh";
};

// Runs `model` (f64) and PyTorch's `kind` on the same weights and inputs and compares outputs,
// states and every gradient; then loads PyTorch's own weights into a copy and compares again.
template <class M> void compare_with_torch(const char* kind, const M& model, const Case& c) {
    io_test::ScratchDir dir;
    constexpr bool sequence = !std::is_same_v<M, fx::RNNCell> && !std::is_same_v<M, fx::LSTMCell> &&
                              !std::is_same_v<M, fx::GRUCell>;
    const std::int64_t stacked = c.layers * (c.bidirectional ? 2 : 1);
    const auto f64_options = fx::TensorOptions{.dtype = fx::DType::f64};
    Tensor x = sequence ? fx::randn({c.batch, c.steps, c.in}, f64_options)
                        : fx::randn({c.batch, c.in}, f64_options);
    const fx::Shape state_shape =
        sequence ? fx::Shape{stacked, c.batch, c.hidden} : fx::Shape{c.batch, c.hidden};
    Tensor h0, c0;
    if (c.initial) {
        h0 = fx::randn(state_shape, f64_options);
        if constexpr (is_lstm<M>) c0 = fx::randn(state_shape, f64_options);
    }
    fx::LSTMOutput y = run(model, x, h0, c0);
    std::map<std::string, Tensor> inputs{{"x", x}, {"rh", weights_like(y.h, 0.5)}};
    if (y.output.defined()) inputs["r"] = weights_like(y.output);
    if (y.c.defined()) inputs["rc"] = weights_like(y.c, 0.9);
    if (h0.defined()) inputs["h0"] = h0;
    if (c0.defined()) inputs["c0"] = c0;
    fx::save(dir / "model.safetensors", model);
    fx::save_state(dir / "in.safetensors", inputs);
    const auto script =
        std::filesystem::path(FLUXION_SOURCE_DIR) / "tests" / "reference" / "torch_recurrent.py";
    const std::string command =
        std::string(kPython) + " '" + script.string() + "' " + kind + " '" +
        (dir / "model.safetensors").string() + "' '" + (dir / "in.safetensors").string() + "' '" +
        (dir / "out.safetensors").string() + "' " + std::to_string(c.in) + " " +
        std::to_string(c.hidden) + " " + std::to_string(c.layers) +
        (c.bidirectional ? " 1" : " 0") + (c.bias ? " 1 " : " 0 ") + c.nonlinearity;
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const auto ref = fx::load_state(dir / "out.safetensors");
    if (y.output.defined()) expect_close(y.output, ref.at("y"), "output");
    expect_close(y.h, ref.at("h"), "final h");
    if (y.c.defined()) expect_close(y.c, ref.at("c"), "final c");

    auto expect_grads = [&](const M& gm, const Tensor& gx) {
        expect_close(gx, ref.at("grad.x"), "gradient of the input");
        int compared = 0;
        for (const auto& [name, g] : fx::state(gm)) {
            ASSERT_TRUE(ref.count("grad." + name)) << "PyTorch has no parameter " << name;
            expect_close(g, ref.at("grad." + name), "gradient of " + name);
            ++compared;
        }
        EXPECT_EQ(compared, int(fx::state(model).size()));
        EXPECT_GE(compared, 2);
    };
    if (!c.initial) {
        auto [gm, gx] = fx::gradient(
            [&](const M& m, const Tensor& a) { return loss_of(run(m, a, {}, {})); }, model, x);
        expect_grads(gm, gx);
    } else if constexpr (is_lstm<M>) {
        auto [gm, gx, gh, gc] =
            fx::gradient([&](const M& m, const Tensor& a, const Tensor& h,
                             const Tensor& cc) { return loss_of(run(m, a, h, cc)); },
                         model, x, h0, c0);
        expect_grads(gm, gx);
        expect_close(gh, ref.at("grad.h0"), "gradient of h0");
        expect_close(gc, ref.at("grad.c0"), "gradient of c0");
    } else {
        auto [gm, gx, gh] = fx::gradient(
            [&](const M& m, const Tensor& a, const Tensor& h) { return loss_of(run(m, a, h, {})); },
            model, x, h0);
        expect_grads(gm, gx);
        expect_close(gh, ref.at("grad.h0"), "gradient of h0");
    }

    // The other way: PyTorch's own weights, loaded by name into fluxion, give PyTorch's outputs.
    M loaded = fx::fmap([](const Tensor& t) { return fx::zeros_like(t); }, model);
    fx::load(dir / "torch_model.safetensors", loaded);
    fx::LSTMOutput z = run(loaded, x, h0, c0);
    expect_close(z.h, ref.at("torch.h"), "final h with PyTorch's weights");
    if (z.output.defined())
        expect_close(z.output, ref.at("torch.y"), "output with PyTorch's weights");
}

class RecurrentVsPyTorch : public ::testing::Test {
protected:
    void SetUp() override {
        if (!torch_importable())
            GTEST_SKIP() << kPython << " cannot import torch (Debian's python3-torch)";
        fx::seed(11);
    }
};

TEST_F(RecurrentVsPyTorch, LSTMTwoLayersBidirectionalWithInitialState) {
    Case c{.layers = 2, .bidirectional = true};
    compare_with_torch("lstm", f64(fx::LSTM(c.in, c.hidden, {.layers = 2, .bidirectional = true})),
                       c);
}

TEST_F(RecurrentVsPyTorch, LSTMWithoutBiasFromZeroState) {
    Case c{.bias = false, .initial = false};
    compare_with_torch("lstm", f64(fx::LSTM(c.in, c.hidden, {.bias = false})), c);
}

TEST_F(RecurrentVsPyTorch, GRUTwoLayersBidirectionalWithInitialState) {
    Case c{.layers = 2, .bidirectional = true};
    compare_with_torch("gru", f64(fx::GRU(c.in, c.hidden, {.layers = 2, .bidirectional = true})),
                       c);
}

TEST_F(RecurrentVsPyTorch, GRUFromZeroState) {
    Case c{.steps = 6, .initial = false};
    compare_with_torch("gru", f64(fx::GRU(c.in, c.hidden)), c);
}

TEST_F(RecurrentVsPyTorch, RNNReluTwoLayers) {
    Case c{.layers = 2, .nonlinearity = "relu"};
    compare_with_torch("rnn", f64(fx::RNN(c.in, c.hidden, {.layers = 2, .nonlinearity = fx::relu})),
                       c);
}

TEST_F(RecurrentVsPyTorch, RNNTanhBidirectionalWithoutBias) {
    Case c{.bidirectional = true, .bias = false, .initial = false};
    compare_with_torch("rnn", f64(fx::RNN(c.in, c.hidden, {.bias = false, .bidirectional = true})),
                       c);
}

TEST_F(RecurrentVsPyTorch, Cells) {
    Case c;
    compare_with_torch("lstmcell", f64(fx::LSTMCell(c.in, c.hidden)), c);
    compare_with_torch("grucell", f64(fx::GRUCell(c.in, c.hidden)), c);
    Case relu{.nonlinearity = "relu"};
    compare_with_torch("rnncell", f64(fx::RNNCell(c.in, c.hidden, {.nonlinearity = fx::relu})),
                       relu);
    Case zero{.initial = false};
    compare_with_torch("lstmcell", f64(fx::LSTMCell(c.in, c.hidden)), zero);
}

TEST(Recurrent, GradientsMatchFiniteDifferences) {
    fx::seed(12);
    Tensor x = fx::randn({2, 3, 2});
    Tensor h0 = fx::randn({2, 2, 3}), c0 = fx::randn({2, 2, 3});
    EXPECT_TRUE(fx::testing::gradcheck(
        [](const fx::LSTM& m, const Tensor& a, const Tensor& h, const Tensor& c) {
            return loss_of(m(a, {h, c}));
        },
        fx::LSTM(2, 3, {.bidirectional = true}), x, h0, c0));
    EXPECT_TRUE(fx::testing::gradcheck(
        [](const fx::GRU& m, const Tensor& a, const Tensor& h) {
            auto [y, hn] = m(a, h);
            return loss_of({y, hn, {}});
        },
        fx::GRU(2, 3, {.layers = 2}), x, h0));
    EXPECT_TRUE(fx::testing::gradcheck(
        [](const fx::RNN& m, const Tensor& a) {
            auto [y, hn] = m(a);
            return loss_of({y, hn, {}});
        },
        fx::RNN(2, 3), x));
    EXPECT_TRUE(fx::testing::gradcheck(
        [](const fx::LSTM& m, const Tensor& a) { return loss_of(m(a)); },
        fx::LSTM(2, 3, {.layers = 2, .bias = false}), x));
    EXPECT_TRUE(fx::testing::gradcheck(
        [](const fx::LSTMCell& m, const Tensor& a) {
            auto [h, c] = m(a);
            return loss_of({{}, h, c});
        },
        fx::LSTMCell(2, 3), x.select(1, 0)));
}

// A sequence layer is its cell run over the steps: the same weights give the same states.
TEST(Recurrent, LayerIsItsCellOverTime) {
    fx::seed(13);
    fx::LSTM lstm(4, 3);
    fx::LSTMCell cell(4, 3);
    cell.weight_ih = lstm.weight_ih(0), cell.weight_hh = lstm.weight_hh(0);
    cell.bias_ih = lstm.bias_ih(0), cell.bias_hh = lstm.bias_hh(0);
    Tensor x = fx::randn({2, 5, 4});
    auto [y, h, c] = lstm(x);
    fx::LSTMState s;
    for (std::int64_t t = 0; t < 5; ++t) {
        s = cell(x.select(1, t), s);
        expect_close(y.select(1, t), s.h, "step " + std::to_string(t), 1e-6);
    }
    expect_close(h.select(0, 0), s.h, "final h", 1e-6);
    expect_close(c.select(0, 0), s.c, "final c", 1e-6);
}

// On the CPU an LSTM layer runs each direction as one op over the sequence with its own backward
// pass (fused cell kernels); LSTMCell composes its step from ordinary ops. Both ways must give the
// same outputs and the same gradients of the input, the initial states and every weight, in f32,
// both directions included (the reverse one is the cell run from the last step to the first).
TEST(Recurrent, FusedLayerHasTheGradientsOfItsCellsOverTime) {
    fx::seed(14);
    const std::int64_t steps = 5;
    Tensor x = fx::randn({3, steps, 4}), h0 = fx::randn({2, 3, 6}), c0 = fx::randn({2, 3, 6});
    auto cells_over_time = [&](const fx::LSTM& m, const Tensor& a, const Tensor& h, const Tensor& c) {
        std::vector<Tensor> ys[2], hn, cn;
        for (int d = 0; d < 2; ++d) {
            fx::LSTMCell cell(4, 6);
            cell.weight_ih = m.weight_ih(0, d == 1), cell.weight_hh = m.weight_hh(0, d == 1);
            cell.bias_ih = m.bias_ih(0, d == 1), cell.bias_hh = m.bias_hh(0, d == 1);
            fx::LSTMState s{h.select(0, d), c.select(0, d)};
            ys[d].resize(steps);
            for (std::int64_t k = 0; k < steps; ++k) {
                const std::int64_t t = d == 1 ? steps - 1 - k : k;
                s = cell(a.select(1, t), s);
                ys[d][std::size_t(t)] = s.h;
            }
            hn.push_back(s.h), cn.push_back(s.c);
        }
        return fx::LSTMOutput{fx::concat({fx::stack(ys[0], 1), fx::stack(ys[1], 1)}, 2), fx::stack(hn, 0),
                              fx::stack(cn, 0)};
    };
    const fx::LSTM lstm(4, 6, {.bidirectional = true});
    const fx::LSTMOutput fused = lstm(x, {h0, c0}), composed = cells_over_time(lstm, x, h0, c0);
    expect_close(fused.output, composed.output, "outputs", 1e-6);
    expect_close(fused.h, composed.h, "final h", 1e-6);
    expect_close(fused.c, composed.c, "final c", 1e-6);

    auto [gm, gx, gh, gc] = fx::gradient(
        [](const fx::LSTM& m, const Tensor& a, const Tensor& h, const Tensor& c) { return loss_of(m(a, {h, c})); },
        lstm, x, h0, c0);
    auto [rm, rx, rh, rc] = fx::gradient(
        [&](const fx::LSTM& m, const Tensor& a, const Tensor& h, const Tensor& c) {
            return loss_of(cells_over_time(m, a, h, c));
        },
        lstm, x, h0, c0);
    expect_close(gx, rx, "gradient of x", 1e-5);
    expect_close(gh, rh, "gradient of h0", 1e-5);
    expect_close(gc, rc, "gradient of c0", 1e-5);
    for (std::size_t i = 0; i < gm.parameters.size(); ++i)
        expect_close(gm.parameters[i], rm.parameters[i], "gradient of " + lstm.names[i], 1e-5);
}

TEST(Recurrent, OneSequenceIsABatchOfOne) {
    fx::seed(14);
    fx::GRU gru(3, 2, {.layers = 2, .bidirectional = true});
    Tensor x = fx::randn({4, 3}), h0 = fx::randn({4, 2});
    auto [y, h] = gru(x, h0);
    auto [yb, hb] = gru(x.unsqueeze(0), h0.unsqueeze(1));
    EXPECT_EQ(y.shape(), (fx::Shape{4, 4}));
    EXPECT_EQ(h.shape(), (fx::Shape{4, 2}));
    EXPECT_EQ(y.to_vector<float>(), yb.squeeze(0).to_vector<float>());
    EXPECT_EQ(h.to_vector<float>(), hb.squeeze(1).to_vector<float>());
    fx::RNNCell cell(3, 2);
    EXPECT_EQ(cell(x.select(0, 0)).shape(), (fx::Shape{2}));
}

TEST(Recurrent, ParametersHavePyTorchsNamesAndShapes) {
    fx::LSTM lstm(28, 16, {.layers = 2, .bidirectional = true});
    auto s = fx::state(lstm);
    ASSERT_EQ(s.size(), 16u);
    EXPECT_EQ(s[0].first, "weight_ih_l0");
    EXPECT_EQ(s[0].second.shape(), (fx::Shape{64, 28}));
    EXPECT_EQ(s[5].first, "weight_hh_l0_reverse");
    EXPECT_EQ(s[8].first, "weight_ih_l1");
    EXPECT_EQ(s[8].second.shape(), (fx::Shape{64, 32}));  // reads both directions of layer 0
    EXPECT_EQ(s[15].first, "bias_hh_l1_reverse");
    EXPECT_EQ(fx::state(fx::GRU(3, 2, {.bias = false})).size(), 2u);
    EXPECT_EQ(fx::state(fx::GRUCell(3, 2))[1].second.shape(), (fx::Shape{6, 2}));
    // PyTorch's initialisation: U(-1/√16, 1/√16).
    auto w = lstm.weight_hh(1, true).to_vector<float>();
    for (float v : w) ASSERT_LE(std::abs(v), 0.25f);
    EXPECT_THROW(lstm.weight_ih(2), fx::ValueError);
    EXPECT_THROW(fx::LSTM(3, 2).bias_ih(0, true), fx::ValueError);
}

TEST(Recurrent, BadInputsAreClearErrors) {
    fx::LSTM lstm(28, 16, {.layers = 2});
    Tensor x = fx::randn({4, 7, 28});
    try {
        lstm(fx::randn({4, 7, 20}));
        FAIL() << "expected fx::ShapeError";
    } catch (const fx::ShapeError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("LSTM(28 => 16, layers = 2)"), std::string::npos) << m;
        EXPECT_NE(m.find("{4, 7, 20}"), std::string::npos) << m;
        EXPECT_NE(m.find("{N, T, 28}"), std::string::npos) << m;
    }
    try {
        lstm(x, {fx::zeros({1, 4, 16}), fx::zeros({2, 4, 16})});
        FAIL() << "expected fx::ShapeError";
    } catch (const fx::ShapeError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("h0 has shape {1, 4, 16}"), std::string::npos) << m;
        EXPECT_NE(m.find("{2, 4, 16}"), std::string::npos) << m;
    }
    EXPECT_THROW(lstm(fx::randn({4, 0, 28})), fx::ShapeError);
    EXPECT_THROW(lstm(fx::randn({28})), fx::ShapeError);
    EXPECT_THROW(fx::GRU(3, 0), fx::ValueError);
    EXPECT_THROW(fx::RNN(3, 2, {.layers = 0}), fx::ValueError);
    fx::GRUCell cell(3, 2);
    try {
        cell(fx::randn({5, 3}), fx::zeros({4, 2}));
        FAIL() << "expected fx::ShapeError";
    } catch (const fx::ShapeError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("GRUCell(3 => 2)"), std::string::npos) << m;
        EXPECT_NE(m.find("{5, 2}"), std::string::npos) << m;
    }
    EXPECT_THROW(cell(fx::randn({5, 4})), fx::ShapeError);
}

TEST(Recurrent, PrintsLikeALayer) {
    std::ostringstream a, b, c, d;
    a << fx::LSTM(28, 128);
    EXPECT_NE(a.str().find("LSTM(28 => 128)"), std::string::npos) << a.str();
    EXPECT_NE(a.str().find("80_896 parameters"), std::string::npos)
        << a.str();  // 4·128·(28 + 128 + 2)
    b << fx::RNN(3, 4,
                 {.layers = 2, .bias = false, .bidirectional = true, .nonlinearity = fx::relu});
    EXPECT_NE(b.str().find("RNN(3 => 4, relu, layers = 2, bidirectional; bias=false)"),
              std::string::npos)
        << b.str();
    c << fx::GRUCell(3, 4);
    EXPECT_NE(c.str().find("GRUCell(3 => 4)"), std::string::npos) << c.str();
    EXPECT_NE(c.str().find("108 parameters"), std::string::npos) << c.str();  // 3·4·(3 + 4 + 2)
    d << fx::RNNCell(3, 4, {.bias = false});
    EXPECT_NE(d.str().find("RNNCell(3 => 4; bias=false)"), std::string::npos) << d.str();
}

// PyTorch's dropout between stacked layers: only what layer l + 1 reads is dropped, only while
// training; the first layer's final state and the test-mode output are those of the same weights
// without dropout.
TEST(Recurrent, DropoutBetweenLayersAppliesOnlyWhileTrainingAndOnlyBetweenLayers) {
    fx::seed(11);
    fx::LSTM with(5, 6, {.layers = 2, .dropout = 0.5});
    fx::LSTM without(5, 6, {.layers = 2});
    without.parameters = with.parameters;
    const fx::Tensor x = fx::randn({3, 4, 5});
    auto plain = without(x);
    fx::testmode(with);
    auto tested = with(x);
    EXPECT_EQ(tested.output.to_vector<float>(), plain.output.to_vector<float>());
    fx::trainmode(with);
    auto trained = with(x);
    EXPECT_EQ(trained.h.select(0, 0).to_vector<float>(), plain.h.select(0, 0).to_vector<float>())
        << "the first layer's own state must not see the dropout";
    EXPECT_GT(fx::max(fx::abs(trained.h.select(0, 1) - plain.h.select(0, 1))).item(), 1e-3)
        << "the second layer read undropped inputs";
    fx::seed(4);
    const auto again = with(x).output.to_vector<float>();
    fx::seed(4);
    EXPECT_EQ(with(x).output.to_vector<float>(), again) << "fx::seed makes the masks reproducible";
    std::ostringstream printed;
    printed << with;
    EXPECT_NE(printed.str().find("LSTM(5 => 6, layers = 2, dropout = 0.5)"), std::string::npos) << printed.str();
    EXPECT_THROW(fx::GRU(5, 6, {.dropout = 1.0}), fx::ValueError);
    EXPECT_THROW(fx::RNN(5, 6, {.dropout = -0.1}), fx::ValueError);
}

// fx::compile traces the time loop once and replays it: the same parameters as eager steps.
TEST(Recurrent, CompiledStepsMatchEagerSteps) {
    fx::seed(16);
    fx::GRU compiled_model(3, 4, {.layers = 2, .bidirectional = true});
    auto eager_model = fx::fmap([](const Tensor& t) { return t.clone(); }, compiled_model);
    auto lossfn = [](const fx::GRU& m, const Tensor& x, const Tensor& y) {
        return fx::mean(fx::square(m(x).output - y));
    };
    auto compiled_opt = fx::setup(fx::Adam{.eta = 1e-2}, compiled_model);
    auto eager_opt = fx::setup(fx::Adam{.eta = 1e-2}, eager_model);
    auto step = fx::compile(lossfn, compiled_model, compiled_opt);  // no fall_back: must replay
    Tensor x = fx::randn({2, 5, 3}), y = fx::randn({2, 5, 8});
    for (int i = 0; i < 3; ++i) {
        const float loss = step(x, y);
        auto [l, grads] = fx::withgradient(
            [&](const fx::GRU& m) { return lossfn(m, x, y); }, eager_model);
        fx::update(eager_opt, eager_model, grads);
        EXPECT_NEAR(loss, l.item(), 1e-5) << "step " << i;
    }
    EXPECT_GT(step.stats(x, y).kernels, 0u);
    auto a = fx::state(compiled_model), b = fx::state(eager_model);
    for (std::size_t i = 0; i < a.size(); ++i)
        expect_close(a[i].second, b[i].second, "after 3 steps: " + a[i].first, 1e-5);
}

TEST(Recurrent, EveryOtherDeviceMatchesTheCpu) {
    for (const auto& dev : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(15);
        fx::LSTM lstm(3, 2, {.layers = 2, .bidirectional = true});
        fx::GRU gru(3, 2);
        Tensor x = fx::randn({2, 3, 3});
        auto loss = [](const fx::LSTM& l, const fx::GRU& g, const Tensor& a) {
            auto [y, h, c] = l(a);
            auto [z, hg] = g(a);
            return loss_of({y, h, c}) + loss_of({z, hg, {}});
        };
        auto [gl, gg, gx] = fx::gradient(loss, lstm, gru, x);
        auto [dl, dg, dx] = fx::gradient(loss, lstm | dev, gru | dev, x | dev);
        EXPECT_EQ(dx.device(), dev);
        expect_close(dx, gx, dev.str() + ": gradient of the input", 1e-4);
        auto sc = fx::state(gl), sd = fx::state(dl);
        ASSERT_EQ(sc.size(), sd.size());
        for (std::size_t i = 0; i < sc.size(); ++i)
            expect_close(sd[i].second, sc[i].second, dev.str() + ": gradient of " + sc[i].first,
                         1e-4);
        auto sg = fx::state(gg), sgd = fx::state(dg);
        for (std::size_t i = 0; i < sg.size(); ++i)
            expect_close(sgd[i].second, sg[i].second,
                         dev.str() + ": GRU gradient of " + sg[i].first, 1e-4);
        expect_close(loss(lstm | dev, gru | dev, x | dev), loss(lstm, gru, x), dev.str() + ": loss",
                     1e-5);
    }
}

// An LSTM of the bench's width (28 => 128) over 7 steps of a batch of 9, in f64 and f32: the cell
// kernels of a device that has them (the CPU's, CUDA's, Vulkan's) over 9 × 128 units a step, and
// the backward pass's gradient of the cell state carried from step to step.
TEST(Recurrent, AnLstmOfTheBenchsWidthMatchesTheCpuOnEveryOtherDevice) {
    for (const auto t : {fx::DType::f64, fx::DType::f32}) {
        const double tol = t == fx::DType::f64 ? 1e-10 : 1e-4;
        for (const auto& dev : fx::testing::other_devices(t)) {
            fx::seed(16);
            const fx::LSTM lstm = fx::fmap([t](const Tensor& p) { return p.to(t); }, fx::LSTM(28, 128));
            const Tensor x = fx::randn({9, 7, 28}).to(t);
            auto loss = [](const fx::LSTM& l, const Tensor& a) { return loss_of(l(a)); };
            auto [gl, gx] = fx::gradient(loss, lstm, x);
            auto [dl, dx] = fx::gradient(loss, lstm | dev, x | dev);
            const std::string on = dev.str() + " (" + fx::name(t) + ")";
            expect_close(dx | fx::cpu, gx, on + ": gradient of the input", tol);
            auto sc = fx::state(gl), sd = fx::state(dl);
            ASSERT_EQ(sc.size(), sd.size());
            for (std::size_t i = 0; i < sc.size(); ++i)
                expect_close(sd[i].second | fx::cpu, sc[i].second, on + ": gradient of " + sc[i].first, tol);
            expect_close(loss(lstm | dev, x | dev) | fx::cpu, loss(lstm, x), on + ": loss", tol);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
