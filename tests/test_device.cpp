// test_device.cpp — devices against the TestHost plugin: discovery, selection order (variable,
// preference file, first functional), moves of tensors and structures, mixed-device errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

const fx::Device host0{"TestHost", 0}, host1{"TestHost", 1};

TEST(Device, PluginIsDiscoveredAndListedBeforeTheCpu) {
    auto names = fx::supported_devices();
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names.back(), "CPU");
    EXPECT_NE(std::find(names.begin(), names.end(), "TestHost"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "CUDA"), names.end()) << "CUDA is always listed, functional or not";
    EXPECT_TRUE(fx::functional("TestHost"));
    EXPECT_TRUE(fx::functional("CPU"));
    EXPECT_FALSE(fx::functional("NoSuchBackend"));
}

TEST(Device, DevicesAreListedWithNamesAndMemory) {
    auto ds = fx::devices("TestHost");
    ASSERT_EQ(ds.size(), 2u);
    EXPECT_EQ(ds[1].device, host1);
    EXPECT_EQ(ds[1].name, "TestHost device 1");
    EXPECT_GT(ds[0].total_memory, 0u);
    EXPECT_EQ(fx::devices("CPU").size(), 1u);
}

TEST(Device, GetDeviceByIndexAndClearErrorForMissingIndex) {
    EXPECT_EQ(fx::get_device("TestHost", 1), host1);
    try {
        fx::get_device("TestHost", 5);
        FAIL() << "expected DeviceError";
    } catch (const fx::DeviceError& e) {
        EXPECT_NE(std::string(e.what()).find("device 5 does not exist"), std::string::npos) << e.what();
    }
    EXPECT_THROW(fx::get_device("NoSuchBackend", 0), fx::DeviceError);
}

TEST(Device, VerboseSelectionSaysWhy) {
    testing::internal::CaptureStderr();
    fx::Device d = fx::get_device({.verbose = true});
    std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("[ Info:"), std::string::npos) << log;
    EXPECT_FALSE(d.is_cpu()) << "a functional plugin is preferred over the CPU";
}

TEST(Device, EnvironmentVariableWinsAndBadPreferenceFallsBack) {
    setenv("FLUXION_GPU_BACKEND", "CPU", 1);
    EXPECT_TRUE(fx::get_device({.verbose = true}).is_cpu());
    setenv("FLUXION_GPU_BACKEND", "NoSuchBackend", 1);
    testing::internal::CaptureStderr();
    fx::Device d = fx::get_device({.verbose = true});
    std::string log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(d.type, "TestHost");
    EXPECT_NE(log.find("Warning"), std::string::npos) << log;
    unsetenv("FLUXION_GPU_BACKEND");
}

TEST(Device, PreferenceFileIsWrittenAndRead) {
    auto dir = std::filesystem::temp_directory_path() / "fluxion_pref_test";
    std::filesystem::create_directories(dir);
    auto old = std::filesystem::current_path();
    std::filesystem::current_path(dir);
    std::ofstream(dir / "LocalPreferences.toml") << "[other]\nkey = 1\n";
    testing::internal::CaptureStderr();
    fx::gpu_backend("CPU");
    testing::internal::GetCapturedStderr();
    std::ifstream in(dir / "LocalPreferences.toml");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(text.find("[other]\nkey = 1"), std::string::npos) << "other sections are kept: " << text;
    EXPECT_NE(text.find("[fluxion]\ngpu_backend = \"CPU\""), std::string::npos) << text;
    EXPECT_TRUE(fx::get_device({.verbose = false}).type == fx::get_device().type);  // cached choice unchanged
    EXPECT_TRUE(fx::get_device({.verbose = true}).is_cpu()) << "a fresh selection reads the preference";
    testing::internal::CaptureStderr();
    fx::gpu_backend("TestHost");  // replaces, not appends
    testing::internal::GetCapturedStderr();
    std::ifstream in2(dir / "LocalPreferences.toml");
    std::string text2((std::istreambuf_iterator<char>(in2)), {});
    EXPECT_EQ(text2.find("\"CPU\""), std::string::npos) << text2;
    EXPECT_EQ(fx::get_device({.verbose = true}).type, "TestHost");
    std::filesystem::current_path(old);
    std::filesystem::remove_all(dir);
}

