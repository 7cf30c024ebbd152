// copy.cpp — copies between the host and devices, and between devices, through host-visible
// staging memory: an upload goes to the transfer queue where the device has one (transfer.hpp), or
// is recorded in the stream's batch (the caller's memory is free again on return either way); a
// download submits the batch and waits for it without the plugin lock.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fluxion/error.hpp"
#include "vulkan/allocator.hpp"
#include "vulkan/context.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/stream.hpp"
#include "vulkan/transfer.hpp"

namespace fluxion::vulkan {

namespace {

void record_copy(Stream& s, VkBuffer src, VkDeviceSize src_offset, VkBuffer dst, VkDeviceSize dst_offset,
                 std::size_t bytes) {
    VkCommandBuffer cmd = s.record({{src, false}, {dst, true}});
    const VkBufferCopy region{src_offset, dst_offset, bytes};
    vkCmdCopyBuffer(cmd, src, dst, 1, &region);
}

}  // namespace

void copy_from_host(int device, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    std::lock_guard lock(plugin_mutex());
    Context& ctx = context(device);
    Stream& s = stream(ctx);
    const Resolved to = resolve(device, dst, bytes, "copy_from_host");
    if (!s.capturing() && upload(ctx, to, src, bytes)) return;
    const auto* from = static_cast<const char*>(src);
    for (std::size_t done = 0; done < bytes;) {
        const std::size_t size = std::min(s.capacity(), bytes - done);
        const Staged staged = s.stage(size);
        std::memcpy(staged.host, from + done, size);
        // A recording reads the same host memory again before each submission.
        if (s.capturing()) s.on_run([host = staged.host, src = from + done, size] { std::memcpy(host, src, size); });
        record_copy(s, staged.buffer, staged.offset, to.buffer, to.offset + done, size);
        done += size;
    }
}

void copy_to_host(int device, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    std::lock_guard lock(plugin_mutex());
    Context& ctx = context(device);
    Stream& s = stream(ctx);
    if (s.capturing())
        throw ValueError("copy_to_host on " + ctx.label() + ": a recorded submission cannot read results on the host");
    const Resolved from = resolve(device, src, bytes, "copy_to_host");
    auto* to = static_cast<char*>(dst);
    for (std::size_t done = 0; done < bytes;) {
        const std::size_t size = std::min(s.capacity(), bytes - done);
        const Staged staged = s.stage(size);
        record_copy(s, from.buffer, from.offset + done, staged.buffer, staged.offset, size);
        s.read(staged, to + done, size);
        done += size;
    }
    check_validation("copy_to_host");
}

void copy_device(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    std::lock_guard lock(plugin_mutex());
    if (dst_device == src_device) {
        Stream& s = stream(context(dst_device));
        const Resolved from = resolve(src_device, src, bytes, "copy_device");
        const Resolved to = resolve(dst_device, dst, bytes, "copy_device");
        record_copy(s, from.buffer, from.offset, to.buffer, to.offset, bytes);
        return;
    }
    // Between two Vulkan devices, through the host.
    std::vector<char> host(bytes);
    copy_to_host(src_device, host.data(), src, bytes);
    copy_from_host(dst_device, dst, host.data(), bytes);
}

}  // namespace fluxion::vulkan
