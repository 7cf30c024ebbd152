// stream.cpp — the command buffer of a batch, its barriers, fence and staging memory.
#include "vulkan/stream.hpp"

#include <memory>

#include "vulkan/check.hpp"

namespace fluxion::vulkan {

namespace {
constexpr std::size_t kStagingBytes = std::size_t{16} << 20;
}

Stream::Stream(Context& ctx) : ctx_(ctx) {
    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = ctx.queue_family;
    FLUXION_VK_CHECK(vkCreateCommandPool(ctx.device, &pool, nullptr, &pool_));
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool_;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    FLUXION_VK_CHECK(vkAllocateCommandBuffers(ctx.device, &alloc, &cmd_));
    VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    FLUXION_VK_CHECK(vkCreateFence(ctx.device, &fence, nullptr, &fence_));

    capacity_ = kStagingBytes;
    VkBufferCreateInfo buf{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    buf.size = capacity_;
    buf.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    buf.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    FLUXION_VK_CHECK(vkCreateBuffer(ctx.device, &buf, nullptr, &staging_));
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(ctx.device, staging_, &req);
    VkMemoryAllocateInfo mem{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mem.allocationSize = req.size;
    mem.memoryTypeIndex = ctx.host_memory_type;
    FLUXION_VK_CHECK(vkAllocateMemory(ctx.device, &mem, nullptr, &staging_memory_));
    FLUXION_VK_CHECK(vkBindBufferMemory(ctx.device, staging_, staging_memory_, 0));
    void* host = nullptr;
    FLUXION_VK_CHECK(vkMapMemory(ctx.device, staging_memory_, 0, VK_WHOLE_SIZE, 0, &host));
    staging_host_ = static_cast<char*>(host);
}

VkCommandBuffer Stream::record(const std::vector<Access>& accesses) {
    if (!recording_) {
        VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        FLUXION_VK_CHECK(vkBeginCommandBuffer(cmd_, &begin));
        recording_ = true;
    }
    bool hazard = false;
    for (const Access& a : accesses)
        hazard = hazard || written_.count(a.buffer) || (a.write && read_.count(a.buffer));
    if (hazard) {
        // Shader and transfer writes before, any shader or transfer access after.
        VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
        barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                                VK_ACCESS_TRANSFER_WRITE_BIT;
        const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
        vkCmdPipelineBarrier(cmd_, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
        read_.clear();
        written_.clear();
    }
    for (const Access& a : accesses) (a.write ? written_ : read_).insert(a.buffer);
    return cmd_;
}

Staged Stream::stage(std::size_t bytes) {
    const std::size_t align = std::max<std::size_t>(16, ctx_.properties.limits.minStorageBufferOffsetAlignment);
    std::size_t start = (used_ + align - 1) / align * align;
    if (start + bytes > capacity_) {
        finish();
        start = 0;
    }
    used_ = start + bytes;
    return {staging_, start, staging_host_ + start};
}

void Stream::finish() {
    if (recording_) {
        // Transfers into staging memory become visible to the host that reads it after the fence.
        VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
        barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
        vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
        FLUXION_VK_CHECK(vkEndCommandBuffer(cmd_));
        recording_ = false;
        VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
        submit.commandBufferCount = 1;
        submit.pCommandBuffers = &cmd_;
        FLUXION_VK_CHECK(vkQueueSubmit(ctx_.queue, 1, &submit, fence_));
        FLUXION_VK_CHECK(vkWaitForFences(ctx_.device, 1, &fence_, VK_TRUE, UINT64_MAX));
        FLUXION_VK_CHECK(vkResetFences(ctx_.device, 1, &fence_));
        FLUXION_VK_CHECK(vkResetCommandBuffer(cmd_, 0));
        read_.clear();
        written_.clear();
    }
    used_ = 0;
}

Stream& stream(Context& ctx) {
    static auto* streams = new std::vector<std::unique_ptr<Stream>>;
    if (streams->size() <= std::size_t(ctx.index)) streams->resize(std::size_t(ctx.index) + 1);
    auto& s = (*streams)[std::size_t(ctx.index)];
    if (!s) s = std::make_unique<Stream>(ctx);
    return *s;
}

}  // namespace fluxion::vulkan
