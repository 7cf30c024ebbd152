// test_onnx_import.cpp — fx::onnx::load: fluxion's own exports read back give the model's outputs
// and gradients; PyTorch's torch.onnx.export of small models (tests/reference/onnx_torch_export.py)
// gives PyTorch's outputs; a loaded model trains, compiles, saves, and runs on every other device;
// unknown operators, unsupported attributes and damaged files are refused by name.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "onnx_graph_writer.hpp"
#include "other_devices.hpp"
#include "test_io_support.hpp"
#include "torch_reference.hpp"

namespace fx = fluxion;
using io_test::ScratchDir;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

// max |got − want| over max |want|.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
    EXPECT_EQ(got.size(), want.size());
    double largest = 0, worst = 0;
    for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
        largest = std::max(largest, std::abs(double(want[i])));
        worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
    }
    return largest > 0 ? worst / largest : worst;
}
double relative_error(const fx::Tensor& got, const fx::Tensor& want) {
    EXPECT_EQ(got.shape(), want.shape());
    return relative_error(got.to_vector<float>(), want.to_vector<float>());
}

auto lenet5() {  // examples/fashion_mnist's model
    return fx::Chain(fx::Conv({5, 5}, 1, 6, fx::relu), fx::MaxPool({2, 2}), fx::Conv({5, 5}, 6, 16, fx::relu),
                     fx::MaxPool({2, 2}), fx::Flatten(), fx::Dense(256, 120, fx::relu), fx::Dense(120, 84, fx::relu),
                     fx::Dense(84, 10));
}

// `m` exported at `shape`, read back, and run at `shape` and at `other_batch`.
template <class M> void round_trip(const M& m, fx::Shape shape, std::int64_t other_batch) {
    ScratchDir dir;
    fx::onnx::save(dir / "m.onnx", m, fx::randn(shape));
    const fx::onnx::Model loaded = fx::onnx::load(dir / "m.onnx");
    for (const std::int64_t batch : {shape[0], other_batch}) {
        shape[0] = batch;
        const fx::Tensor x = fx::randn(shape);
        EXPECT_LE(relative_error(loaded(x), m(x)), 1e-5) << "batch " << batch;
    }
}

template <class M> void settle_batchnorm(M& m, const fx::Shape& shape) {
    fx::trainmode(m);
    for (int i = 0; i < 3; ++i) (void)m(fx::randn(shape) * 2.0f + 0.5f);
    fx::testmode(m);
}

// A graph of one node `op` on its input X, with integer attributes, written to `path`.
void write_one_node(const std::filesystem::path& path, const std::string& op,
                    const std::vector<std::pair<std::string, std::int64_t>>& attributes = {}) {
    fx_test::GraphWriter g(17);
    auto& n = g.input("X").node(op, {"X"}, {"Y"});
    n.set_name("the_node");
    for (const auto& [name, value] : attributes) fx_test::set(n, name, value);
    g.output("Y").write(path);
}

using fx_test::message_of;

std::map<std::string, fx::Tensor> as_map(const fx::State& s) { return {s.begin(), s.end()}; }

std::string base64_decode(const std::string& in) {
    const std::string abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    int bits = 0, value = 0;
    for (char c : in) {
        const auto k = abc.find(c);
        if (k == std::string::npos) continue;  // '=' padding
        value = ((value << 6) | int(k)) & 0xffffff, bits += 6;
        if (bits >= 8) out.push_back(char((value >> (bits - 8)) & 0xff)), bits -= 8;
    }
    return out;
}

}  // namespace

// ---- fluxion's own exports ----
TEST(OnnxImport, LeNet5RoundTripGivesTheSameOutputs) { round_trip(lenet5(), {2, 1, 28, 28}, 5); }

TEST(OnnxImport, ResNet18RoundTrip) {
    auto m = fx::models::resnet18({.num_classes = 10});
    settle_batchnorm(m, {4, 3, 32, 32});
    round_trip(m, {2, 3, 32, 32}, 3);
}

