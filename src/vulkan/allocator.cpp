// allocator.cpp — block cache, fake address space and out-of-memory handling.
#include "vulkan/allocator.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fluxion/error.hpp"
#include "vulkan/check.hpp"
#include "vulkan/context.hpp"
#include "vulkan/stream.hpp"

namespace fluxion::vulkan {

namespace {

constexpr std::uintptr_t kAddressBase = std::uintptr_t{1} << 40;
constexpr std::size_t kGranule = 256;                  // sizes are whole granules
constexpr std::uintptr_t kRangeAlign = std::uintptr_t{1} << 16;  // fake ranges start apart

struct Block {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    std::size_t size = 0;
    bool in_use = false;
    std::uint64_t used_by = 0;  // see allocator.hpp
};

struct Pool {
    std::map<std::uintptr_t, Block> blocks;            // by fake base address
    std::multimap<std::size_t, std::uintptr_t> free;   // cached blocks by size
    std::uintptr_t next = kAddressBase;
    MemoryStats stats;
};

Pool& pool(int device) {
    static auto* pools = new std::vector<std::unique_ptr<Pool>>;
    if (pools->size() <= std::size_t(device)) pools->resize(std::size_t(device) + 1);
    auto& p = (*pools)[std::size_t(device)];
    if (!p) p = std::make_unique<Pool>();
    return *p;
}

void release(Context& ctx, Pool& p, std::uintptr_t base) {
    Block& b = p.blocks.at(base);
    vkDestroyBuffer(ctx.device, b.buffer, nullptr);
    vkFreeMemory(ctx.device, b.memory, nullptr);
    p.stats.reserved -= b.size;
    p.blocks.erase(base);
}

void release_cache(Context& ctx, Pool& p) {
    if (p.free.empty()) return;
    stream(ctx).finish();  // no queued command or upload may still use a block
    for (const auto& [size, base] : p.free) release(ctx, p, base);
    p.free.clear();
}

// A new block from the driver, or VK_NULL_HANDLE buffer with the failing result.
VkResult create_block(Context& ctx, std::size_t bytes, Block& b) {
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = bytes;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    // Written by uploads on a transfer queue of another family, and read by kernels.
    info.sharingMode = ctx.families.size() > 1 ? VK_SHARING_MODE_CONCURRENT : VK_SHARING_MODE_EXCLUSIVE;
    info.queueFamilyIndexCount = std::uint32_t(ctx.families.size());
    info.pQueueFamilyIndices = ctx.families.data();
    VkResult r = vkCreateBuffer(ctx.device, &info, nullptr, &b.buffer);
    if (r != VK_SUCCESS) return r;
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(ctx.device, b.buffer, &req);
    VkMemoryAllocateInfo mem{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mem.allocationSize = req.size;
    mem.memoryTypeIndex = ctx.device_memory_type;
    const auto heap = ctx.memory.memoryTypes[ctx.device_memory_type].heapIndex;
    r = req.size > ctx.memory.memoryHeaps[heap].size ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                                                     : vkAllocateMemory(ctx.device, &mem, nullptr, &b.memory);
    if (r == VK_SUCCESS) r = vkBindBufferMemory(ctx.device, b.buffer, b.memory, 0);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(ctx.device, b.buffer, nullptr);
        if (b.memory) vkFreeMemory(ctx.device, b.memory, nullptr);
        b = Block{};
    }
    return r;
}

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::size_t read_memory_limit() {
    const char* text = std::getenv("FLUXION_VULKAN_MEMORY_LIMIT");
    if (!text || !*text) return 0;
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(text, &end, 10);
    const std::string unit = end ? end : "";
    const int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
    if (end == text || errno || shift < 0 || n == 0 || n > (~0ull >> (shift + 1)))
        throw ValueError(std::string("FLUXION_VULKAN_MEMORY_LIMIT is '") + text +
                         "'; expected a positive number of bytes, optionally with K, M or G (e.g. 512M)");
    return static_cast<std::size_t>(n) << shift;
}

}  // namespace

std::size_t memory_limit() {
    static const std::size_t limit = read_memory_limit();
    return limit;
}

void* allocate(int device, std::size_t bytes) {
    std::lock_guard lock(plugin_mutex());
    Context& ctx = context(device);
    Pool& p = pool(device);
    const std::size_t size = std::max<std::size_t>(1, (bytes + kGranule - 1) / kGranule) * kGranule;
    // A cached block of at least the size and at most twice it.
    auto it = p.free.lower_bound(size);
    if (it != p.free.end() && it->first <= 2 * size) {
        Block& b = p.blocks.at(it->second);
        const std::uintptr_t base = it->second;
        p.free.erase(it);
        b.in_use = true;
        p.stats.allocated += b.size;
        p.stats.peak = std::max(p.stats.peak, p.stats.allocated);
        return reinterpret_cast<void*>(base);
    }
    const std::size_t limit = memory_limit();
    auto over_limit = [&] { return limit && p.stats.reserved + size > limit; };
    Block b;
    VkResult r = over_limit() ? VK_ERROR_OUT_OF_DEVICE_MEMORY : create_block(ctx, size, b);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
        release_cache(ctx, p);
        r = over_limit() ? VK_ERROR_OUT_OF_DEVICE_MEMORY : create_block(ctx, size, b);
    }
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        throw OutOfMemory("Vulkan: out of memory on " + ctx.label() + " allocating " + std::to_string(bytes) +
                          " bytes (" + mib(p.stats.allocated) + " in use by fluxion" +
                          (limit ? ", of FLUXION_VULKAN_MEMORY_LIMIT=" + mib(limit) : std::string()) +
                          "); free tensors or use smaller batches");
    if (r != VK_SUCCESS) fail(r, "allocating device memory", __FILE__, __LINE__);
    const std::uintptr_t base = p.next;
    p.next += (size + 2 * kRangeAlign - 1) / kRangeAlign * kRangeAlign;  // and a gap, so that an
                                                                         // end pointer is nobody's start
    b.size = size;
    b.in_use = true;
    p.blocks.emplace(base, b);
    p.stats.reserved += size;
    p.stats.allocated += size;
    p.stats.peak = std::max(p.stats.peak, p.stats.allocated);
    return reinterpret_cast<void*>(base);
}

