// fluxion/device.hpp — devices as objects: choosing a backend and a GPU, what a device supports,
// the preference file, synchronising. Moving values between devices (`x | fx::gpu`, `x | dev`) is
// in functor.hpp.
#pragma once
#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "fluxion/capabilities.hpp"
#include "fluxion/dtype.hpp"

namespace fluxion {

// A device is a backend name and an index: CPU, CUDA:0, CUDA:1, ... Flux's vendor names are
// devices too: AMDGPU:i and Metal:i are device i of the backend serving that vendor's GPUs.
struct Device {
    std::string type = "CPU";
    int index = 0;

    bool is_cpu() const { return type == "CPU"; }
    std::string str() const;  // "CPU" or "CUDA:1"
    friend bool operator==(const Device& a, const Device& b) = default;
};
// "CUDA:0 (NVIDIA H100 80GB HBM3)", "AMDGPU:1 (Vulkan: AMD Radeon RX 7900 XTX)"; just the str()
// of a device that is not usable.
std::ostream& operator<<(std::ostream& out, const Device& device);

struct GetDeviceOptions {
    bool verbose = false;  // log which backend was chosen and why the others were passed over
};

// The device `fx::gpu` moves to: FLUXION_GPU_BACKEND, else the preference in LocalPreferences.toml,
// else the first device that is not cpu-kind of the functional backend of highest priority, else
// the CPU (docs/ARCHITECTURE.md, "Devices and plugins"). A named backend is used even when its devices are cpu-kind (lavapipe).
Device get_device(GetDeviceOptions options = {});
// A specific device; throws DeviceError naming the device asked for when it does not exist or its
// backend is not usable. `backend` may be a vendor name: get_device("AMDGPU", 1).
Device get_device(const std::string& backend, int index);
// The first device of a backend (index 0) or of a vendor name (its first GPU of that vendor).
Device get_device(const std::string& backend);

// Whether the backend (or vendor name) is loaded and has a usable device; if not, `why` (may be
// null) receives the reason.
bool functional(const std::string& backend, std::string* why = nullptr);
// Every backend found, by priority, then Flux's vendor names ("AMDGPU", "Metal"), "CPU" last.
std::vector<std::string> supported_devices();
// Persists the preference in LocalPreferences.toml ([fluxion] gpu_backend), keeping the file's
// other keys and sections; it takes effect at the next start.
void gpu_backend(const std::string& backend);

// Whether `device` runs kernel `op` on element type `t`; if not, `why` (may be null) receives the
// reason naming the device and what is missing. Throws DeviceError if the device is not usable.
bool supports(const Device& device, Op op, DType t, std::string* why = nullptr);

struct DeviceInfo {
    Device device;
    std::string name;           // e.g. "NVIDIA H100 80GB HBM3"
    std::string vendor;         // "NVIDIA", "AMD", "Intel", "Apple", "Mesa", ... ("" if unknown)
    DeviceKind kind = DeviceKind::other;
    std::size_t total_memory = 0;
    std::size_t free_memory = 0;
};
// "TestHost:1: TestHost device 1 (TestHost, virtual GPU, 1.00 GiB, 1.00 GiB free)"
std::ostream& operator<<(std::ostream& out, const DeviceInfo& info);
std::ostream& operator<<(std::ostream& out, DeviceKind kind);
// The visible devices of a backend (or of a vendor name); none if it is not functional.
std::vector<DeviceInfo> devices(const std::string& backend);

void synchronize(const Device& device);  // waits for every queued operation on the device
void synchronize();                      // the same for get_device()

// Reading single elements of a non-CPU tensor is refused unless allowed (CUDA.jl's allowscalar).
void allowscalar(bool allowed);
bool scalar_allowed();

// Lets f32 matrix products and convolutions on GPUs use TF32 tensor cores: several times faster,
// with about 10 bits of mantissa instead of 23 (PyTorch's torch.backends.cuda.matmul.allow_tf32 and
// torch.backends.cudnn.allow_tf32 together). Off by default, so that f32 on a GPU matches the CPU.
// A compiled step keeps the setting it was compiled under. The CPU and Vulkan ignore it.
void allow_tf32(bool allowed);
bool tf32_allowed();

}  // namespace fluxion