TEST(OnnxImport, TransformerEncoderRoundTrip) {
    round_trip(fx::Chain(fx::Dense(6, 16), fx::TransformerEncoder(16, 4, 2, {.feedforward = 32}), fx::Dense(16, 3)),
               {2, 5, 6}, 3);
}

TEST(OnnxImport, LayersAndActivationsOfEveryKindRoundTrip) {
    auto m = fx::Chain(fx::Conv({3, 3}, 2, 4, fx::leakyrelu, {.stride = 2, .pad = 1}), fx::BatchNorm(4, fx::elu),
                       fx::MeanPool({2, 2}, {.stride = 2, .pad = 1}),
                       fx::Conv({3, 3}, 4, 4, fx::tanh, {.pad = fx::SamePad(), .groups = 2}),
                       fx::MaxPool({3, 3}, {.stride = 1, .pad = 1}), fx::GlobalMeanPool(), fx::Flatten(),
                       fx::Dense(4, 6, fx::softplus), fx::Dense(6, 5, fx::hardswish), fx::Dense(5, 3, fx::hardsigmoid),
                       fx::Dense(3, 3), fx::logsoftmax);
    settle_batchnorm(m, {3, 2, 12, 12});
    round_trip(m, {3, 2, 12, 12}, 4);
    round_trip(fx::Chain(fx::Conv(std::array<int, 1>{3}, 2, 4, fx::relu, {.stride = 2, .pad = 1}),
                         fx::MaxPool(std::array<int, 1>{2}), fx::Conv(std::array<int, 1>{3}, 4, 3, {.dilation = 2}),
                         fx::MeanPool(std::array<int, 1>{2})),
               {2, 2, 23}, 3);
}

// The initialisers are the parameters: fx::params, fx::state and fx::save see them, and the
// gradient of a loaded LeNet-5 is the original's, parameter by parameter.
TEST(OnnxImport, InitialisersAreTheTrainableParametersWithTheOriginalsGradients) {
    ScratchDir dir;
    auto m = lenet5();
    const fx::Tensor x = fx::randn({3, 1, 28, 28});
    fx::onnx::save(dir / "m.onnx", m, x);
    const fx::onnx::Model loaded = fx::onnx::load(dir / "m.onnx");
    const auto original = as_map(fx::state(m));
    const auto state = as_map(fx::state(loaded));
    EXPECT_EQ(state.size(), original.size());
    for (const auto& [name, t] : original) EXPECT_TRUE(state.count("initializers." + name)) << name;

    auto [g_original] = fx::gradient([&](const auto& model) { return fx::sum(model(x) * model(x)); }, m);
    auto [g_loaded] = fx::gradient([&](const auto& model) { return fx::sum(model(x) * model(x)); }, loaded);
    const auto go = as_map(fx::state(g_original));
    for (const auto& [name, g] : fx::state(g_loaded)) {
        ASSERT_TRUE(go.count(name.substr(std::string("initializers.").size()))) << name;
        EXPECT_LE(relative_error(g, go.at(name.substr(std::string("initializers.").size()))), 1e-4) << name;
    }

    fx::save(dir / "m.safetensors", loaded);
    auto other = fx::onnx::load(dir / "m.onnx");
    for (auto& [name, t] : other.initializers) t.fill_(0);
    fx::load(dir / "m.safetensors", other);
    EXPECT_LE(relative_error(other(x), m(x)), 1e-6);
}

