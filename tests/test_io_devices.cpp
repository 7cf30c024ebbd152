// test_io_devices.cpp — saving from and loading onto a non-CPU device, using the test backend
// "TestHost" (tests/plugin): a model saved on one device loads on another with identical results,
// and loading keeps each tensor's device and storage.
#include <gtest/gtest.h>

#include <cstdlib>

#include "test_io_support.hpp"

namespace {

using io_test::MLP;
using io_test::mlp;
using io_test::ScratchDir;

// The plugin is found through FLUXION_PLUGIN_PATH, read at the first device call.
const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

class IODevices : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(plugin_path_set);
        if (!fx::functional("TestHost")) GTEST_SKIP() << "the TestHost plugin is not built or not functional";
        host0 = fx::get_device("TestHost", 0);
        host1 = fx::get_device("TestHost", 1);
    }
    fx::Device host0, host1;
};

std::vector<float> values(const fx::Tensor& t) { return t.to_vector<float>(); }

TEST_F(IODevices, SavedOnTheDeviceLoadsOnTheCpu) {
    ScratchDir dir;
    const MLP on_device = mlp({4, 8, 3}) | host0;
    ASSERT_EQ(on_device.layers[0].weight.device(), host0);
    fx::save(dir / "m.safetensors", on_device);

    MLP on_cpu = mlp({4, 8, 3});
    fx::load(dir / "m.safetensors", on_cpu);
    EXPECT_TRUE(on_cpu.layers[1].bias.device().is_cpu());
    const fx::Tensor x = fx::randn({6, 4});
    EXPECT_EQ(values(on_device(x | host0)), values(on_cpu(x)));
}

TEST_F(IODevices, SavedOnTheCpuLoadsOnTheDeviceInPlace) {
    ScratchDir dir;
    const MLP on_cpu = mlp({4, 8, 3});
    fx::save(dir / "m.safetensors", on_cpu);

    MLP on_device = mlp({4, 8, 3}) | host1;
    const void* storage = on_device.layers[0].weight.data_ptr();
    fx::load(dir / "m.safetensors", on_device);
    EXPECT_EQ(on_device.layers[0].weight.device(), host1);
    EXPECT_EQ(on_device.layers[0].weight.data_ptr(), storage);
    const fx::Tensor x = fx::randn({6, 4});
    EXPECT_EQ(values(on_device(x | host1)), values(on_cpu(x)));
}

TEST_F(IODevices, TheFileDoesNotDependOnTheDevice) {
    ScratchDir dir;
    const MLP m = mlp({3, 5, 2});
    fx::save(dir / "cpu.safetensors", m);
    fx::save(dir / "device.safetensors", m | host1);
    EXPECT_EQ(io_test::file_bytes(dir / "cpu.safetensors"), io_test::file_bytes(dir / "device.safetensors"));
}

TEST_F(IODevices, StateWithMixedDevicesAndViewsLoadsOnTheCpu) {
    ScratchDir dir;
    const fx::Tensor base = fx::arange(0, 6, 1).reshape({2, 3});
    fx::save_state(dir / "s.safetensors", std::map<std::string, fx::Tensor>{
                                              {"cpu", base}, {"device", base | host0}, {"view", base.transpose() | host1}});
    const auto state = fx::load_state(dir / "s.safetensors");
    for (const auto& [name, t] : state) EXPECT_TRUE(t.device().is_cpu()) << name;
    EXPECT_EQ(values(state.at("device")), values(base));
    EXPECT_EQ(values(state.at("view")), values(base.transpose()));
}

TEST_F(IODevices, FailedStrictLoadLeavesDeviceTensorsUnchanged) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({4, 8, 3}));
    MLP other = mlp({4, 8, 2}) | host0;
    const std::vector<float> before = values(other.layers[0].weight);
    EXPECT_THROW(fx::load(dir / "m.safetensors", other), fx::IOError);
    EXPECT_EQ(values(other.layers[0].weight), before);
}

}  // namespace
