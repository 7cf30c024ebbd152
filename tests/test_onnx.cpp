// test_onnx.cpp — fx::onnx::save: every exported model passes ONNX's checker (the C++ one in libonnx
// on the file read back, the Python one with full shape inference) and ONNX Runtime (PyPI's
// `onnxruntime`, under the `python3` on PATH; skipped with the reason where it is missing) runs it
// to fluxion's outputs within 1e-4 of the largest, at the traced batch size and at another one.
// Layers it cannot express are refused by name, and nothing is written then.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using io_test::ScratchDir;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

struct OrtRun {
    nlohmann::json json;  // opset, inputs, outputs, results (tests/reference/onnx_run.py)
    std::string skip, error;
};

// `model` run by ONNX Runtime on `x`, after the onnx package's checker.
OrtRun run_onnxruntime(const std::filesystem::path& model, const fx::Tensor& x) {
    if (std::system("python3 -c 'import onnx, onnxruntime' >/dev/null 2>&1") != 0)
        return {{}, "onnx or onnxruntime is not importable by the python3 on PATH (python3 -m pip install onnx onnxruntime)", ""};
    const auto input = model.parent_path() / "input.f32", out = model.parent_path() / "run.json";
    const std::vector<float> v = x.to_vector<float>();
    std::ofstream(input, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
    std::string shape;
    for (auto d : x.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    const std::string script = std::string(FLUXION_SOURCE_DIR) + "/tests/reference/onnx_run.py";
    const int status = std::system(("python3 '" + script + "' '" + model.string() + "' '" + input.string() + "' " +
                                    shape + " '" + out.string() + "'").c_str());
    if (status != 0) return {{}, "", "onnx_run.py failed (status " + std::to_string(status) + "); see above"};
    OrtRun r;
    std::ifstream(out) >> r.json;
    return r;
}

// max |ONNX Runtime − fluxion| over max |fluxion|.
double relative_error(const nlohmann::json& output, const fx::Tensor& expected) {
    const std::vector<float> e = expected.to_vector<float>();
    const auto got = output.get<std::vector<double>>();
    EXPECT_EQ(got.size(), e.size());
    double largest = 0, worst = 0;
    for (std::size_t i = 0; i < e.size() && i < got.size(); ++i) {
        largest = std::max(largest, std::abs(double(e[i])));
        worst = std::max(worst, std::abs(got[i] - double(e[i])));
    }
    return largest > 0 ? worst / largest : worst;
}

::onnx::ModelProto read_model(const std::filesystem::path& path) {
    ::onnx::ModelProto m;
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(m.ParseFromIstream(&in)) << path;
    return m;
}

// Gives every BatchNorm running statistics other than its initial zeros and ones: a few forward
// passes in train mode, then test mode for the export.
template <class M> void settle_batchnorm(M& m, const fx::Shape& shape) {
    fx::trainmode(m);
    for (int i = 0; i < 3; ++i) (void)m(fx::randn(shape) * 2.0f + 0.5f);
    fx::testmode(m);
}

// Exports `m` traced at batch `shape[0]`, checks the file with libonnx's checker, and runs it with
// ONNX Runtime at the traced batch size and at `other_batch`, against fluxion's outputs.
// `state_names`: whether every parameter is an initialiser under its state name (the LSTM's are
// reordered into ONNX's gate order, under names of their own).
template <class M> void export_and_run(const M& m, fx::Shape shape, std::int64_t other_batch, bool state_names = true) {
    ScratchDir dir;
    const auto path = dir / "m.onnx";
    fx::onnx::save(path, m, fx::randn(shape));
    EXPECT_NO_THROW(::onnx::checker::check_model(path.string()));
    const ::onnx::ModelProto model = read_model(path);
    EXPECT_EQ(model.opset_import(0).version(), 17);
    ASSERT_EQ(model.graph().input_size(), 1);
    EXPECT_EQ(model.graph().input(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
    EXPECT_EQ(model.graph().output(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
    // Every parameter is an initialiser under its state name.
    std::set<std::string> initialisers;
    for (const auto& t : model.graph().initializer()) initialisers.insert(t.name());
    if (state_names) {
        for (const auto& [name, t] : fx::state(m)) EXPECT_TRUE(initialisers.count(name)) << name;
    }
    for (const std::int64_t batch : {shape[0], other_batch}) {
        shape[0] = batch;
        const fx::Tensor x = fx::randn(shape);
        const auto out = m(x);
        std::vector<fx::Tensor> ys;
        if constexpr (std::is_same_v<std::decay_t<decltype(out)>, fx::LSTMOutput>) ys = {out.output, out.h, out.c};
        else ys = {out};
        const OrtRun r = run_onnxruntime(path, x);
        if (!r.error.empty()) FAIL() << r.error;
        if (!r.skip.empty()) GTEST_SKIP() << r.skip;
        ASSERT_EQ(r.json["results"].size(), ys.size());
        for (std::size_t i = 0; i < ys.size(); ++i) {
            EXPECT_EQ(r.json["results"][i]["shape"].get<fx::Shape>(), ys[i].shape()) << "output " << i;
            EXPECT_LE(relative_error(r.json["results"][i]["output"], ys[i]), 1e-4) << "batch " << batch << ", output " << i;
        }
    }
}

auto lenet5() {  // examples/fashion_mnist's model
    return fx::Chain(fx::Conv({5, 5}, 1, 6, fx::relu), fx::MaxPool({2, 2}), fx::Conv({5, 5}, 6, 16, fx::relu),
                     fx::MaxPool({2, 2}), fx::Flatten(), fx::Dense(256, 120, fx::relu), fx::Dense(120, 84, fx::relu),
                     fx::Dense(84, 10));
}

}  // namespace

TEST(OnnxExport, LeNet5RunsInOnnxRuntimeAtAnyBatchSize) { export_and_run(lenet5(), {2, 1, 28, 28}, 5); }

// A model on another device exports the same graph: its parameters are copied to the host.
TEST(OnnxExport, FromEveryDevice) {
    auto m = lenet5();
    const fx::Tensor x = fx::randn({3, 1, 28, 28});
    const fx::Tensor y = m(x);
    for (const auto& d : fx::testing::other_devices()) {
        SCOPED_TRACE(d.str());
        ScratchDir dir;
        fx::onnx::save(dir / "m.onnx", m | d, x.to(d));
        const OrtRun r = run_onnxruntime(dir / "m.onnx", x);
        if (!r.error.empty()) FAIL() << r.error;
        if (!r.skip.empty()) GTEST_SKIP() << r.skip;
        EXPECT_LE(relative_error(r.json["results"][0]["output"], y), 1e-4);
    }
}

TEST(OnnxExport, NodesAndInitialisersAreNamedByStatePath) {
    ScratchDir dir;
    auto m = fx::models::resnet18({.num_classes = 10});
    fx::onnx::save(dir / "r.onnx", m, fx::randn({1, 3, 32, 32}));
    const ::onnx::ModelProto model = read_model(dir / "r.onnx");
    std::map<std::string, std::string> ops;
    for (const auto& n : model.graph().node()) ops[n.name()] = n.op_type();
    EXPECT_EQ(ops["conv1"], "Conv");
    EXPECT_EQ(ops["bn1"], "BatchNormalization");
    EXPECT_EQ(ops["bn1.relu"], "Relu");
    EXPECT_EQ(ops["maxpool"], "MaxPool");
    EXPECT_EQ(ops["layer2.0.downsample.0"], "Conv");
    EXPECT_EQ(ops["layer4.1.add"], "Add");
    EXPECT_EQ(ops["fc"], "Gemm");
    EXPECT_EQ(model.graph().output(0).name(), "output");
}

TEST(OnnxExport, ResNet18) {
    auto m = fx::models::resnet18({.num_classes = 10});
    settle_batchnorm(m, {4, 3, 32, 32});
    export_and_run(m, {2, 3, 32, 32}, 3);
}

TEST(OnnxExport, ResNet34) {
    auto m = fx::models::resnet34({.num_classes = 10});
    settle_batchnorm(m, {4, 3, 32, 32});
    export_and_run(m, {2, 3, 32, 32}, 1);
}

TEST(OnnxExport, ResNet50) {
    auto m = fx::models::resnet50({.num_classes = 10});
    settle_batchnorm(m, {4, 3, 32, 32});
    export_and_run(m, {2, 3, 32, 32}, 3);
}

TEST(OnnxExport, WideResNet50_2) {
    auto m = fx::models::wide_resnet50_2({.num_classes = 10});
    settle_batchnorm(m, {2, 3, 32, 32});
    export_and_run(m, {1, 3, 32, 32}, 2);
}

TEST(OnnxExport, MobileNetV2) {
    auto m = fx::models::mobilenet_v2({.num_classes = 10});
    settle_batchnorm(m, {4, 3, 32, 32});
    export_and_run(m, {2, 3, 32, 32}, 3);
}

TEST(OnnxExport, MobileNetV3Small) {
    auto m = fx::models::mobilenet_v3_small({.num_classes = 10});
    settle_batchnorm(m, {4, 3, 64, 64});
    export_and_run(m, {2, 3, 64, 64}, 3);
}

TEST(OnnxExport, EfficientNetB0) {
    auto m = fx::models::efficientnet_b0({.num_classes = 10});
    settle_batchnorm(m, {4, 3, 64, 64});
    export_and_run(m, {2, 3, 64, 64}, 3);
}

// At 224×224 the features are 7×7, so AdaptiveMeanPool((7, 7)) is the identity. VGG-11 without
// BatchNorm is this graph less its BatchNorms (and took as long: 36 s of a 530 MB file).
TEST(OnnxExport, Vgg11WithBatchNorm) {
    auto m = fx::models::vgg11_bn({.num_classes = 10});
    settle_batchnorm(m, {2, 3, 32, 32});
    export_and_run(m, {1, 3, 224, 224}, 2);
}

// An AdaptiveMeanPool whose input sizes are multiples of its output's is an AveragePool.
TEST(OnnxExport, AdaptiveMeanPoolOfADivisibleInput) {
    export_and_run(fx::Chain(fx::Conv({3, 3}, 2, 4, fx::relu, {.pad = 1}), fx::AdaptiveMeanPool({2, 3}), fx::Flatten(),
                             fx::Dense(24, 3)),
                   {2, 2, 8, 9}, 3);
    export_and_run(fx::Chain(fx::Conv(std::array<int, 1>{3}, 2, 4), fx::AdaptiveMeanPool(std::array<int, 1>{5})),
                   {2, 2, 12}, 1);
}

TEST(OnnxExport, ConvNeXtTiny) {
    export_and_run(fx::models::convnext_tiny({.num_classes = 10}), {2, 3, 64, 64}, 3);
}

// A small configuration at its own image size (the sequence length is fixed by pos_embedding).
TEST(OnnxExport, VisionTransformer) {
    export_and_run(fx::models::vision_transformer({.image_size = 32, .patch_size = 8, .layers = 2, .heads = 4,
                                                   .hidden = 32, .mlp = 64, .num_classes = 10}),
                   {2, 3, 32, 32}, 3);
}

// Each activation before a linear output (a softmax or σ at the end would hide an error under 1e-4).
TEST(OnnxExport, LayersAndActivationsOfEveryKindRun) {
    auto m = fx::Chain(fx::Conv({3, 3}, 2, 4, fx::leakyrelu, {.stride = 2, .pad = 1}), fx::BatchNorm(4, fx::elu),
                       fx::MeanPool({2, 2}, {.stride = 2, .pad = 1}),
                       fx::Conv({3, 3}, 4, 4, fx::tanh, {.pad = fx::SamePad(), .groups = 2}),
                       fx::MaxPool({3, 3}, {.stride = 1, .pad = 1}), fx::GlobalMeanPool(), fx::Flatten(),
                       fx::Dense(4, 6, fx::softplus), fx::Dropout(0.5), fx::Dense(6, 5, fx::hardswish), fx::Dense(5, 3));
    settle_batchnorm(m, {3, 2, 12, 12});
    export_and_run(m, {3, 2, 12, 12}, 4);
    // σ last: its outputs are never all zero, so the output never is.
    export_and_run(fx::Chain(fx::Dense(4, 8, fx::relu6), fx::Dense(8, 8, fx::relu, false), fx::Dense(8, 8, fx::hardsigmoid),
                             fx::Dense(8, 6, fx::sigmoid), fx::Dense(6, 4)),
                   {3, 4}, 2);
    export_and_run(fx::Chain(fx::Dense(4, 5), fx::softmax), {3, 4}, 2);
}

TEST(OnnxExport, OneDimensionalConvolutionsAndPools) {
    export_and_run(fx::Chain(fx::Conv(std::array<int, 1>{3}, 2, 4, fx::relu, {.stride = 2, .pad = 1}),
                             fx::MaxPool(std::array<int, 1>{2}), fx::Conv(std::array<int, 1>{3}, 4, 3, {.dilation = 2}),
                             fx::MeanPool(std::array<int, 1>{2})),
                   {2, 2, 23}, 3);
}

// Volumes with a different stride, dilation and padding along each axis, padding per side too: each
// of ONNX's attributes lists the depth first.
TEST(OnnxExport, ThreeDimensionalConvolutionsAndPoolsWithValuesPerAxis) {
    export_and_run(fx::Chain(fx::Conv(std::array{3, 3, 3}, 2, 4, fx::relu, {.stride = {1, 2, 2}, .pad = {0, 1, 2, 1, 1, 0}}),
                             fx::MaxPool(std::array{1, 3, 2}, {.stride = {1, 2, 1}, .pad = {0, 1, 1}}),
                             fx::Conv(std::array{2, 3, 3}, 4, 3, {.pad = {1, 1, 1}, .dilation = {1, 2, 1}}),
                             fx::MeanPool(std::array{2, 2, 2}, {.pad = {1, 0, 1}}),
                             fx::ConvTranspose(std::array{2, 3, 3}, 3, 2, fx::relu,
                                               {.stride = {1, 2, 3}, .pad = {0, 1, 1}, .dilation = {2, 1, 1},
                                                .output_pad = {0, 1, 2}})),
                   {2, 2, 5, 15, 13}, 3);
}

TEST(OnnxExport, ConvTransposeWithPadsOutputPaddingDilationsAndGroups) {
    export_and_run(fx::Chain(fx::ConvTranspose({3, 3}, 2, 4, fx::relu, {.stride = 2, .pad = 1, .output_pad = 1}),
                             fx::ConvTranspose({2, 3}, 4, 6, {.stride = {1, 2}, .dilation = 2, .groups = 2}),
                             fx::ConvTranspose({3, 3}, 6, 3, {.pad = fx::SamePad(), .bias = false})),
                   {2, 2, 5, 7}, 3);
    export_and_run(
        fx::Chain(fx::ConvTranspose(std::array<int, 1>{3}, 2, 4, fx::tanh, {.stride = 3, .pad = 1, .output_pad = 2}),
                  fx::ConvTranspose(std::array<int, 1>{2}, 4, 3, {.dilation = 2})),
        {2, 2, 9}, 1);
}

// Each mode by a scale and to a size, at sizes that make the scales uneven; a Conv between keeps
// the resizes apart.
TEST(OnnxExport, UpsampleNearestAndBilinear) {
    using fx::UpsampleMode;
    export_and_run(fx::Chain(fx::Upsample(UpsampleMode::nearest, {.scale = {2}}), fx::Conv({3, 3}, 2, 3),
                             fx::Upsample(UpsampleMode::nearest, {.size = {13, 24}})),
                   {2, 2, 5, 6}, 3);
    export_and_run(fx::Chain(fx::Upsample(UpsampleMode::bilinear, {.scale = {1.5, 2}}), fx::Conv({3, 3}, 2, 3),
                             fx::Upsample(UpsampleMode::bilinear, {.size = {11, 9}})),
                   {2, 2, 7, 5}, 1);
    export_and_run(
        fx::Chain(fx::Upsample(UpsampleMode::bilinear, {.scale = {2}, .align_corners = true}), fx::Conv({3, 3}, 2, 3),
                  fx::Upsample(UpsampleMode::bilinear, {.size = {7, 12}, .align_corners = true})),
        {2, 2, 5, 6}, 3);
}

// Volumes {N, C, D, H, W}: each mode by a scale per axis and to a size, uneven again.
TEST(OnnxExport, UpsampleNearestAndTrilinearVolumes) {
    using fx::UpsampleMode;
    const auto conv = [] { return fx::Conv(std::array{3, 3, 3}, 2, 2); };
    export_and_run(fx::Chain(fx::Upsample(UpsampleMode::nearest, {.scale = {2, 1.5, 3}}), conv(),
                             fx::Upsample(UpsampleMode::nearest, {.size = {9, 8, 13}})),
                   {2, 2, 3, 4, 5}, 1);
    export_and_run(fx::Chain(fx::Upsample(UpsampleMode::trilinear, {.scale = {2}}), conv(),
                             fx::Upsample(UpsampleMode::trilinear, {.size = {5, 11, 7}})),
                   {2, 2, 3, 4, 5}, 1);
    export_and_run(fx::Chain(fx::Upsample(UpsampleMode::trilinear, {.scale = {1.5, 2, 2}, .align_corners = true}),
                             conv(), fx::Upsample(UpsampleMode::trilinear, {.size = {6, 7, 9}, .align_corners = true})),
                   {2, 2, 4, 3, 5}, 3);
}

// At 44×44 the skips of 11 and 5 are odd-sized: the steps up pad their input to them.
TEST(OnnxExport, UNetWithTransposedConvolutionsOrBilinearSteps) {
    for (const bool bilinear : {false, true}) {
        SCOPED_TRACE(bilinear ? "bilinear" : "ConvTranspose");
        auto m = fx::models::unet({.bilinear = bilinear, .width = 8});
        settle_batchnorm(m, {2, 3, 44, 44});
        export_and_run(m, {2, 3, 44, 44}, 1);
        ScratchDir dir;
        fx::onnx::save(dir / "u.onnx", m, fx::randn({1, 3, 44, 44}));
        std::map<std::string, std::string> ops;
        const ::onnx::ModelProto model = read_model(dir / "u.onnx");
        for (const auto& n : model.graph().node()) ops[n.name()] = n.op_type();
        EXPECT_EQ(ops["inc.double_conv.0"], "Conv");
        EXPECT_EQ(ops["down1.maxpool_conv.0"], "MaxPool");
        EXPECT_EQ(ops["down4.maxpool_conv.1.double_conv.4"], "BatchNormalization");
        EXPECT_EQ(ops["up1.up"], bilinear ? "Resize" : "ConvTranspose");
        EXPECT_EQ(ops["up1.pad"], "Pad");  // 2×2 doubled to 4×4 against 5×5
        EXPECT_EQ(ops["up2.pad"], "Pad");  // 10×10 against 11×11
        EXPECT_EQ(ops.count("up3.pad"), 0u);
        EXPECT_EQ(ops["up4.cat"], "Concat");
        EXPECT_EQ(ops["outc.conv"], "Conv");
    }
}

TEST(OnnxExport, DenseOverTheLastAxisOfARank3Batch) {
    export_and_run(fx::Chain(fx::Dense(6, 4, fx::relu), fx::Dense(4, 2), fx::logsoftmax), {2, 5, 6}, 3);
}

TEST(OnnxExport, TransformerEncoder) {
    // Post-norm and pre-norm layers, gelu_erf's feed-forward, a final LayerNorm; run at another
    // batch size (the sequence length is the traced one's).
    fx::TransformerEncoder post(16, 4, 2, {.feedforward = 32});
    export_and_run(post, {2, 5, 16}, 3);
    fx::TransformerEncoder pre(16, 2, 1, {.feedforward = 24, .activation = fx::gelu_erf, .norm_first = true}, true);
    export_and_run(pre, {2, 5, 16}, 1);  // gelu_erf through Erf (opset 17 has no Gelu)
    try {
        export_and_run(fx::TransformerEncoder(16, 2, 1, {.feedforward = 24, .activation = fx::gelu}), {2, 5, 16}, 1);
        ADD_FAILURE() << "gelu (the tanh approximation) exported";
    } catch (const fx::Error& e) {
        EXPECT_NE(std::string(e.what()).find("activation gelu at 'layers.0.linear1'"), std::string::npos) << e.what();
    }
    fx::TransformerEncoder pre_relu(16, 2, 1, {.feedforward = 24, .norm_first = true}, true);
    export_and_run(fx::Chain(fx::Dense(6, 16), pre_relu, fx::Dense(16, 3)), {2, 5, 6}, 4);
}

TEST(OnnxExport, LstmWithItsFinalStates) {
    export_and_run(fx::LSTM(3, 5), {2, 7, 3}, 4, false);
    export_and_run(fx::LSTM(3, 4, {.layers = 2, .bidirectional = true}), {3, 6, 3}, 1, false);
}

TEST(OnnxExport, RefusesWhatItCannotExpressByNameAndWritesNothing) {
    ScratchDir dir;
    const auto path = dir / "m.onnx";
    auto expect_refusal = [&](auto&& model, const fx::Tensor& x, const std::string& named) {
        try {
            fx::onnx::save(path, model, x);
            ADD_FAILURE() << "no error; expected one naming " << named;
        } catch (const fx::Error& e) {
            EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
        }
        EXPECT_FALSE(std::filesystem::exists(path));
    };
    expect_refusal(fx::Chain(fx::Dense(4, 3), fx::GroupNorm(3, 1)), fx::randn({2, 4}), "fluxion::GroupNorm at 'layers.1'");
    expect_refusal(fx::Chain(fx::Dense(4, 3, [](const fx::Tensor& x) { return x * 2.0f; })), fx::randn({2, 4}),
                   "activation λ at 'layers.0'");
    auto bn = fx::Chain(fx::Dense(4, 3), fx::BatchNorm(3));
    fx::trainmode(bn);
    expect_refusal(bn, fx::randn({2, 4}), "train mode");
    expect_refusal(fx::Chain(fx::Dense(4, 3)), fx::randn({4}), "expected a batch");
    expect_refusal(fx::Chain(fx::Conv({3, 3}, 1, 2), fx::AdaptiveMeanPool({7, 7})), fx::randn({1, 1, 7, 7}),
                   "AdaptiveMeanPool((7, 7)) at 'layers.1' has no ONNX export for its input {N, 2, 5, 5}");
    expect_refusal(fx::Chain(fx::Dense(4, 3)), fx::randn({2, 4}).to(fx::DType::f64), "the export writes f32");
    expect_refusal(
        fx::Chain(fx::Upsample(fx::UpsampleMode::trilinear, {.scale = {2}})), fx::randn({1, 2, 2, 2}),
        "Upsample(:trilinear, scale = 2) at 'layers.0' is given a batch of rank 4; it resizes {N, C, D, H, W}");
}