TEST(OnnxImport, ALoadedModelTrainsEagerlyAndCompiled) {
    ScratchDir dir;
    fx::seed(1);
    fx::onnx::save(dir / "mlp.onnx", fx::Chain(fx::Dense(4, 16, fx::tanh), fx::Dense(16, 1)), fx::randn({8, 4}));
    fx::onnx::Model m = fx::onnx::load(dir / "mlp.onnx");
    const fx::Tensor x = fx::randn({64, 4});
    const fx::Tensor y = fx::sum(fx::sin(x), 1, true);
    std::vector<std::tuple<fx::Tensor, fx::Tensor>> data = {{x, y}};
    auto loss = [](const auto& model, const fx::Tensor& xb, const fx::Tensor& yb) { return fx::mse(model(xb), yb); };
    const double before = loss(m, x, y).item();
    auto opt = fx::setup(fx::Adam{.eta = 0.01}, m);
    const auto history = fx::train(loss, m, data, opt, {.epochs = 30, .progress = false});
    EXPECT_LT(history.back(), before / 2);
    EXPECT_LT(loss(m, x, y).item(), before / 2);

    auto fwd = fx::compile(m);
    EXPECT_LE(relative_error(fwd(x), m(x)), 1e-6);
}

// Shape arithmetic (integer Div of Shape's values, PyTorch's `x.size(1) // 2`) is fixed by the input's
// shape, so a model using it compiles; an integer Div of the data itself does not, and says why.
TEST(OnnxImport, ShapeArithmeticCompilesAndIntegerDivisionOfDataIsRefused) {
    ScratchDir dir;
    // Y = relu(X reshaped to {N, 2, C / 2}): the sizes from Shape, Gather and an integer Div.
    fx_test::GraphWriter h(17);
    h.input("X").initializer_i64("two", {2});
    h.initializer_i64("first", {0}).initializer_i64("second", {1});
    h.node("Shape", {"X"}, {"shape"});
    h.node("Gather", {"shape", "first"}, {"n"});
    h.node("Gather", {"shape", "second"}, {"c"});
    h.node("Div", {"c", "two"}, {"half"});
    fx_test::set(h.node("Concat", {"n", "two", "half"}, {"to"}), "axis", std::int64_t{0});
    h.node("Reshape", {"X", "to"}, {"r"});
    h.node("Relu", {"r"}, {"Y"});  // a new tensor (a compiled function returns one)
    const fx::onnx::Model halves = h.output("Y").load(dir / "halves.onnx");
    auto fwd = fx::compile(halves);
    for (const std::int64_t c : {6, 10}) {
        const fx::Tensor x = fx::randn({3, c});
        EXPECT_EQ(fwd(x).shape(), (fx::Shape{3, 2, c / 2}));
        EXPECT_EQ(fwd(x).to_vector<float>(), fx::relu(x).to_vector<float>());  // a replay of the same shape
    }
    // Y = X / 3 on integers: the quotient of the data is taken on the host.
    fx_test::GraphWriter t(17);
    t.input("X", ::onnx::TensorProto::INT64).initializer_i64("three", {3});
    t.node("Div", {"X", "three"}, {"Y"});
    const fx::onnx::Model thirds = t.output("Y").load(dir / "thirds.onnx");
    const fx::Tensor xi = fx::tensor(std::vector<std::int64_t>{7, -7, 9}, {3});
    EXPECT_EQ(thirds(xi).to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, -2, 3}));
    auto fwd_thirds = fx::compile(thirds);
    const std::string why = message_of([&] { fwd_thirds(xi); });
    EXPECT_NE(why.find("(Div, opset 17) reads its integer operands (to divide them) on the host"), std::string::npos)
        << why;
}

TEST(OnnxImport, RunsOnEveryOtherDeviceAsOnTheCpu) {
    ScratchDir dir;
    auto lenet = lenet5();
    fx::onnx::save(dir / "m.onnx", lenet, fx::randn({2, 1, 28, 28}));
    const fx::onnx::Model m = fx::onnx::load(dir / "m.onnx");
    const fx::Tensor x = fx::randn({3, 1, 28, 28});
    const fx::Tensor y = m(x);
    for (const auto& d : fx::testing::other_devices()) {
        SCOPED_TRACE(d.str());
        const auto on_device = m | d;
        const fx::Tensor yd = on_device(x.to(d));
        EXPECT_EQ(yd.device(), d);
        EXPECT_LE(relative_error(yd.to(fx::Device{}), y), 1e-4);
    }
}

