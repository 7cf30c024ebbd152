// registry.hpp — the backends fluxion knows: the built-in CPU table and the plugins found at run
// time, and Flux's vendor names ("AMDGPU", "Metal") for the devices they report.
#pragma once
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "fluxion/device.hpp"

namespace fluxion::detail {

struct BackendEntry {
    std::string name;                        // "CPU", "CUDA", ... (from the table, else the file name)
    const backend::Backend* table = nullptr; // null when the plugin could not be loaded
    bool functional = false;
    std::string why;                         // why it is not functional (or where it was loaded from)
    void* library = nullptr;                 // the plugin's dlopen handle (null for the CPU)
};

// Every backend found, plugins by priority (highest first, then by name), the CPU last. Plugins
// are loaded once, at first use.
const std::vector<BackendEntry>& backends();
// The backend of that name (any letter case), or null.
const BackendEntry* find_backend(const std::string& name);
// A symbol the backend's plugin exports besides its table (optional switches such as
// fluxion_allow_tf32), or null when it has none or is built in.
void* plugin_symbol(const BackendEntry& backend, const char* name);

// A name of Flux's that stands for the GPUs of one vendor, whichever backend reports them.
struct VendorDevices {
    const char* name;                     // "AMDGPU"
    const char* vendor;                   // "AMD", as DeviceProperties::vendor says it
    const BackendEntry* served_by = nullptr;  // the functional backend of highest priority with such a GPU
    std::vector<int> indices;             // its devices of that vendor (never cpu-kind ones)
    std::string why;                      // why none serves the name
};
// Resolved once, at first use: this asks every functional backend for its devices' properties.
const std::vector<VendorDevices>& vendor_names();
std::vector<std::string> vendor_name_list();  // "AMDGPU", "Metal", without resolving them
// The vendor name `name` (any letter case), resolved, or null when it is not one.
const VendorDevices* find_vendor_name(const std::string& name);

// The table for a device; throws DeviceError naming the device if it is unknown or not usable.
const backend::Backend& backend_for(const Device& device);

// Why `name` is neither a backend found nor a vendor name (where plugins were looked for).
std::string unknown_backend(const std::string& name);

// The device's properties; throws as backend_for.
backend::DeviceProperties properties(const Device& device);

}  // namespace fluxion::detail
