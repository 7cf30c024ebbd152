// test_models.cpp — fx::models against torchvision: each model loads torchvision's state_dict
// strictly (random weights, BatchNorm statistics from train-mode batches) and gives its logits in
// eval mode, on the CPU and every other device; ResNet-18's train-mode gradients match PyTorch's;
// parameter counts are torchvision's. The PyTorch side is tests/reference/torch_models.py; tests
// skip where /usr/bin/python3 cannot import torchvision (Debian's python3-torchvision).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"
#include "torch_reference.hpp"

namespace {

namespace fs = std::filesystem;
namespace fx = fluxion;
namespace models = fx::models;

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

bool torchvision_importable() {
    static const bool ok = std::system("/usr/bin/python3 -c 'import torchvision' >/dev/null 2>&1") == 0;
    return ok;
}

// The script's files for `name`, made once per build folder and script text (the folder's name
// holds the script's hash, so an edited script never reuses stale files).
fs::path reference_files(const std::string& name, int size, int num_classes, bool grad) {
    const std::string script = std::string(FLUXION_SOURCE_DIR) + "/tests/reference/torch_models.py";
    const std::string text = fx_test::file_text(script);
    const fs::path dir = fs::path(FLUXION_BINARY_DIR) / ("models_torch_" + std::to_string(fx_test::fnv1a(text)));
    fs::create_directories(dir);
    if (!fs::exists(dir / (name + ".reference.safetensors"))) {
        const std::string command = "/usr/bin/python3 " + script + " " + name + " " + std::to_string(size) + " " +
                                    std::to_string(num_classes) + " " + dir.string() + (grad ? " --grad" : "");
        EXPECT_EQ(std::system(command.c_str()), 0) << command;
    }
    return dir;
}

// The devices to compare beside the CPU: the real backends' (Vulkan on lavapipe here, CUDA on a
// GPU machine), not the test plugins'.
std::vector<fx::Device> devices() {
    std::vector<fx::Device> out{fx::Device{}};
    for (const auto& d : fx::testing::other_devices())
        if (d.type == "Vulkan" || d.type == "CUDA") out.push_back(d);
    return out;
}

// Values within `tol` of the largest magnitude of `want`.
void expect_close(const fx::Tensor& got, const fx::Tensor& want, double tol, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    const auto g = got.to(fx::Device{}).to_vector<float>(), w = want.to_vector<float>();
    float largest = 0;
    for (float v : w) largest = std::max(largest, std::abs(v));
    ASSERT_GT(largest, 0) << what << ": the reference is all zeros";
    std::size_t bad = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
        if (!(std::abs(g[i] - w[i]) <= tol * largest) && bad++ < 5)
            ADD_FAILURE() << what << " element " << i << ": " << g[i] << " vs PyTorch's " << w[i] << " (largest "
                          << largest << ")";
    EXPECT_EQ(bad, 0u) << what;
}

// torchvision 0.14's counts with 1000 classes, kept so that fluxion's are checked where
// torchvision is missing too (and checked against the script's where it is not). The U-Nets'
// are PyTorch's counts of the script's UNet with 2 classes: "unet" milesial's own (width 64),
// the others those the tests load (width 8).
const std::map<std::string, std::int64_t> kTorchvisionParameters{{"resnet18", 11689512},
                                                                 {"resnet34", 21797672},
                                                                 {"resnet50", 25557032},
                                                                 {"wide_resnet50_2", 68883240},
                                                                 {"mobilenet_v2", 3504872},
                                                                 {"vgg11", 132863336},
                                                                 {"vgg11_bn", 132868840},
                                                                 {"vgg16", 138357544},
                                                                 {"vgg16_bn", 138365992},
                                                                 {"mobilenet_v3_small", 2542856},
                                                                 {"efficientnet_b0", 5288548},
                                                                 {"convnext_tiny", 28589128},
                                                                 {"vit_b_16", 86567656},
                                                                 {"vit_tiny_16", 5717416},
                                                                 {"unet", 31037698},
                                                                 {"unet_bilinear", 17263042},
                                                                 {"unet_small", 486562},
                                                                 {"unet_small_bilinear", 270906}};

std::int64_t parameters(const auto& model) { return fx::detail::count_params(model).params; }

// Loads torchvision's weights for `name` into `model` strictly, and returns the script's
// reference tensors; none where torchvision is missing (the test is then skipped).
template <class Model> std::map<std::string, fx::Tensor> load_torchvision(Model& model, const std::string& name,
                                                                          int size, int num_classes,
                                                                          bool grad = false) {
    if (!torchvision_importable()) return {};
    const fs::path dir = reference_files(name, size, num_classes, grad);
    auto ref = fx::load_state(dir / (name + ".reference.safetensors"));
    fx::load(dir / (name + ".weights.safetensors"), model);  // strict: every name, shape and dtype
    EXPECT_EQ(ref.at("parameters").to_vector<std::int64_t>().at(0), kTorchvisionParameters.at(name));
    return ref;
}

template <class Model> void expect_torchvision_logits(Model model, const std::string& name, int size, int num_classes,
                                                      const std::vector<fx::Device>& on = devices()) {
    const auto ref = load_torchvision(model, name, size, num_classes);
    if (ref.empty()) GTEST_SKIP() << "/usr/bin/python3 cannot import torchvision (apt-get install python3-torchvision)";
    for (const auto& d : on) {
        SCOPED_TRACE(d.str());
        const Model m = model | d;
        expect_close(m(ref.at("x").to(d)), ref.at("logits"), 1e-4, name + " logits");
    }
}

TEST(Models, ResNet18MatchesTorchvision) {
    auto model = models::resnet18();
    const auto ref = load_torchvision(model, "resnet18", 64, 1000, true);
    if (ref.empty()) GTEST_SKIP() << "/usr/bin/python3 cannot import torchvision (apt-get install python3-torchvision)";
    // Logits on every device first: the train-mode step below moves the running statistics.
    for (const auto& d : devices()) {
        SCOPED_TRACE(d.str());
        expect_close((model | d)(ref.at("x").to(d)), ref.at("logits"), 1e-4, "resnet18 logits");
    }
    // A train-mode step (batch statistics): the gradient of mean(logits²) for every parameter, on
    // the CPU only: on lavapipe this step takes about 45 s on two cores, and its early gradients
    // (conv1.weight) differ from PyTorch's by up to 0.4% of the largest, beyond 1e-3 (not yet understood).
    {
        const fx::Tensor x = ref.at("x");
        auto [loss, g] = fx::withgradient([&](const models::ResNet& r) { return fx::mean(fx::square(r(x))); }, model);
        int compared = 0;
        fx::visit_trainable(g, [&](const std::string& path, const fx::Tensor& t) {
            if (!t.defined()) return;  // the convolutions' absent biases
            const auto want = ref.find("grad." + path);
            ASSERT_NE(want, ref.end()) << "PyTorch has no parameter " << path;
            expect_close(t, want->second, 1e-3, "gradient of " + path);
            ++compared;
        });
        EXPECT_EQ(compared, 62);
    }
}
TEST(Models, ResNet34MatchesTorchvision) {
    // On the CPU only: resnet18's blocks, more of them (resnet18 runs on every device).
    expect_torchvision_logits(models::resnet34({.num_classes = 10}), "resnet34", 64, 10, {fx::Device{}});
}
TEST(Models, ResNet50MatchesTorchvision) {
    expect_torchvision_logits(models::resnet50({.num_classes = 10}), "resnet50", 32, 10);
}
TEST(Models, WideResNet50MatchesTorchvision) {
    // On the CPU only: resnet50's code with wider tensors (resnet50 runs on every device), and 69M
    // parameters through lavapipe would double this program's time.
    expect_torchvision_logits(models::wide_resnet50_2({.num_classes = 10}), "wide_resnet50_2", 32, 10, {fx::Device{}});
}

TEST(Models, MobileNetV2MatchesTorchvision) {
    expect_torchvision_logits(models::mobilenet_v2({.num_classes = 10}), "mobilenet_v2", 32, 10);
}

// At 64×64 the last stage is 2×2, which the adaptive pool spreads over 7×7 in overlapping cells.
// On the CPU only: 133M parameters through lavapipe took 40 s of `make test`'s two cores, and the
// products Vulkan runs in parts when an operand exceeds maxStorageBufferRange (fc1's weight, 392 MiB,
// against lavapipe's 128) are tested with a 4 KiB range instead (ctest's vulkan.storage_buffer_range).
TEST(Models, VGG11MatchesTorchvision) {
    expect_torchvision_logits(models::vgg11({.num_classes = 10}), "vgg11", 64, 10, {fx::Device{}});
}
TEST(Models, VGG11BatchNormMatchesTorchvision) {
    expect_torchvision_logits(models::vgg11_bn({.num_classes = 10}), "vgg11_bn", 64, 10, {fx::Device{}});
}
TEST(Models, VGG16MatchesTorchvision) {
    expect_torchvision_logits(models::vgg16({.num_classes = 10}), "vgg16", 64, 10, {fx::Device{}});
}
TEST(Models, VGG16BatchNormMatchesTorchvision) {
    expect_torchvision_logits(models::vgg16_bn({.num_classes = 10}), "vgg16_bn", 64, 10, {fx::Device{}});
}

TEST(Models, MobileNetV3SmallMatchesTorchvision) {
    expect_torchvision_logits(models::mobilenet_v3_small({.num_classes = 10}), "mobilenet_v3_small", 64, 10);
}

TEST(Models, EfficientNetB0MatchesTorchvision) {
    // On the CPU only: on lavapipe it took 30 s here (two shared cores), and its blocks are
    // MobileNetV3's, which runs on every device.
    expect_torchvision_logits(models::efficientnet_b0({.num_classes = 10}), "efficientnet_b0", 32, 10, {fx::Device{}});
}

TEST(Models, ConvNeXtTinyMatchesTorchvision) {
    // On the CPU only: on lavapipe it took 36 s here (two shared cores), as long at 32×32 as at 64×64.
    expect_torchvision_logits(models::convnext_tiny({.num_classes = 10}), "convnext_tiny", 32, 10, {fx::Device{}});
}

// ViT-Ti/16 (timm's configuration, through torchvision's VisionTransformer) and ViT-B/16, on the CPU
// only: ViT-Ti/16 took 27 s on lavapipe here (two shared cores), and the image size is fixed at 224.
TEST(Models, VitTiny16MatchesTorchvision) {
    expect_torchvision_logits(models::vit_tiny_16({.num_classes = 10}), "vit_tiny_16", 224, 10, {fx::Device{}});
}
TEST(Models, VitB16MatchesTorchvision) {
    expect_torchvision_logits(models::vit_b_16({.num_classes = 10}), "vit_b_16", 224, 10, {fx::Device{}});
}

// milesial/Pytorch-UNet's architecture, written in the script (torchvision has none), at width 8.
// 44×44 halves to 22, 11, 5 and 2: two steps up are padded to the skip's odd size.
TEST(Models, UNetMatchesPyTorch) {
    expect_torchvision_logits(models::unet({.n_classes = 3, .width = 8}), "unet_small", 44, 3);
}
TEST(Models, UNetBilinearMatchesPyTorch) {
    expect_torchvision_logits(models::unet({.n_classes = 3, .bilinear = true, .width = 8}), "unet_small_bilinear", 44,
                              3);
}

TEST(Models, UNetRefusesSmallImagesAndBadOptions) {
    const auto m = models::unet({.n_channels = 1, .n_classes = 2, .width = 2});
    EXPECT_EQ(m(fx::randn({1, 1, 17, 16})).shape(), (fx::Shape{1, 2, 17, 16}));
    try {
        (void)m(fx::randn({1, 1, 15, 32}));
        ADD_FAILURE() << "no error";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("UNet: expected images {N, C, H, W} of at least 16×16"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(models::unet({.width = 0}), fx::ValueError);
    EXPECT_THROW(models::unet({.n_classes = 0}), fx::ValueError);
}

TEST(Models, VisionTransformerRefusesOtherImageSizes) {
    const auto m = models::vision_transformer(
        {.image_size = 32, .patch_size = 8, .layers = 1, .heads = 2, .hidden = 16, .mlp = 32, .num_classes = 3});
    EXPECT_EQ(m(fx::randn({2, 3, 32, 32})).shape(), (fx::Shape{2, 3}));
    try {
        (void)m(fx::randn({2, 3, 40, 40}));
        ADD_FAILURE() << "no error";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("expected images {N, 3, 32, 32}"), std::string::npos) << e.what();
    }
    EXPECT_THROW(models::vision_transformer({.image_size = 30, .patch_size = 8}), fx::ValueError);
    EXPECT_THROW(models::vision_transformer({.heads = 5}), fx::ValueError);
}

TEST(Models, ParameterCountsAreTorchvisions) {
    EXPECT_EQ(parameters(models::mobilenet_v2()), kTorchvisionParameters.at("mobilenet_v2"));
    EXPECT_EQ(parameters(models::resnet18()), kTorchvisionParameters.at("resnet18"));
    EXPECT_EQ(parameters(models::resnet34()), kTorchvisionParameters.at("resnet34"));
    EXPECT_EQ(parameters(models::resnet50()), kTorchvisionParameters.at("resnet50"));
    EXPECT_EQ(parameters(models::wide_resnet50_2()), kTorchvisionParameters.at("wide_resnet50_2"));
    EXPECT_EQ(parameters(models::vgg11()), kTorchvisionParameters.at("vgg11"));
    EXPECT_EQ(parameters(models::vgg11_bn()), kTorchvisionParameters.at("vgg11_bn"));
    EXPECT_EQ(parameters(models::vgg16()), kTorchvisionParameters.at("vgg16"));
    EXPECT_EQ(parameters(models::vgg16_bn()), kTorchvisionParameters.at("vgg16_bn"));
    EXPECT_EQ(parameters(models::mobilenet_v3_small()), kTorchvisionParameters.at("mobilenet_v3_small"));
    EXPECT_EQ(parameters(models::efficientnet_b0()), kTorchvisionParameters.at("efficientnet_b0"));
    EXPECT_EQ(parameters(models::convnext_tiny()), kTorchvisionParameters.at("convnext_tiny"));
    EXPECT_EQ(parameters(models::vit_b_16()), kTorchvisionParameters.at("vit_b_16"));
    EXPECT_EQ(parameters(models::vit_tiny_16()), kTorchvisionParameters.at("vit_tiny_16"));
    EXPECT_EQ(parameters(models::unet()), kTorchvisionParameters.at("unet"));
    EXPECT_EQ(parameters(models::unet({.bilinear = true})), kTorchvisionParameters.at("unet_bilinear"));
    EXPECT_EQ(parameters(models::unet({.width = 8})), kTorchvisionParameters.at("unet_small"));
}

TEST(Models, PrintsLikeMetalheadWithTheTotal) {
    std::ostringstream os;
    os << models::resnet18();
    const std::string s = os.str();
    EXPECT_EQ(s.rfind("ResNet(\n  Chain(\n    Conv((7, 7), 3 => 64", 0), 0u) << s;
    EXPECT_NE(s.find("relu ∘ +"), std::string::npos) << s;
    EXPECT_NE(s.find("Dense(512 => 1000)"), std::string::npos) << s;
    EXPECT_NE(s.find("Total: 62 trainable arrays, 11_689_512 parameters"), std::string::npos)
        << s.substr(s.size() - 200);
}

TEST(Models, VGGPrintsItsStagesAndHead) {
    std::ostringstream os;
    os << models::vgg11_bn({.num_classes = 10});
    const std::string s = os.str();
    EXPECT_EQ(s.rfind("VGG(\n  Chain(\n    Conv((3, 3), 3 => 64", 0), 0u) << s;
    EXPECT_NE(s.find("BatchNorm(64, relu)"), std::string::npos) << s;
    EXPECT_NE(s.find("AdaptiveMeanPool((7, 7))"), std::string::npos) << s;
    EXPECT_NE(s.find("Dense(4096 => 10)"), std::string::npos) << s;
    EXPECT_NE(s.find("128_812_810 parameters"), std::string::npos) << s.substr(s.size() - 200);
}

TEST(Models, SqueezeExcitationPrintsAsMetalheads) {
    std::ostringstream os;
    os << models::mobilenet_v3_small();
    const std::string s = os.str();
    EXPECT_EQ(s.rfind("MobileNetV3(\n  Chain(\n    Conv((3, 3), 3 => 16, pad=1, stride=2; bias=false)", 0), 0u) << s;
    EXPECT_NE(s.find("SkipConnection("), std::string::npos) << s;
    EXPECT_NE(s.find("Conv((1, 1), 16 => 8, relu)"), std::string::npos) << s;
    EXPECT_NE(s.find("Conv((1, 1), 8 => 16, hardσ)"), std::string::npos) << s;
    EXPECT_NE(s.find("BatchNorm(16, hardswish, momentum=0.01, epsilon=0.001)"), std::string::npos) << s;
    EXPECT_NE(s.find("2_542_856 parameters"), std::string::npos) << s.substr(s.size() - 200);
    os.str("");
    os << models::efficientnet_b0();
    EXPECT_NE(os.str().find("BatchNorm(32, swish)"), std::string::npos) << os.str();
    EXPECT_NE(os.str().find("Conv((1, 1), 8 => 32, σ)"), std::string::npos) << os.str();
}

TEST(Models, ConvNeXtAndViTPrintTheirBlocks) {
    std::ostringstream os;
    os << models::convnext_tiny();
    std::string s = os.str();
    EXPECT_EQ(s.rfind("ConvNeXt(\n  Chain(\n    Conv((4, 4), 3 => 96, stride=4)", 0), 0u) << s;
    EXPECT_NE(s.find("Conv((7, 7), 96 => 96, pad=3, groups=96)"), std::string::npos) << s;
    EXPECT_NE(s.find("Dense(96 => 384, gelu_erf)"), std::string::npos) << s;
    EXPECT_NE(s.find("LayerScale(96)"), std::string::npos) << s;
    EXPECT_NE(s.find("28_589_128 parameters"), std::string::npos) << s.substr(s.size() - 200);
    os.str("");
    os << models::vit_tiny_16();
    s = os.str();
    EXPECT_EQ(s.rfind("ViT(\n  Chain(\n    Conv((16, 16), 3 => 192, stride=16)", 0), 0u) << s;
    EXPECT_NE(s.find("MultiHeadAttention(192, heads = 3)"), std::string::npos) << s;
    EXPECT_NE(s.find("Dense(192 => 768, gelu_erf)"), std::string::npos) << s;
    EXPECT_NE(s.find("5_717_416 parameters"), std::string::npos) << s.substr(s.size() - 200);
}

TEST(Models, UNetPrintsItsStepsAndSkips) {
    std::ostringstream os;
    os << models::unet();
    const std::string s = os.str();
    EXPECT_EQ(s.rfind("UNet(\n  Chain(\n    Conv((3, 3), 3 => 64, pad=1; bias=false)", 0), 0u) << s;
    EXPECT_NE(s.find("MaxPool((2, 2))"), std::string::npos) << s;
    EXPECT_NE(s.find("ConvTranspose((2, 2), 1024 => 512, stride=2)"), std::string::npos) << s;
    EXPECT_NE(s.find("chcat(skip, ·)"), std::string::npos) << s;
    EXPECT_NE(s.find("Conv((1, 1), 64 => 2)"), std::string::npos) << s;
    EXPECT_NE(s.find("31_037_698 parameters"), std::string::npos) << s.substr(s.size() - 200);
    os.str("");
    os << models::unet({.bilinear = true});
    EXPECT_NE(os.str().find("Upsample(:bilinear"), std::string::npos) << os.str();
    EXPECT_NE(os.str().find("17_263_042 parameters"), std::string::npos) << os.str().substr(os.str().size() - 200);
}

// PyTorch's BatchNorm counter has no place in fluxion's BatchNorm: a strict load skips it where the
// model has that BatchNorm, and still refuses it anywhere else.
TEST(Models, StrictLoadSkipsPyTorchsBatchNormCounter) {
    const fs::path dir = fs::path(FLUXION_BINARY_DIR) / ("models_counter_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto m = models::resnet18({.num_classes = 3});
    auto state = fx::state(m);
    state.emplace_back("layer1.0.bn2.num_batches_tracked", fx::full({}, 7, {.dtype = fx::DType::i64}));
    fx::save_state(dir / "with_counter.safetensors", state);
    EXPECT_NO_THROW(fx::load(dir / "with_counter.safetensors", m));
    state.emplace_back("fc.num_batches_tracked", fx::full({}, 7, {.dtype = fx::DType::i64}));
    fx::save_state(dir / "stray_counter.safetensors", state);
    try {
        fx::load(dir / "stray_counter.safetensors", m);
        ADD_FAILURE() << "no error";
    } catch (const fx::IOError& e) {
        EXPECT_NE(std::string(e.what()).find("not in the model: fc.num_batches_tracked"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find("bn2.num_batches_tracked"), std::string::npos) << e.what();
    }
    fs::remove_all(dir);
}

TEST(Models, NumClassesSizesTheHead) {
    const auto m = models::resnet18({.num_classes = 10});
    EXPECT_EQ(m.fc.out_features(), 10);
    EXPECT_EQ(m(fx::randn({1, 3, 32, 32})).shape(), (fx::Shape{1, 10}));
    EXPECT_THROW(models::resnet18({.num_classes = 0}), fx::ValueError);
}

// Fine-tuning: a new head, the trunk frozen; a step changes fc and nothing else.
TEST(Models, FineTuningTrainsOnlyTheNewHead) {
    auto m = models::resnet18();
    m.fc = fx::Dense(512, 3);
    auto opt = fx::setup(fx::Descent(0.1), m);
    for (const auto& prefix : models::trunk(m)) fx::freeze(opt, prefix);
    const auto before = fx::state(m);
    std::map<std::string, std::vector<float>> old;
    for (const auto& [name, t] : before) old[name] = t.to_vector<float>();
    const fx::Tensor x = fx::randn({2, 3, 32, 32});
    auto [loss, g] = fx::withgradient([&](const models::ResNet& r) { return fx::mean(fx::square(r(x))); }, m);
    fx::update(opt, m, g);
    for (const auto& [name, t] : fx::state(m)) {
        if (name.find("running_") != std::string::npos) continue;  // BatchNorm's statistics move in train mode
        const bool changed = t.to_vector<float>() != old.at(name);
        EXPECT_EQ(changed, name.rfind("fc.", 0) == 0) << name;
    }
}

// The same for the U-Net: a new outc for four classes; a step changes outc and nothing else.
TEST(Models, UNetFineTuningTrainsOnlyTheNewOutc) {
    auto m = models::unet({.n_channels = 1, .width = 2});
    m.outc = fx::Conv({1, 1}, 2, 4);
    auto opt = fx::setup(fx::Descent(0.1), m);
    for (const auto& prefix : models::trunk(m)) fx::freeze(opt, prefix);
    std::map<std::string, std::vector<float>> old;
    for (const auto& [name, t] : fx::state(m)) old[name] = t.to_vector<float>();
    const fx::Tensor x = fx::randn({2, 1, 16, 16});
    auto [loss, g] = fx::withgradient([&](const models::UNet& u) { return fx::mean(fx::square(u(x))); }, m);
    fx::update(opt, m, g);
    int changed_tensors = 0;
    for (const auto& [name, t] : fx::state(m)) {
        if (name.find("running_") != std::string::npos) continue;  // BatchNorm's statistics move in train mode
        const bool changed = t.to_vector<float>() != old.at(name);
        EXPECT_EQ(changed, name.rfind("outc.conv.", 0) == 0) << name;
        changed_tensors += changed;
    }
    EXPECT_EQ(changed_tensors, 2);
}

}  // namespace