// An fx::LSTM's export read back gives its output and final states, and the same gradient with
// respect to its input (ONNX's LSTM runs on fluxion's ops, step by step).
TEST(OnnxImport, LstmRoundTripGivesItsOutputsStatesAndInputGradient) {
    ScratchDir dir;
    fx::LSTM lstm(3, 4, {.layers = 2, .bidirectional = true});
    fx::onnx::save(dir / "lstm.onnx", lstm, fx::randn({2, 5, 3}));
    const fx::onnx::Model m = fx::onnx::load(dir / "lstm.onnx");
    const fx::Tensor x = fx::randn({3, 5, 3});
    const fx::LSTMOutput want = lstm(x);
    const std::vector<fx::Tensor> got = m(std::vector<fx::Tensor>{x});
    ASSERT_EQ(got.size(), 3u);
    EXPECT_LE(relative_error(got[0], want.output), 1e-5);
    EXPECT_LE(relative_error(got[1], want.h), 1e-5);
    EXPECT_LE(relative_error(got[2], want.c), 1e-5);
    auto [g_want] = fx::gradient([&](const fx::Tensor& v) { return fx::sum(lstm(v).output * lstm(v).output); }, x);
    auto [g_got] = fx::gradient(
        [&](const fx::Tensor& v) {
            const fx::Tensor y = m(std::vector<fx::Tensor>{v})[0];
            return fx::sum(y * y);
        },
        x);
    EXPECT_LE(relative_error(g_got, g_want), 1e-4);
}

// BatchNormalization's running statistics are state, as BatchNorm's: outside the parameters and
// the gradient, trained past untouched, written by fx::save.
TEST(OnnxImport, BatchNormStatisticsAreStateNotParameters) {
    ScratchDir dir;
    auto model = fx::Chain(fx::Conv({3, 3}, 2, 4, {.pad = 1}), fx::BatchNorm(4, fx::relu), fx::Flatten(), fx::Dense(64, 3));
    settle_batchnorm(model, {4, 2, 4, 4});
    const fx::Tensor x = fx::randn({3, 2, 4, 4});
    fx::onnx::save(dir / "m.onnx", model, x);
    fx::onnx::Model m = fx::onnx::load(dir / "m.onnx");
    EXPECT_EQ(m.statistics.size(), 2u);
    EXPECT_TRUE(m.statistics.count("layers.1.running_mean"));
    EXPECT_TRUE(m.statistics.count("layers.1.running_var"));
    EXPECT_FALSE(m.initializers.count("layers.1.running_mean"));
    EXPECT_TRUE(m.initializers.count("layers.1.weight"));
    int trainable = 0;
    fx::visit_trainable(m, [&](const std::string&, const fx::Tensor&) { ++trainable; });
    EXPECT_EQ(trainable, 6);  // the weights and biases of Conv, BatchNorm and Dense

    auto [g] = fx::gradient([&](const auto& mm) { return fx::sum(mm(x) * mm(x)); }, m);
    const auto grads = as_map(fx::state(g));
    EXPECT_TRUE(grads.count("initializers.layers.1.weight"));
    for (const auto& [name, t] : grads) {
        if (name.rfind("statistics.", 0) != 0) continue;
        EXPECT_EQ(fx::max(fx::abs(t)).item(), 0.0) << name << " has a gradient";
    }
    const std::vector<float> mean_before = m.statistics.at("layers.1.running_mean").to_vector<float>();
    std::vector<std::tuple<fx::Tensor, fx::Tensor>> data = {{x, fx::randn({3, 3})}};
    auto loss = [](const auto& mm, const fx::Tensor& xb, const fx::Tensor& yb) { return fx::mse(mm(xb), yb); };
    auto opt = fx::setup(fx::Adam{.eta = 0.01}, m);
    fx::train(loss, m, data, opt, {.epochs = 3, .progress = false});
    EXPECT_EQ(m.statistics.at("layers.1.running_mean").to_vector<float>(), mean_before);
    EXPECT_NE(m.initializers.at("layers.1.weight").to_vector<float>(), std::vector<float>(4, 1.0f));  // trained

    fx::save(dir / "m.safetensors", m);
    auto other = fx::onnx::load(dir / "m.onnx");
    for (auto& [name, t] : other.statistics) t.fill_(0);
    for (auto& [name, t] : other.initializers) t.fill_(0);
    fx::load(dir / "m.safetensors", other);
    EXPECT_EQ(other.statistics.at("layers.1.running_var").to_vector<float>(),
              m.statistics.at("layers.1.running_var").to_vector<float>());
    EXPECT_LE(relative_error(other(x), m(x)), 1e-6);
}

