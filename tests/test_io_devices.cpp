// test_io_devices.cpp — saving from and loading onto every non-CPU device (Vulkan on lavapipe
// here, CUDA on a GPU machine: other_devices.hpp): a model saved on one device loads on
// another with identical weights and outputs, and loading keeps each tensor's device and storage.
#include <gtest/gtest.h>

#include <cstdlib>

#include "other_devices.hpp"
#include "test_io_support.hpp"

namespace {

using io_test::MLP;
using io_test::mlp;
using io_test::ScratchDir;

// The plugin is found through FLUXION_PLUGIN_PATH, read at the first device call.
const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

// Every device of every functional backend but the CPU: Vulkan's here, CUDA's on a GPU machine. Comparisons between devices are of weights, exact; outputs are compared on one device.
class IODevices : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(plugin_path_set);
        devices = fx::testing::other_devices();
        if (devices.empty()) GTEST_SKIP() << "no backend besides the CPU is functional";
    }
    std::vector<fx::Device> devices;
};

std::vector<float> values(const fx::Tensor& t) { return (t | fx::cpu).to_vector<float>(); }

void expect_same_weights(const MLP& a, const MLP& b) {
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
        EXPECT_EQ(values(a.layers[i].weight), values(b.layers[i].weight)) << "layer " << i;
        EXPECT_EQ(values(a.layers[i].bias), values(b.layers[i].bias)) << "layer " << i;
    }
}

TEST_F(IODevices, SavedOnTheDeviceLoadsOnTheCpu) {
    for (const auto& dev : devices) {
        ScratchDir dir;
        const MLP on_device = mlp({4, 8, 3}) | dev;
        ASSERT_EQ(on_device.layers[0].weight.device(), dev);
        fx::save(dir / "m.safetensors", on_device);

        MLP on_cpu = mlp({4, 8, 3});
        fx::load(dir / "m.safetensors", on_cpu);
        EXPECT_TRUE(on_cpu.layers[1].bias.device().is_cpu()) << dev.str();
        expect_same_weights(on_cpu, on_device);
        const fx::Tensor x = fx::randn({6, 4});
        EXPECT_EQ(values(on_cpu(x)), values((on_device | fx::cpu)(x))) << dev.str();
    }
}

TEST_F(IODevices, SavedOnTheCpuLoadsOnTheDeviceInPlace) {
    for (const auto& dev : devices) {
        ScratchDir dir;
        const MLP on_cpu = mlp({4, 8, 3});
        fx::save(dir / "m.safetensors", on_cpu);

        MLP on_device = mlp({4, 8, 3}) | dev;
        const void* storage = on_device.layers[0].weight.data_ptr();
        fx::load(dir / "m.safetensors", on_device);
        EXPECT_EQ(on_device.layers[0].weight.device(), dev);
        EXPECT_EQ(on_device.layers[0].weight.data_ptr(), storage) << dev.str();
        expect_same_weights(on_device, on_cpu);
        const fx::Tensor x = fx::randn({6, 4}) | dev;
        EXPECT_EQ(values(on_device(x)), values((on_cpu | dev)(x))) << dev.str();
    }
}

TEST_F(IODevices, TheFileDoesNotDependOnTheDevice) {
    ScratchDir dir;
    const MLP m = mlp({3, 5, 2});
    fx::save(dir / "cpu.safetensors", m);
    for (const auto& dev : devices) {
        fx::save(dir / "device.safetensors", m | dev);
        EXPECT_EQ(io_test::file_bytes(dir / "cpu.safetensors"), io_test::file_bytes(dir / "device.safetensors"))
            << dev.str();
    }
}

TEST_F(IODevices, StateWithMixedDevicesAndViewsLoadsOnTheCpu) {
    ScratchDir dir;
    const fx::Tensor base = fx::arange(0, 6, 1).reshape({2, 3});
    const fx::Device& first = devices.front();
    const fx::Device& last = devices.back();
    fx::save_state(dir / "s.safetensors", std::map<std::string, fx::Tensor>{
                                              {"cpu", base}, {"device", base | first}, {"view", base.transpose() | last}});
    const auto state = fx::load_state(dir / "s.safetensors");
    for (const auto& [name, t] : state) EXPECT_TRUE(t.device().is_cpu()) << name;
    EXPECT_EQ(values(state.at("device")), values(base));
    EXPECT_EQ(values(state.at("view")), values(base.transpose()));
}

TEST_F(IODevices, FailedStrictLoadLeavesDeviceTensorsUnchanged) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({4, 8, 3}));
    for (const auto& dev : devices) {
        MLP other = mlp({4, 8, 2}) | dev;
        const std::vector<float> before = values(other.layers[0].weight);
        EXPECT_THROW(fx::load(dir / "m.safetensors", other), fx::IOError) << dev.str();
        EXPECT_EQ(values(other.layers[0].weight), before) << dev.str();
    }
}

}  // namespace
