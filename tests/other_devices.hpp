// other_devices.hpp — every device of every functional backend but the CPU, for the tests that
// compare backends: the TestHost plugin's two devices everywhere it is built, CUDA's on a GPU
// machine. Those tests set FLUXION_PLUGIN_PATH to the test plugins' folder before the first call.
#pragma once
#include <vector>

#include "fluxion/device.hpp"

namespace fluxion::testing {

inline std::vector<Device> other_devices() {
    std::vector<Device> out;
    for (const auto& name : supported_devices())
        // Vulkan joins once its kernel table is complete (issue 11); test_vulkan covers it until then.
        if (name != "CPU" && name != "Vulkan" && functional(name))
            for (const auto& d : devices(name)) out.push_back(d.device);
    return out;
}

}  // namespace fluxion::testing
