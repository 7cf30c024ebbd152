// stream.hpp — recording work for a device's queue. Kernels and copies are recorded into one
// command buffer and submitted in a batch when the host needs a result (synchronize, copy_to_host)
// or the staging memory of the batch is full; the host then waits on the batch's fence. Between
// two commands a memory barrier is recorded only when the second touches a buffer the first wrote,
// or writes one the first read (buffer granularity), so independent kernels may overlap.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "vulkan/context.hpp"

namespace fluxion::vulkan {

struct Access {
    VkBuffer buffer;
    bool write;
};

// Host-visible memory valid until the batch it was taken for has run.
struct Staged {
    VkBuffer buffer;
    VkDeviceSize offset;
    void* host;
};

class Stream {
public:
    explicit Stream(Context& ctx);

    // The command buffer, begun, after the barrier the accesses need.
    VkCommandBuffer record(const std::vector<Access>& accesses);
    // `bytes` of staging memory aligned for storage buffers; submits and waits for the batch
    // first when the batch's staging memory is full. `bytes` is at most capacity().
    Staged stage(std::size_t bytes);
    std::size_t capacity() const { return capacity_; }
    // Submits the batch (if any) and waits until the device has run it.
    void finish();

private:
    Context& ctx_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cmd_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
    bool recording_ = false;
    std::set<VkBuffer> read_, written_;  // since the last barrier
    VkBuffer staging_ = VK_NULL_HANDLE;
    VkDeviceMemory staging_memory_ = VK_NULL_HANDLE;
    char* staging_host_ = nullptr;
    std::size_t capacity_ = 0, used_ = 0;
};

Stream& stream(Context& ctx);

}  // namespace fluxion::vulkan
