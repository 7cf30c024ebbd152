// stream.cpp — the command buffer of a batch, its barriers, fence and staging memory; captured
// recordings and their submission.
#include "vulkan/stream.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include "fluxion/error.hpp"
#include "vulkan/allocator.hpp"
#include "vulkan/check.hpp"

namespace fluxion::vulkan {

namespace {
constexpr std::size_t kStagingBytes = std::size_t{16} << 20;
// A recording's parameter blocks and uploads: a LeNet-5 training step needs about 20 KiB.
constexpr std::size_t kRecordingBytes = std::size_t{4} << 20;

HostBuffer host_buffer(Context& ctx, std::size_t bytes) {
    HostBuffer b;
    VkBufferCreateInfo buf{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    buf.size = bytes;
    buf.usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    buf.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    FLUXION_VK_CHECK(vkCreateBuffer(ctx.device, &buf, nullptr, &b.buffer));
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(ctx.device, b.buffer, &req);
    VkMemoryAllocateInfo mem{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mem.allocationSize = req.size;
    mem.memoryTypeIndex = ctx.host_memory_type;
    FLUXION_VK_CHECK(vkAllocateMemory(ctx.device, &mem, nullptr, &b.memory));
    FLUXION_VK_CHECK(vkBindBufferMemory(ctx.device, b.buffer, b.memory, 0));
    void* host = nullptr;
    FLUXION_VK_CHECK(vkMapMemory(ctx.device, b.memory, 0, VK_WHOLE_SIZE, 0, &host));
    b.host = static_cast<char*>(host);
    return b;
}

VkCommandBuffer command_buffer(Context& ctx, VkCommandPool pool) {
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    FLUXION_VK_CHECK(vkAllocateCommandBuffers(ctx.device, &alloc, &cmd));
    return cmd;
}

// Shader and transfer writes before, any shader or transfer access after.
void full_barrier(VkCommandBuffer cmd) {
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                            VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

// Transfers into host-visible memory become visible to the host that reads it after the fence.
void host_read_barrier(VkCommandBuffer cmd) {
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

Stream::Stream(Context& ctx) : ctx_(ctx) {
    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = ctx.queue_family;
    FLUXION_VK_CHECK(vkCreateCommandPool(ctx.device, &pool, nullptr, &pool_));
    batch_.cmd = command_buffer(ctx, pool_);
    batch_.read.reserve(64);
    batch_.written.reserve(64);
    VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    FLUXION_VK_CHECK(vkCreateFence(ctx.device, &fence, nullptr, &fence_));
    capacity_ = kStagingBytes;
    HostBuffer staging = host_buffer(ctx, capacity_);
    staging_ = staging.buffer;
    staging_memory_ = staging.memory;
    staging_host_ = staging.host;
}

Commands& Stream::current() { return capturing() ? capture_->commands : batch_; }

VkCommandBuffer Stream::record(const Access* accesses, std::size_t n) {
    Commands& c = current();
    if (!c.recording) {
        VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        begin.flags = &c == &batch_ ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
        FLUXION_VK_CHECK(vkBeginCommandBuffer(c.cmd, &begin));
        c.recording = true;
    }
    auto has = [](const std::vector<VkBuffer>& v, VkBuffer b) { return std::find(v.begin(), v.end(), b) != v.end(); };
    bool hazard = false;
    for (std::size_t i = 0; i < n; ++i)
        hazard = hazard || has(c.written, accesses[i].buffer) || (accesses[i].write && has(c.read, accesses[i].buffer));
    if (hazard) {
        full_barrier(c.cmd);
        c.read.clear();
        c.written.clear();
    }
    for (std::size_t i = 0; i < n; ++i) {
        auto& list = accesses[i].write ? c.written : c.read;
        if (!has(list, accesses[i].buffer)) list.push_back(accesses[i].buffer);
    }
    return c.cmd;
}

Staged Stream::stage(std::size_t bytes) {
    const std::size_t align = std::max<std::size_t>(16, ctx_.properties.limits.minStorageBufferOffsetAlignment);
    if (capturing()) {
        const std::size_t start = (capture_->used + align - 1) / align * align;
        if (start + bytes > kRecordingBytes)
            throw ValueError("Vulkan on " + ctx_.label() + ": a recorded submission needs more than " +
                             std::to_string(kRecordingBytes >> 20) + " MiB of parameters and uploads");
        capture_->used = start + bytes;
        return {capture_->staging.buffer, start, capture_->staging.host + start};
    }
    std::size_t start = (used_ + align - 1) / align * align;
    if (start + bytes > capacity_) {
        finish();
        start = 0;
    }
    used_ = start + bytes;
    return {staging_, start, staging_host_ + start};
}

void Stream::submit_and_wait(VkCommandBuffer cmd) {
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd;
    FLUXION_VK_CHECK(vkQueueSubmit(ctx_.queue, 1, &submit, fence_));
    FLUXION_VK_CHECK(vkWaitForFences(ctx_.device, 1, &fence_, VK_TRUE, UINT64_MAX));
    FLUXION_VK_CHECK(vkResetFences(ctx_.device, 1, &fence_));
}

void Stream::finish() {
    if (batch_.recording) {
        host_read_barrier(batch_.cmd);
        FLUXION_VK_CHECK(vkEndCommandBuffer(batch_.cmd));
        batch_.recording = false;
        submit_and_wait(batch_.cmd);
        FLUXION_VK_CHECK(vkResetCommandBuffer(batch_.cmd, 0));
        batch_.read.clear();
        batch_.written.clear();
    }
    used_ = 0;
}

void Stream::begin_capture() {
    if (capture_) throw ValueError("Vulkan on " + ctx_.label() + ": a capture is already in progress");
    auto r = std::make_unique<Recording>();
    r->commands.cmd = command_buffer(ctx_, pool_);
    r->staging = host_buffer(ctx_, kRecordingBytes);
    capture_ = std::move(r);
    capture_thread_ = std::this_thread::get_id();
}

std::unique_ptr<Recording> Stream::end_capture() {
    if (!capturing()) return nullptr;  // none, or another thread's
    std::unique_ptr<Recording> r = std::move(capture_);
    if (!r) return nullptr;
    if (!r->commands.recording) {  // nothing was recorded
        free(std::move(r));
        return nullptr;
    }
    host_read_barrier(r->commands.cmd);
    FLUXION_VK_CHECK(vkEndCommandBuffer(r->commands.cmd));
    r->commands.recording = false;
    return r;
}

void Stream::on_run(std::function<void()> f) {
    if (capturing()) capture_->on_run.push_back(std::move(f));
}

void Stream::keep(void* device_ptr) { capture_->kept.push_back(device_ptr); }

void Stream::run(Recording& r) {
    finish();  // the work before (the inputs' copies) has run, and staging is free
    for (const auto& f : r.on_run) f();
    submit_and_wait(r.commands.cmd);
}

void Stream::free(std::unique_ptr<Recording> r) {
    if (!r) return;
    vkFreeCommandBuffers(ctx_.device, pool_, 1, &r->commands.cmd);
    vkDestroyBuffer(ctx_.device, r->staging.buffer, nullptr);
    vkFreeMemory(ctx_.device, r->staging.memory, nullptr);
    for (void* p : r->kept) deallocate(ctx_.index, p);
}

Stream& stream(Context& ctx) {
    static auto* streams = new std::vector<std::unique_ptr<Stream>>;
    if (streams->size() <= std::size_t(ctx.index)) streams->resize(std::size_t(ctx.index) + 1);
    auto& s = (*streams)[std::size_t(ctx.index)];
    if (!s) s = std::make_unique<Stream>(ctx);
    return *s;
}

}  // namespace fluxion::vulkan
