// allocator.cpp — the caching allocator: blocks are rounded up to size classes (four per power of
// two, so at most a quarter of a block is unused) and cached per class when freed.
#include "cuda/allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda/capture.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

constexpr std::size_t kMinBlock = 512;
constexpr std::size_t kMaxRequest = std::size_t{1} << 60;  // keeps the rounding below free of overflow

struct Pool {
    std::mutex mutex;
    std::unordered_map<std::size_t, std::vector<void*>> cached;  // free blocks by size class
    std::unordered_map<void*, std::size_t> in_use;              // block -> its size class
    MemoryStats stats;
};

// Pools live as long as the process (see activate() in context.cpp for why).
Pool& pool(int device) {
    static Pool* pools = new Pool[probe().device_count];
    return pools[device];
}

// The device index was checked by select_device, or is checked here without touching CUDA.
Pool& checked_pool(int device) {
    if (device < 0 || device >= probe().device_count) select_device(device);  // throws the DeviceError
    return pool(device);
}

std::size_t size_class(std::size_t bytes) {
    if (bytes <= kMinBlock) return kMinBlock;
    const std::size_t step = std::bit_floor(bytes) / 4;
    return (bytes + step - 1) / step * step;
}

std::string mib(std::size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    return text;
}

// Frees every cached block of the current device; the caller holds the pool's lock.
void release_cached(Pool& p) {
    // Blocks may still be used by queued kernels: wait for them before returning the memory.
    FLUXION_CUDA_CHECK(cudaDeviceSynchronize());
    for (auto& [size, blocks] : p.cached) {
        for (void* block : blocks) {
            FLUXION_CUDA_CHECK(cudaFree(block));
            p.stats.reserved -= size;
        }
    }
    p.cached.clear();
}

[[noreturn]] void throw_out_of_memory(int device, std::size_t requested, const Pool& p) {
    std::size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    cudaGetLastError();
    throw OutOfMemory("CUDA:" + std::to_string(device) + ": out of memory allocating " + mib(requested) +
                      " (free " + mib(free) + " of " + mib(total) + ", cached " +
                      mib(p.stats.reserved - p.stats.allocated) + ", in use by tensors " +
                      mib(p.stats.allocated) + "); free tensors you no longer need or use a smaller batch size");
}

// A new block from the driver; on failure the cache is released and the request retried once.
// If the size class still does not fit, a block of the request rounded to kMinBlock is tried: the
// class may be up to a quarter larger, and a tensor that fits must not fail for the rounding.
// `size` becomes the size of the block obtained.
void* fresh_block(int device, Pool& p, std::size_t requested, std::size_t& size) {
    void* block = nullptr;
    cudaError_t status = cudaMalloc(&block, size);
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        release_cached(p);
        status = cudaMalloc(&block, size);
    }
    const std::size_t tight = (std::max(requested, std::size_t{1}) + kMinBlock - 1) / kMinBlock * kMinBlock;
    if (status == cudaErrorMemoryAllocation && tight < size) {
        cudaGetLastError();
        status = cudaMalloc(&block, tight);
        if (status == cudaSuccess) size = tight;
    }
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        throw_out_of_memory(device, requested, p);
    }
    FLUXION_CUDA_CHECK(status);
    p.stats.reserved += size;
    return block;
}

}  // namespace

void* allocate(int device, std::size_t bytes) {
    select_device(device);
    Pool& p = pool(device);
    std::lock_guard lock(p.mutex);
    if (bytes > kMaxRequest) throw_out_of_memory(device, bytes, p);
    std::size_t size = size_class(bytes);
    void* block = nullptr;
    if (auto it = p.cached.find(size); it != p.cached.end() && !it->second.empty()) {
        block = it->second.back();
        it->second.pop_back();
    } else {
        block = fresh_block(device, p, bytes, size);
    }
    p.in_use.emplace(block, size);
    p.stats.allocated += size;
    p.stats.peak = std::max(p.stats.peak, p.stats.allocated);
    return block;
}

void deallocate(int device, void* ptr) {
    if (!ptr) return;
    Pool& p = checked_pool(device);
    std::lock_guard lock(p.mutex);
    auto it = p.in_use.find(ptr);
    if (it == p.in_use.end())
        throw ValueError("CUDA:" + std::to_string(device) + ": free of a pointer this device's allocator "
                         "did not hand out (freed twice, or allocated on another device?)");
    // A block freed while this thread captures a graph (a kernel's scratch) is used by every launch
    // of the graph: the recording keeps it, and frees it with itself.
    if (Recording* r = capturing(device)) {
        r->kept.push_back(ptr);
        return;
    }
    p.cached[it->second].push_back(ptr);
    p.stats.allocated -= it->second;
    p.in_use.erase(it);
}

MemoryStats memory_stats(int device) {
    Pool& p = checked_pool(device);
    std::lock_guard lock(p.mutex);
    return p.stats;
}

void empty_cache(int device) {
    select_device(device);
    Pool& p = pool(device);
    std::lock_guard lock(p.mutex);
    release_cached(p);
}

Scratch::Scratch(int device, std::size_t bytes) : device_(device), ptr_(bytes ? allocate(device, bytes) : nullptr) {}

Scratch::~Scratch() { deallocate(device_, ptr_); }

}  // namespace fluxion::cuda
