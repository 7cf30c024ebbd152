// context.hpp — the state the Vulkan backend keeps: the instance and its usable physical devices
// (probed once, with the validation layer when FLUXION_VULKAN_VALIDATION=1), and per device a
// logical device with one compute queue, created on first use.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace fluxion::vulkan {

struct Probe {
    VkInstance instance = VK_NULL_HANDLE;
    std::vector<VkPhysicalDevice> devices;  // those with a compute queue and push descriptors
    std::string reason;                     // why `devices` is empty
    bool validation = false;                // the Khronos layer is on, synchronization validation included
};
const Probe& probe();

// Every entry of the table holds this lock: the contexts, their command buffers and allocators are
// shared by all threads of the process.
std::recursive_mutex& plugin_mutex();

struct Context {
    int index = 0;
    VkPhysicalDevice physical = VK_NULL_HANDLE;
    VkPhysicalDeviceProperties properties{};
    VkPhysicalDeviceMemoryProperties memory{};
    bool float64 = false, int64 = false;  // shaderFloat64, shaderInt64
    bool storage16 = false;               // storageBuffer16BitAccess: f16, bf16 in uint16_t, not packed
    std::uint32_t subgroup_size = 1;
    bool subgroup_arithmetic = false;  // subgroupAdd and friends in compute shaders
    std::uint32_t workgroup_size = 1;  // the 1-D workgroup of elementwise kernels
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    std::uint32_t queue_family = 0;
    std::uint32_t device_memory_type = 0, host_memory_type = 0;
    PFN_vkCmdPushDescriptorSetKHR push_descriptor_set = nullptr;

    std::string label() const;  // "Vulkan:0 (llvmpipe ...)", for messages
};

// Checks the index (fluxion::DeviceError naming it) and returns the device's context.
Context& context(int device);

// The reason no device is usable, or "" when some is; raises fluxion::DeviceError for validation
// messages reported since the last check when validation is on (a test then fails at the next
// synchronisation point).
void check_validation(const char* where);
std::uint64_t validation_message_count();

}  // namespace fluxion::vulkan
