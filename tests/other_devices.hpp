// other_devices.hpp — every device of every functional backend but the CPU, for the tests that
// compare backends: the TestHost plugin's two devices everywhere it is built, Vulkan's (lavapipe
// here: cpu-kind devices are listed, though fx::gpu never picks them unnamed), CUDA's on a GPU
// machine. Those tests set FLUXION_PLUGIN_PATH to the test plugins' folder before the first call.
#pragma once
#include <iostream>
#include <string>
#include <vector>

#include "fluxion/device.hpp"

namespace fluxion::testing {

// Flux's vendor names ("AMDGPU", "Metal") are left out: their devices are listed under their
// backend's name already.
inline std::vector<Device> other_devices() {
    std::vector<Device> out;
    for (const auto& name : supported_devices())
        if (name != "CPU" && name != "AMDGPU" && name != "Metal" && functional(name))
            for (const auto& d : devices(name)) out.push_back(d.device);
    return out;
}

// Those of other_devices() that run every kernel on element type `t` (fx::supports); each one left
// out is named on stdout with the device's reason. Not as "[  SKIPPED ]": the test itself still
// runs, on the CPU and the devices kept, and gtest reports its own status.
inline std::vector<Device> other_devices(DType t) {
    std::vector<Device> out;
    for (const auto& d : other_devices()) {
        std::string why;
        bool runs = true;
        for (int op = 0; runs && op <= static_cast<int>(Op::optimiser_step); ++op)
            runs = supports(d, static_cast<Op>(op), t, &why);
        if (runs)
            out.push_back(d);
        else
            std::cout << "[ LEFT OUT ] " << d.str() << " for " << name(t) << ": " << why << "\n";
    }
    return out;
}

}  // namespace fluxion::testing
