// context.hpp — the state the Vulkan backend keeps: the instance and its usable physical devices
// (probed once, with the validation layer when FLUXION_VULKAN_VALIDATION=1), and per device a
// logical device with one compute queue, created on first use.
#pragma once
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
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
// shared by all threads of the process. It is recursive, and a thread that waits for the device
// lets go of every level it holds meanwhile (Unlocked), so that other threads can record and stage
// work (a data loader's upload of the next batch) while a step runs.
class PluginMutex {
public:
    void lock();
    void unlock();

private:
    friend class Unlocked;
    std::mutex mutex_;
    std::atomic<std::thread::id> owner_{};
    int depth_ = 0;  // levels the owner holds
};
PluginMutex& plugin_mutex();

// While in scope, the calling thread holds no level of plugin_mutex(); every level comes back at
// the end of the scope (also when it is left by an exception). The caller must hold the lock.
class Unlocked {
public:
    Unlocked();
    ~Unlocked();
    Unlocked(const Unlocked&) = delete;
    Unlocked& operator=(const Unlocked&) = delete;

private:
    int depth_;
};

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
    // Uploads from the host go on this queue, in submissions of their own, where the device has a
    // family of transfer-only queues (a DMA engine that runs beside the kernels); VK_NULL_HANDLE
    // otherwise (uploads are recorded with the kernels). FLUXION_VULKAN_DEBUG_TRANSFER_ON_COMPUTE=1
    // takes the compute queue for it, so that devices with one queue (lavapipe) test that path.
    VkQueue transfer_queue = VK_NULL_HANDLE;
    std::uint32_t transfer_family = 0;
    // Buffers are shared by two queue families (VK_SHARING_MODE_CONCURRENT) when these differ.
    std::vector<std::uint32_t> families;
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