// A GRU node on inputs X, W, R, B, sequence_lens and initial_h, bidirectional, written to `path`.
void write_gru(const std::filesystem::path& path, std::int64_t hidden) {
    ::onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* g = m.mutable_graph();
    g->set_name("gru");
    auto* n = g->add_node();
    n->set_op_type("GRU");
    for (const char* name : {"X", "W", "R", "B", "sequence_lens", "initial_h"}) {
        g->add_input()->set_name(name);
        n->add_input(name);
    }
    for (const char* name : {"Y", "Y_h"}) {
        n->add_output(name);
        g->add_output()->set_name(name);
    }
    auto* a = n->add_attribute();
    a->set_name("hidden_size"), a->set_type(::onnx::AttributeProto::INT), a->set_i(hidden);
    a = n->add_attribute();
    a->set_name("direction"), a->set_type(::onnx::AttributeProto::STRING), a->set_s("bidirectional");
    std::ofstream out(path, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&out));
}

// sequence_lens: an element's steps beyond its length output zeros and leave its state alone, and
// the reverse direction starts at its last step, so each element gives what it gives alone, cut
// to its length.
TEST(OnnxImport, RecurrentSequenceLengthsRunEachElementToItsOwnLength) {
    ScratchDir dir;
    const std::int64_t steps = 5, hidden = 3, in = 2;
    write_gru(dir / "gru.onnx", hidden);
    const fx::onnx::Model m = fx::onnx::load(dir / "gru.onnx");
    const fx::Tensor x = fx::randn({steps, 2, in}), w = fx::randn({2, 3 * hidden, in}),
                     r = fx::randn({2, 3 * hidden, hidden}), b = fx::randn({2, 6 * hidden}),
                     h0 = fx::randn({2, 2, hidden});
    const auto lens = fx::tensor(std::vector<std::int64_t>{3, 5}, {2}).to(fx::DType::i32);
    const auto both = m(std::vector<fx::Tensor>{x, w, r, b, lens, h0});  // Y {T, 2, N, H}, Y_h {2, N, H}
    for (std::int64_t e = 0; e < 2; ++e) {
        SCOPED_TRACE("element " + std::to_string(e));
        const std::int64_t len = e == 0 ? 3 : 5;
        const auto alone = m(std::vector<fx::Tensor>{x.slice(1, e, e + 1).slice(0, 0, len), w, r, b,
                                                     fx::tensor(std::vector<std::int64_t>{len}, {1}).to(fx::DType::i32),
                                                     h0.slice(1, e, e + 1)});
        EXPECT_LE(relative_error(both[0].slice(2, e, e + 1).slice(0, 0, len).contiguous(), alone[0]), 1e-6);
        EXPECT_LE(relative_error(both[1].slice(1, e, e + 1).contiguous(), alone[1]), 1e-6);
        if (len < steps) {
            EXPECT_EQ(fx::max(fx::abs(both[0].slice(2, e, e + 1).slice(0, len, steps))).item(), 0.0);
        }
    }
}

