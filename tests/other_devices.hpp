// other_devices.hpp — every device of every functional backend but the CPU, for the tests that
// compare backends: Vulkan's (lavapipe here: cpu-kind devices are listed, though fx::gpu never
// picks them unnamed), CUDA's on a GPU machine. The TestHost plugins (tests/plugin/), which run the
// CPU's own kernels, are no other backend and are left out: they test plugin loading and device
// semantics only (test_device, test_compile). Those tests set FLUXION_PLUGIN_PATH to the test
// plugins' folder before the first call.
#pragma once
#include <gtest/gtest.h>

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
        if (name != "CPU" && name != "AMDGPU" && name != "Metal" && name.rfind("TestHost", 0) != 0 && functional(name))
            for (const auto& d : devices(name)) out.push_back(d.device);
    return out;
}

// Those of other_devices() that run every kernel on element type `t` (fx::supports). A device that
// takes `t` for no kernel at all (a GPU without 64-bit floats) is left out, named on stdout with its
// reason; one that lacks only some of them fails the calling test, naming the first missing op: a
// device that quietly dropped out of a comparison would turn its evidence into nothing.
inline std::vector<Device> other_devices(DType t) {
    std::vector<Device> out;
    for (const auto& d : other_devices()) {
        std::string first_why, why;
        int missing = 0, first = -1;
        constexpr int kOps = static_cast<int>(Op::optimiser_step) + 1;
        for (int op = 0; op < kOps; ++op)
            if (!supports(d, static_cast<Op>(op), t, &why) && missing++ == 0) first = op, first_why = why;
        if (missing == 0) out.push_back(d);
        else if (missing == kOps)
            std::cout << "[ LEFT OUT ] " << d.str() << " takes no " << name(t) << ": " << first_why << "\n";
        else
            ADD_FAILURE() << d.str() << " lacks " << missing << " of " << kOps << " kernels for " << name(t) << " ("
                          << name(static_cast<Op>(first)) << ": " << first_why
                          << "), so it would be left out of a comparison";
    }
    return out;
}

}  // namespace fluxion::testing
