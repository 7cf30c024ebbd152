// stream.cpp — the command buffer of a batch, its barriers, fence and staging memory; captured
// recordings and their submission.
#include "vulkan/stream.hpp"

#include <algorithm>
#include <cstring>
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
// Batches kept before one whose submission has not run yet is waited for: one recording while
// one or two run.
constexpr std::size_t kBatches = 3;

// Transfers into host-visible memory become visible to the host that reads it after the wait.
void host_read_barrier(VkCommandBuffer cmd) {
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void begin(Commands& c, VkCommandBufferUsageFlags flags) {
    VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    info.flags = flags;
    FLUXION_VK_CHECK(vkBeginCommandBuffer(c.cmd, &info));
    c.recording = true;
    // After what earlier submissions on the queue did with the same buffers.
    full_barrier(c.cmd);
}

}  // namespace

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

void destroy(Context& ctx, HostBuffer& b) {
    vkDestroyBuffer(ctx.device, b.buffer, nullptr);
    vkFreeMemory(ctx.device, b.memory, nullptr);
    b = HostBuffer{};
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

VkSemaphore timeline_semaphore(Context& ctx) {
    VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    VkSemaphoreCreateInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    info.pNext = &type;
    VkSemaphore s = VK_NULL_HANDLE;
    FLUXION_VK_CHECK(vkCreateSemaphore(ctx.device, &info, nullptr, &s));
    return s;
}

void submit_on(VkQueue queue, VkCommandBuffer cmd, VkSemaphore signal, std::uint64_t signal_value, VkSemaphore wait,
               std::uint64_t wait_value, VkPipelineStageFlags wait_stages) {
    VkTimelineSemaphoreSubmitInfo values{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
    values.signalSemaphoreValueCount = 1;
    values.pSignalSemaphoreValues = &signal_value;
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.pNext = &values;
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd;
    submit.signalSemaphoreCount = 1;
    submit.pSignalSemaphores = &signal;
    if (wait_value > 0) {
        values.waitSemaphoreValueCount = 1;
        values.pWaitSemaphoreValues = &wait_value;
        submit.waitSemaphoreCount = 1;
        submit.pWaitSemaphores = &wait;
        submit.pWaitDstStageMask = &wait_stages;
    }
    FLUXION_VK_CHECK(vkQueueSubmit(queue, 1, &submit, VK_NULL_HANDLE));
}

void full_barrier(VkCommandBuffer cmd, VkPipelineStageFlags stages) {
    const bool shaders = stages & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | (shaders ? VK_ACCESS_SHADER_WRITE_BIT : 0);
    barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                            (shaders ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT : 0);
    vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

Stream::Stream(Context& ctx) : ctx_(ctx) {
    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = ctx.queue_family;
    FLUXION_VK_CHECK(vkCreateCommandPool(ctx.device, &pool, nullptr, &pool_));
    timeline_ = timeline_semaphore(ctx);
    batches_.reserve(16);
}

std::size_t Stream::capacity() const { return kStagingBytes; }

Batch& Stream::open() {
    if (open_) return *open_;
    std::uint64_t done = 0;
    FLUXION_VK_CHECK(vkGetSemaphoreCounterValue(ctx_.device, timeline_, &done));
    Batch* pick = nullptr;
    for (const auto& b : batches_)
        if (b->readers == 0 && b->value <= done) pick = b.get();
    // None free: wait for the oldest that nobody reads (its readers need the lock to finish), or
    // make another.
    if (!pick && batches_.size() >= kBatches)
        for (const auto& b : batches_)
            if (b->readers == 0 && (!pick || b->value < pick->value)) pick = b.get();
    if (pick) {
        wait(pick->value, Wait::locked);
        if (pick->commands.cmd) FLUXION_VK_CHECK(vkResetCommandBuffer(pick->commands.cmd, 0));
    } else {
        auto b = std::make_unique<Batch>();
        b->commands.cmd = command_buffer(ctx_, pool_);
        b->commands.read.reserve(64);
        b->commands.written.reserve(64);
        b->staging = host_buffer(ctx_, kStagingBytes);
        pick = batches_.emplace_back(std::move(b)).get();
    }
    pick->commands.read.clear();
    pick->commands.written.clear();
    pick->used = 0;
    open_ = pick;
    return *pick;
}

Commands& Stream::current() { return capturing() ? capture_->commands : open().commands; }

VkCommandBuffer Stream::record(const Access* accesses, std::size_t n) {
    Commands& c = current();
    if (!c.recording) begin(c, capturing() ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
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
        return {capture_->staging.buffer, start, capture_->staging.host + start, nullptr};
    }
    Batch* b = &open();
    std::size_t start = (b->used + align - 1) / align * align;
    if (start + bytes > kStagingBytes) {
        flush();
        b = &open();
        start = 0;
    }
    b->used = start + bytes;
    return {b->staging.buffer, start, b->staging.host + start, b};
}

void Stream::after(VkSemaphore semaphore, std::uint64_t value) {
    upload_ = semaphore;
    upload_value_ = std::max(upload_value_, value);
}

void Stream::submit(VkCommandBuffer cmd) {
    // After the uploads on the transfer queue (already submitted: never a wait before its signal).
    const std::uint64_t wait = upload_value_ > upload_waited_ ? upload_value_ : 0;
    submit_on(ctx_.queue, cmd, timeline_, submitted_ + 1, upload_, wait,
              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);
    ++submitted_;
    upload_waited_ = upload_value_;
}

void Stream::wait(std::uint64_t value, Wait how, bool uploads) {
    VkSemaphore semaphores[2] = {timeline_, upload_};
    const std::uint64_t values[2] = {value, upload_value_};
    VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    info.semaphoreCount = uploads && upload_ ? 2 : 1;
    info.pSemaphores = semaphores;
    info.pValues = values;
    if (how == Wait::locked) {
        FLUXION_VK_CHECK(vkWaitSemaphores(ctx_.device, &info, UINT64_MAX));
        return;
    }
    const Unlocked unlocked;
    FLUXION_VK_CHECK(vkWaitSemaphores(ctx_.device, &info, UINT64_MAX));
}

void Stream::flush() {
    if (!open_ || !open_->commands.recording) return;
    Batch& b = *open_;
    host_read_barrier(b.commands.cmd);
    FLUXION_VK_CHECK(vkEndCommandBuffer(b.commands.cmd));
    b.commands.recording = false;
    open_ = nullptr;
    submit(b.commands.cmd);
    b.value = submitted_;
}

void Stream::finish(Wait how) {
    flush();
    wait(submitted_, how, true);
}

void Stream::read(const Staged& staged, void* dst, std::size_t bytes) {
    flush();
    Batch& b = *staged.batch;
    ++b.readers;
    try {
        wait(b.value, Wait::unlocked);
    } catch (...) {
        --b.readers;
        throw;
    }
    std::memcpy(dst, staged.host, bytes);
    --b.readers;
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
    std::sort(r->touched.begin(), r->touched.end());
    r->touched.erase(std::unique(r->touched.begin(), r->touched.end()), r->touched.end());
    return r;
}

void Stream::on_run(std::function<void()> f) {
    if (capturing()) capture_->on_run.push_back(std::move(f));
}

void Stream::keep(void* device_ptr) { capture_->kept.push_back(device_ptr); }

void Stream::touch(void* device_ptr) {
    if (capturing()) capture_->touched.push_back(device_ptr);
}

void Stream::run(Recording& r) {
    flush();  // the work before (the inputs' copies) runs first: the recording begins with a barrier
    for (const auto& f : r.on_run) f();  // its staging memory is free: its last submission has run
    submit(r.commands.cmd);
    for (void* p : r.touched) mark_used(ctx_.index, p, submitted_);
    wait(submitted_, Wait::unlocked);
}

void Stream::free(std::unique_ptr<Recording> r) {
    if (!r) return;
    vkFreeCommandBuffers(ctx_.device, pool_, 1, &r->commands.cmd);
    destroy(ctx_, r->staging);
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
