// registry.hpp — the backends fluxion knows: the built-in CPU table and the plugins found at run time.
#pragma once
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "fluxion/device.hpp"

namespace fluxion::detail {

struct BackendEntry {
    std::string name;                        // "CPU", "CUDA", ...
    const backend::Backend* table = nullptr; // null when the plugin could not be loaded
    bool functional = false;
    std::string why;                         // why it is not functional (or where it was loaded from)
};

// Every known backend, GPUs (plugins) first, CPU last. Plugins are loaded once, at first use.
const std::vector<BackendEntry>& backends();
const BackendEntry* find_backend(const std::string& name);
// The table for a device; throws DeviceError naming the device if it is unknown or absent.
const backend::Backend& backend_for(const Device& device);

}  // namespace fluxion::detail
