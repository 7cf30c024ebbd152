// transfer.cpp — the transfer queue's command pool, timeline and staging batches, and one upload.
#include "vulkan/transfer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "vulkan/check.hpp"
#include "vulkan/stream.hpp"

namespace fluxion::vulkan {

namespace {

// Staging batches of an upload each; a third upload waits for the older of two in flight.
constexpr std::size_t kUploadBytes = std::size_t{8} << 20;
constexpr std::size_t kUploadBatches = 2;

struct Uploads {
    VkCommandPool pool = VK_NULL_HANDLE;
    VkSemaphore timeline = VK_NULL_HANDLE;
    std::uint64_t submitted = 0;
    std::vector<std::unique_ptr<Batch>> batches;
};

Uploads& uploads(Context& ctx) {
    static auto* all = new std::vector<std::unique_ptr<Uploads>>;
    if (all->size() <= std::size_t(ctx.index)) all->resize(std::size_t(ctx.index) + 1);
    auto& u = (*all)[std::size_t(ctx.index)];
    if (!u) {
        u = std::make_unique<Uploads>();
        VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
        pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
        pool.queueFamilyIndex = ctx.transfer_family;
        FLUXION_VK_CHECK(vkCreateCommandPool(ctx.device, &pool, nullptr, &u->pool));
        u->timeline = timeline_semaphore(ctx);
    }
    return *u;
}

// A batch whose last upload has run: one that is done, a new one, or the oldest, waited for (an
// upload waits only for submissions already made, so this wait ends).
Batch& free_batch(Context& ctx, Uploads& u) {
    std::uint64_t done = 0;
    FLUXION_VK_CHECK(vkGetSemaphoreCounterValue(ctx.device, u.timeline, &done));
    Batch* pick = nullptr;
    for (const auto& b : u.batches)
        if (b->value <= done) pick = b.get();
    if (!pick && u.batches.size() < kUploadBatches) {
        auto b = std::make_unique<Batch>();
        b->commands.cmd = command_buffer(ctx, u.pool);
        b->staging = host_buffer(ctx, kUploadBytes);
        pick = u.batches.emplace_back(std::move(b)).get();
    }
    if (!pick) {
        pick = std::min_element(u.batches.begin(), u.batches.end(), [](const auto& a, const auto& b) {
                   return a->value < b->value;
               })->get();
        VkSemaphoreWaitInfo wait{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
        wait.semaphoreCount = 1;
        wait.pSemaphores = &u.timeline;
        wait.pValues = &pick->value;
        FLUXION_VK_CHECK(vkWaitSemaphores(ctx.device, &wait, UINT64_MAX));
    }
    return *pick;
}

}  // namespace

bool upload(Context& ctx, const Resolved& to, const void* src, std::size_t bytes) {
    if (!ctx.transfer_queue) return false;
    Stream& s = stream(ctx);
    Uploads& u = uploads(ctx);
    // The destination's last use is recorded in the open batch: submit it, so that the upload can
    // wait for it (never wait for a value not yet submitted). A stamp beyond what was submitted
    // then means no command was recorded after all.
    if (to.used_by > s.submitted()) s.flush();
    const std::uint64_t after = std::min(to.used_by, s.submitted());
    const auto* from = static_cast<const char*>(src);
    for (std::size_t done = 0; done < bytes;) {
        const std::size_t size = std::min(kUploadBytes, bytes - done);
        Batch& b = free_batch(ctx, u);
        std::memcpy(b.staging.host, from + done, size);
        FLUXION_VK_CHECK(vkResetCommandBuffer(b.commands.cmd, 0));
        VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        FLUXION_VK_CHECK(vkBeginCommandBuffer(b.commands.cmd, &begin));
        full_barrier(b.commands.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT);  // after the uploads before it
        const VkBufferCopy region{0, to.offset + done, size};
        vkCmdCopyBuffer(b.commands.cmd, b.staging.buffer, to.buffer, 1, &region);
        FLUXION_VK_CHECK(vkEndCommandBuffer(b.commands.cmd));
        submit_on(ctx.transfer_queue, b.commands.cmd, u.timeline, u.submitted + 1, s.timeline(), after,
                  VK_PIPELINE_STAGE_TRANSFER_BIT);
        b.value = ++u.submitted;
        done += size;
    }
    s.after(u.timeline, u.submitted);
    return true;
}

std::uint64_t transfer_uploads(Context& ctx) { return ctx.transfer_queue ? uploads(ctx).submitted : 0; }

}  // namespace fluxion::vulkan