// ---- PyTorch's exports ----
namespace {

// Each of onnx_torch_export.py's models `names`, read back, gives PyTorch's outputs at two batch
// sizes, on the CPU and on every other device.
void expect_pytorchs_outputs(const std::vector<std::string>& names) {
    const auto r = fx_test::run_torch_script(std::string(FLUXION_SOURCE_DIR) + "/tests/reference/onnx_torch_export.py",
                                             "", "onnx_torch_export");
    if (!fx_test::ran(r)) GTEST_SKIP() << r.skip;
    ScratchDir dir;
    for (const std::string& name : names) {
        SCOPED_TRACE(name);
        const auto& entry = r.results.at(name);
        const std::string bytes = base64_decode(entry["onnx"].get<std::string>());
        const auto path = dir / (name + ".onnx");
        std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
        const fx::onnx::Model m = fx::onnx::load(path);
        for (const auto& run : entry["runs"]) {
            const fx::Tensor x = fx::tensor(run["input"].get<std::vector<float>>(), run["shape"].get<fx::Shape>());
            const fx::Tensor y = m(x);
            EXPECT_EQ(y.shape(), run["output_shape"].get<fx::Shape>());
            EXPECT_LE(relative_error(y.to_vector<float>(), run["output"].get<std::vector<float>>()), 1e-4)
                << "batch " << x.shape(0);
            for (const auto& d : fx::testing::other_devices()) {
                const fx::Tensor yd = (m | d)(x.to(d));
                EXPECT_EQ(yd.device(), d);
                EXPECT_LE(relative_error(yd.to(fx::Device{}).to_vector<float>(), run["output"].get<std::vector<float>>()),
                          1e-4)
                    << d.str() << ", batch " << x.shape(0);
            }
        }
    }
}

}  // namespace

// torchvision's own architectures of the zoo (ResNet-18, MobileNetV3-small, EfficientNet-B0, a
// ConvNeXt and a ViT of torchvision's classes at small sizes), exported by torch.onnx.export with
// random weights and BatchNorm statistics, give PyTorch's logits within 1e-4 of the largest, at
// batch 1 and 2 on the CPU and at batch 2 on every other device.
TEST(OnnxImport, PyTorchsExportsOfTheZoosArchitecturesGivePyTorchsOutputs) {
    const std::string folder = FLUXION_BINARY_DIR;
    const auto r = fx_test::run_torch_script(std::string(FLUXION_SOURCE_DIR) + "/tests/reference/onnx_torchvision_export.py",
                                             nlohmann::json{{"folder", folder}}.dump(), "onnx_torchvision_export");
    if (!fx_test::ran(r)) GTEST_SKIP() << r.skip;
    for (const std::string name : {"resnet18", "mobilenet_v3_small", "efficientnet_b0", "convnext", "vit"}) {
        SCOPED_TRACE(name);
        const auto& entry = r.results.at(name);
        const fx::onnx::Model m = fx::onnx::load(entry["file"].get<std::string>());
        for (const auto& run : entry["runs"]) {
            const fx::Tensor x = fx::tensor(run["input"].get<std::vector<float>>(), run["shape"].get<fx::Shape>());
            const auto want = run["output"].get<std::vector<float>>();
            EXPECT_LE(relative_error(m(x).to_vector<float>(), want), 1e-4) << "batch " << x.shape(0);
            if (x.shape(0) != 2) continue;  // other devices at batch 2 only: lavapipe is slow
            for (const auto& d : fx::testing::other_devices()) {
                const fx::Tensor yd = (m | d)(x.to(d));
                EXPECT_LE(relative_error(yd.to(fx::Device{}).to_vector<float>(), want), 1e-4)
                    << d.str() << ", batch " << x.shape(0);
            }
        }
    }
}

TEST(OnnxImport, PyTorchExportsGivePyTorchsOutputs) { expect_pytorchs_outputs({"mlp", "cnn", "conv1d", "attention"}); }

// nn.LSTM (two bidirectional batch-first layers), nn.GRU (bidirectional, a given initial state), nn.RNN (relu).
TEST(OnnxImport, PyTorchsRecurrentLayersGivePyTorchsOutputs) { expect_pytorchs_outputs({"recurrent"}); }

// F.interpolate: nearest, bilinear (with and without align_corners), bicubic.
TEST(OnnxImport, PyTorchsInterpolationGivesPyTorchsOutputs) { expect_pytorchs_outputs({"resize"}); }

