// other_devices.hpp — every device of every functional backend but the CPU, for the tests that
// compare backends: the TestHost plugin's two devices everywhere it is built, CUDA's on a GPU
// machine. Those tests set FLUXION_PLUGIN_PATH to the test plugins' folder before the first call.
#pragma once
#include <cstdlib>
#include <vector>

#include "fluxion/device.hpp"

namespace fluxion::testing {

// The Vulkan plugin hides CPU-kind devices (lavapipe, which the tests run on) unless asked for;
// these tests ask, before the first call into the library scans the plugins.
inline const bool kVulkanCpuDevices = [] { return setenv("FLUXION_VULKAN_CPU_DEVICES", "1", 0) == 0; }();

inline std::vector<Device> other_devices() {
    std::vector<Device> out;
    for (const auto& name : supported_devices())
        if (name != "CPU" && functional(name))
            for (const auto& d : devices(name)) out.push_back(d.device);
    return out;
}

}  // namespace fluxion::testing
