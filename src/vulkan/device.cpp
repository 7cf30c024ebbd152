// device.cpp — the device entries of the table: whether Vulkan is usable, the devices, synchronising.
#include <algorithm>
#include <cstring>

#include "vulkan/allocator.hpp"
#include "vulkan/context.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/stream.hpp"

namespace fluxion::vulkan {

namespace {
void copy_text(const std::string& text, char* out, std::size_t out_size) {
    if (!out || out_size == 0) return;
    const std::size_t n = std::min(text.size(), out_size - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
}
}  // namespace

bool functional(char* why, std::size_t why_size) {
    std::lock_guard lock(plugin_mutex());
    const Probe& p = probe();
    if (!p.devices.empty()) return true;
    copy_text(p.reason, why, why_size);
    return false;
}

int device_count() {
    std::lock_guard lock(plugin_mutex());
    return int(probe().devices.size());
}

void device_info(int device, char* name, std::size_t name_size, std::size_t* total, std::size_t* free) {
    std::lock_guard lock(plugin_mutex());
    const Context& ctx = context(device);
    copy_text(ctx.properties.deviceName, name, name_size);
    std::size_t heap_bytes = 0;
    for (std::uint32_t i = 0; i < ctx.memory.memoryHeapCount; ++i)
        if (ctx.memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            heap_bytes = std::max<std::size_t>(heap_bytes, ctx.memory.memoryHeaps[i].size);
    const std::size_t reserved = memory_stats(device).reserved;
    if (total) *total = heap_bytes;
    if (free) *free = heap_bytes > reserved ? heap_bytes - reserved : 0;
}

void synchronize(int device) {
    std::lock_guard lock(plugin_mutex());
    stream(context(device)).finish();
    check_validation("synchronize");
}

}  // namespace fluxion::vulkan