// Conv3d, MaxPool3d, ConvTranspose3d, AvgPool3d, and a dilated MaxPool2d.
TEST(OnnxImport, PyTorchsVolumesAndDilatedPoolsGivePyTorchsOutputs) {
    expect_pytorchs_outputs({"volume", "dilated_pool"});
}

// ---- refusals ----
TEST(OnnxImport, AnUnknownOperatorIsNamedWithItsNodeAndOpset) {
    ScratchDir dir;
    write_one_node(dir / "m.onnx", "FancyNewOp");
    const std::string e = message_of([&] { fx::onnx::load(dir / "m.onnx"); });
    EXPECT_NE(e.find("node 'the_node' (FancyNewOp, opset 17)"), std::string::npos) << e;
    EXPECT_NE(e.find("does not implement"), std::string::npos) << e;
}

TEST(OnnxImport, AnUnsupportedAttributeIsNamedWithItsNode) {
    ScratchDir dir;
    write_one_node(dir / "m.onnx", "Cast", {{"to", ::onnx::TensorProto::STRING}});
    const fx::onnx::Model m = fx::onnx::load(dir / "m.onnx");
    const std::string e = message_of([&] { (void)m(fx::randn({2, 3})); });
    EXPECT_NE(e.find("node 'the_node' (Cast, opset 17): to=STRING"), std::string::npos) << e;
}

TEST(OnnxImport, UnsupportedRecurrentAndResizeAttributesAreNamed) {
    ScratchDir dir;
    write_one_node(dir / "lstm.onnx", "LSTM", {{"input_forget", 1}});
    const fx::onnx::Model lstm = fx::onnx::load(dir / "lstm.onnx");
    std::string e = message_of([&] { (void)lstm(fx::randn({2, 1, 3})); });
    EXPECT_NE(e.find("node 'the_node' (LSTM, opset 17): input_forget=1"), std::string::npos) << e;
    write_one_node(dir / "resize.onnx", "Resize", {{"antialias", 1}});
    const fx::onnx::Model resize = fx::onnx::load(dir / "resize.onnx");
    e = message_of([&] { (void)resize(fx::randn({1, 1, 2, 2})); });
    EXPECT_NE(e.find("node 'the_node' (Resize, opset 17): antialias with mode=nearest"), std::string::npos) << e;
}

TEST(OnnxImport, DamagedFilesAreIOErrors) {
    ScratchDir dir;
    fx::onnx::save(dir / "m.onnx", lenet5(), fx::randn({1, 1, 28, 28}));
    std::ifstream in(dir / "m.onnx", std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    for (const std::size_t keep : {bytes.size() / 2, bytes.size() - 7, std::size_t(40)}) {
        std::ofstream(dir / "cut.onnx", std::ios::binary).write(bytes.data(), std::streamsize(keep));
        EXPECT_THROW(fx::onnx::load(dir / "cut.onnx"), fx::IOError) << keep << " bytes of " << bytes.size();
    }
    std::ofstream(dir / "junk.onnx") << "this is not a protocol buffer at all";
    EXPECT_THROW(fx::onnx::load(dir / "junk.onnx"), fx::IOError);
    EXPECT_THROW(fx::onnx::load(dir / "missing.onnx"), fx::IOError);
}

TEST(OnnxImport, CallingWithTheWrongNumberOfInputsIsAValueError) {
    ScratchDir dir;
    fx::onnx::save(dir / "m.onnx", fx::Chain(fx::Dense(4, 3)), fx::randn({2, 4}));
    const fx::onnx::Model m = fx::onnx::load(dir / "m.onnx");
    EXPECT_EQ(m.input_names(), std::vector<std::string>{"input"});
    EXPECT_EQ(m.output_names(), std::vector<std::string>{"output"});
    EXPECT_THROW((void)m(std::vector<fx::Tensor>{fx::randn({2, 4}), fx::randn({2, 4})}), fx::ValueError);
    EXPECT_EQ(m(std::vector<fx::Tensor>{fx::randn({2, 4})}).size(), 1u);
}
