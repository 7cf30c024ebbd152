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
// torchvision is missing too (and checked against the script's where it is not).
const std::map<std::string, std::int64_t> kTorchvisionParameters{{"resnet18", 11689512},
                                                                 {"resnet34", 21797672},
                                                                 {"resnet50", 25557032},
                                                                 {"wide_resnet50_2", 68883240},
                                                                 {"mobilenet_v2", 3504872},
                                                                 {"vgg11", 132863336},
                                                                 {"vgg11_bn", 132868840},
                                                                 {"vgg16", 138357544},
                                                                 {"vgg16_bn", 138365992}};

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
TEST(Models, VGG11MatchesTorchvision) { expect_torchvision_logits(models::vgg11({.num_classes = 10}), "vgg11", 64, 10); }
TEST(Models, VGG11BatchNormMatchesTorchvision) {
    expect_torchvision_logits(models::vgg11_bn({.num_classes = 10}), "vgg11_bn", 64, 10);
}
TEST(Models, VGG16MatchesTorchvision) {
    // On the CPU only: vgg11's layers, more of them (vgg11 runs on every device).
    expect_torchvision_logits(models::vgg16({.num_classes = 10}), "vgg16", 64, 10, {fx::Device{}});
}
TEST(Models, VGG16BatchNormMatchesTorchvision) {
    expect_torchvision_logits(models::vgg16_bn({.num_classes = 10}), "vgg16_bn", 64, 10, {fx::Device{}});
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

}  // namespace
