// fluxion/device.hpp — devices as objects: choosing a backend and a GPU, the preference file,
// synchronising. Moving values between devices (`x | fx::gpu`, `x | dev`) is in functor.hpp.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "fluxion/capabilities.hpp"
#include "fluxion/dtype.hpp"

namespace fluxion {

// A device is a backend name and an index: CPU, CUDA:0, CUDA:1, ...
struct Device {
    std::string type = "CPU";
    int index = 0;

    bool is_cpu() const { return type == "CPU"; }
    std::string str() const;  // "CPU" or "CUDA:1"
    friend bool operator==(const Device& a, const Device& b) = default;
};

struct GetDeviceOptions {
    bool verbose = false;  // log which backend was chosen and why the others were passed over
};

// The device `fx::gpu` moves to: FLUXION_GPU_BACKEND, else the preference in LocalPreferences.toml,
// else the first functional entry of supported_devices(), else the CPU (docs/ARCHITECTURE.md,
// "Devices and plugins").
Device get_device(GetDeviceOptions options = {});
// A specific device; throws DeviceError naming the index when that device does not exist.
Device get_device(const std::string& backend, int index = 0);

bool functional(const std::string& backend);      // loaded and at least one device usable
std::vector<std::string> supported_devices();       // every known backend, GPUs first, "CPU" last
void gpu_backend(const std::string& backend);       // persists the preference (LocalPreferences.toml)

struct DeviceInfo {
    Device device;
    std::string name;           // e.g. "NVIDIA H100 80GB HBM3"
    std::string vendor;         // "NVIDIA", "AMD", "Intel", "Apple", "Mesa", ... ("" if unknown)
    DeviceKind kind = DeviceKind::other;
    std::size_t total_memory = 0;
    std::size_t free_memory = 0;
};
std::vector<DeviceInfo> devices(const std::string& backend);  // the visible devices of a backend

void synchronize(const Device& device);  // waits for every queued operation on the device
void synchronize();                      // the same for get_device()

// Reading single elements of a non-CPU tensor is refused unless allowed (CUDA.jl's allowscalar).
void allowscalar(bool allowed);
bool scalar_allowed();

}  // namespace fluxion
