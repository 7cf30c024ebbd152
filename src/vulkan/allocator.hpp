// allocator.hpp — the caching device allocator, one pool per device, and the map from the plain
// `void*` device pointers the core sees to (VkBuffer, offset). Each allocation is one VkBuffer with
// its own device-local memory, given a unique range of a fake address space: the core does pointer
// arithmetic on views, and any pointer inside a range resolves to its buffer (ggml's idea).
// Freed blocks are kept and handed out again. That is safe while work using them is queued: the
// device's stream orders every batch after the submissions before it, and within a batch its
// barriers order a reuse after the earlier accesses of the same VkBuffer. Each block remembers the
// stream's timeline value of the last submission that used it (stamped when a command is recorded,
// and again at each submission of a recording that uses it), so that an upload on the transfer
// queue waits for exactly that. Memory goes back to the driver (empty_cache) only after the queues
// are idle.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>

namespace fluxion::vulkan {

// Throws fluxion::OutOfMemory when the device is full even after the cache is released.
void* allocate(int device, std::size_t bytes);
// FLUXION_VULKAN_MEMORY_LIMIT (bytes, or with a K, M or G suffix): the most device memory fluxion
// reserves on each Vulkan device, so that running out can be tested, or a GPU shared with other
// programs; 0 when unset. Throws fluxion::ValueError when the variable cannot be read.
std::size_t memory_limit();
// Returns a block from allocate() to the cache; throws fluxion::ValueError for a foreign pointer.
void deallocate(int device, void* ptr);

struct MemoryStats {
    std::size_t allocated = 0;  // bytes in blocks handed out and not yet freed
    std::size_t reserved = 0;   // bytes obtained from vkAllocateMemory: allocated plus cached
    std::size_t peak = 0;       // the most `allocated` has been
};
MemoryStats memory_stats(int device);
// Waits for the device's queue, then gives every cached (free) block back to the driver.
void empty_cache(int device);

// Returns scratch memory to the cache, or, while the device's stream captures, to the recording
// that uses it (freed with the recording).
void release_scratch(int device, void* ptr);

// Device memory for the duration of one call (column buffers). Returning it to the cache at the end
// of the scope is safe while kernels using it are still queued (see above).
class Scratch {
public:
    Scratch(int device, std::size_t bytes) : device_(device), ptr_(allocate(device, bytes)) {}
    ~Scratch() { release_scratch(device_, ptr_); }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    void* get() const { return ptr_; }

private:
    int device_;
    void* ptr_;
};

struct Resolved {
    VkBuffer buffer;
    VkDeviceSize offset;    // of the pointer in the buffer
    VkDeviceSize size;      // of the whole buffer
    std::uint64_t used_by;  // the stream's timeline value of the last submission that used it before
};
// The buffer holding `bytes` bytes from `ptr` (a live allocation), for a command about to be
// recorded: stamps it with the stream's open_value() (and, while capturing, adds it to the
// recording). fluxion::ValueError naming `op` when the pointer is foreign or the range leaves its
// allocation.
Resolved resolve(int device, const void* ptr, std::size_t bytes, const char* op);
// A submission of a recording that uses the block at `base` signals `value`.
void mark_used(int device, void* base, std::uint64_t value);

}  // namespace fluxion::vulkan