TEST(Device, TensorsMoveAndComeBackUnchanged) {
    Tensor x = fx::arange(0.0, 6.0).reshape({2, 3});
    Tensor y = x | host0;
    EXPECT_EQ(y.device(), host0);
    EXPECT_NE(y.data_ptr(), x.data_ptr());
    Tensor z = y | host1;  // between two devices of one backend
    EXPECT_EQ(z.device(), host1);
    Tensor back = z | fx::cpu;
    EXPECT_TRUE(back.device().is_cpu());
    EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>());
    EXPECT_EQ((x | fx::cpu).data_ptr(), x.data_ptr()) << "moving to where it is already is free";
}

TEST(Device, GpuMovesToTheChosenDeviceAndRecursesThroughStructures) {
    fx::Device chosen = fx::get_device();
    std::tuple<Tensor, std::vector<Tensor>, std::map<std::string, Tensor>> data{
        fx::ones({2}), {fx::zeros({3}), fx::ones({1})}, {{"a", fx::ones({4})}}};
    auto moved = data | fx::gpu;
    EXPECT_EQ(std::get<0>(moved).device(), chosen);
    EXPECT_EQ(std::get<1>(moved)[1].device(), chosen);
    EXPECT_EQ(std::get<2>(moved).at("a").device(), chosen);
    auto back = fx::cpu(moved);
    EXPECT_TRUE(std::get<2>(back).at("a").device().is_cpu());
    EXPECT_EQ(fx::gpu(3.5), 3.5) << "numbers pass through";
}

TEST(Device, OpsRunOnTheDeviceOfTheirArguments) {
    Tensor a = fx::tensor({1, 2, 3}) | host0, b = fx::tensor({10, 20, 30}) | host0;
    Tensor c = a * b + 1.0;
    EXPECT_EQ(c.device(), host0);
    EXPECT_EQ((c | fx::cpu).to_vector<float>(), (std::vector<float>{11, 41, 91}));
}

TEST(Device, MixedDevicesThrowNamingBothAndTheFix) {
    Tensor a = fx::ones({2}) | host0, b = fx::ones({2});
    try {
        (void)(a + b);
        FAIL() << "expected DeviceError";
    } catch (const fx::DeviceError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("add"), std::string::npos) << m;
        EXPECT_NE(m.find("TestHost:0"), std::string::npos) << m;
        EXPECT_NE(m.find("CPU"), std::string::npos) << m;
        EXPECT_NE(m.find("fx::gpu"), std::string::npos) << m;
    }
    EXPECT_THROW(fx::matmul(fx::ones({2, 2}) | host0, fx::ones({2, 2}) | host1), fx::DeviceError);
}

TEST(Device, ScalarAccessOnDevicesNeedsAllowscalar) {
    Tensor x = fx::arange(0.0, 4.0) | host0;
    EXPECT_THROW(x.at({2}), fx::DeviceError);
    EXPECT_EQ(fx::sum(x).item(), 6.0) << "item() is always allowed";
    fx::allowscalar(true);
    EXPECT_EQ(x.at({2}), 2.0);
    fx::allowscalar(false);
}

TEST(Device, GradientsFlowAcrossMoves) {
    Tensor w = fx::tensor({1, 2, 3});
    auto [g] = fx::gradient([](const Tensor& v) { return fx::sum(fx::square(v | host0)); }, w);
    EXPECT_TRUE(g.device().is_cpu());
    EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST(Device, SynchronizeWorksOnEveryDevice) {
    EXPECT_NO_THROW(fx::synchronize(host1));
    EXPECT_NO_THROW(fx::synchronize(fx::Device{}));
    EXPECT_NO_THROW(fx::synchronize());
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1);
    unsetenv("FLUXION_GPU_BACKEND");
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