void release_scratch(int device, void* ptr) {
    std::lock_guard lock(plugin_mutex());
    Stream& s = stream(context(device));
    if (s.capturing()) s.keep(ptr);
    else deallocate(device, ptr);
}

void deallocate(int device, void* ptr) {
    if (!ptr) return;
    std::lock_guard lock(plugin_mutex());
    context(device);
    Pool& p = pool(device);
    auto it = p.blocks.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == p.blocks.end() || !it->second.in_use)
        throw ValueError("Vulkan free: " + std::to_string(reinterpret_cast<std::uintptr_t>(ptr)) +
                         " is not a live allocation of Vulkan:" + std::to_string(device));
    it->second.in_use = false;
    p.stats.allocated -= it->second.size;
    p.free.emplace(it->second.size, it->first);
}

MemoryStats memory_stats(int device) {
    std::lock_guard lock(plugin_mutex());
    context(device);
    return pool(device).stats;
}

void empty_cache(int device) {
    std::lock_guard lock(plugin_mutex());
    release_cache(context(device), pool(device));
}

Resolved resolve(int device, const void* ptr, std::size_t bytes, const char* op) {
    Pool& p = pool(device);
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = p.blocks.upper_bound(address);
    if (it != p.blocks.begin()) {
        --it;
        Block& b = it->second;
        const std::uintptr_t offset = address - it->first;
        if (b.in_use && offset <= b.size && bytes <= b.size - offset) {
            Stream& s = stream(context(device));
            const std::uint64_t before = b.used_by;
            b.used_by = s.open_value();
            s.touch(reinterpret_cast<void*>(it->first));
            return {b.buffer, offset, b.size, before};
        }
    }
    throw ValueError(std::string(op) + " on Vulkan:" + std::to_string(device) + ": " + std::to_string(bytes) +
                     " bytes at " + std::to_string(address) + " are not inside one live allocation");
}

void mark_used(int device, void* base, std::uint64_t value) {
    auto it = pool(device).blocks.find(reinterpret_cast<std::uintptr_t>(base));
    if (it != pool(device).blocks.end()) it->second.used_by = std::max(it->second.used_by, value);
}

}  // namespace fluxion::vulkan
