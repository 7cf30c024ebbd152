// allocator.cpp — host memory for tensors. Freed blocks of kCachedMin bytes or more are kept, by
// size class, and handed out again: a fresh large block costs a page fault and a zeroed page per
// 4 KiB on first touch, and a training step allocates the same sizes step after step (on the
// Fashion-MNIST CNNs that was a tenth of the step). Smaller blocks go straight to malloc, whose
// own free lists serve them without system calls. Blocks above kCachedMax go back to the system:
// those are data sets and their one-off transforms (Fashion-MNIST's training images are 188 MB as
// f32), which the cache kept resident for the rest of the run (the main job peaked at 1.09 GB), while
// a step's tensors that large are rare, their first touch is cheap beside the arithmetic on them,
// and compiled steps place them in an arena once.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu/kernels.hpp"
#include "fluxion/error.hpp"

namespace fluxion::backend::cpu {
namespace {

constexpr std::size_t kAlignment = 64;       // a cache line, and the widest vector register
constexpr std::size_t kHeader = kAlignment;  // before each block: its size class (keeps data aligned)
constexpr std::size_t kCachedMin = std::size_t(64) << 10;
constexpr std::size_t kCachedMax = std::size_t(64) << 20;
constexpr std::size_t kLargest = std::size_t(1) << 62;  // keeps the rounding below free of overflow

// Under AddressSanitizer every block goes back to malloc, so that a use after free is caught.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCaching = false;
#else
constexpr bool kCaching = true;
#endif

struct Cache {
    std::mutex mutex;
    std::unordered_map<std::size_t, std::vector<void*>> blocks;  // free blocks (headers) by size class
    std::size_t bytes = 0;                                       // in those blocks
    // At most an eighth of the machine's memory, and 1 GiB, is kept unused.
    const std::size_t limit =
        std::min(std::size_t(1) << 30, std::size_t(sysconf(_SC_PHYS_PAGES)) * std::size_t(sysconf(_SC_PAGESIZE)) / 8);
};

// What the tensors hold (tests measure with it what the tape keeps, test_tape_memory.cpp).
std::atomic<std::size_t> in_use{0}, peak{0};

void count_alloc(std::size_t size) {
    const std::size_t now = in_use.fetch_add(size, std::memory_order_relaxed) + size;
    std::size_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
}

// Lives as long as the process: tensors in static objects are freed after static destructors run.
Cache& cache() {
    static Cache* c = new Cache;
    return *c;
}

// Whole cache lines below kCachedMin; above, four classes per power of two, so at most a quarter
// of a block goes unused.
std::size_t size_class(std::size_t bytes) {
    if (bytes < kCachedMin) return (std::max<std::size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    const std::size_t step = std::bit_floor(bytes) / 4;
    return (bytes + step - 1) / step * step;
}

void release_cache(Cache& c) {
    for (auto& [size, blocks] : c.blocks)
        for (void* block : blocks) std::free(block);
    c.blocks.clear();
    c.bytes = 0;
}

OutOfMemory out_of_memory(std::size_t bytes) {
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.2f", double(bytes) / double(1 << 30));
    return OutOfMemory("CPU: cannot allocate " + std::to_string(bytes) + " bytes (" + gib +
                       " GiB) of host memory; free tensors that are no longer needed or use smaller batches");
}

}  // namespace

// Zero bytes still gives a unique pointer (a block of one cache line).
void* alloc(int device, std::size_t bytes) {
    if (bytes > kLargest) throw out_of_memory(bytes);
    const std::size_t size = size_class(bytes);
    Cache& c = cache();
    if (kCaching && size >= kCachedMin && size <= kCachedMax) {
        std::lock_guard lock(c.mutex);
        if (auto it = c.blocks.find(size); it != c.blocks.end() && !it->second.empty()) {
            void* block = it->second.back();
            it->second.pop_back();
            c.bytes -= size;
            count_alloc(size);
            return static_cast<char*>(block) + kHeader;
        }
    }
    void* block = std::aligned_alloc(kAlignment, kHeader + size);
    if (!block && kCaching) {  // what the cache holds may be what is missing
        std::lock_guard lock(c.mutex);
        release_cache(c);
        block = std::aligned_alloc(kAlignment, kHeader + size);
    }
    if (!block) throw out_of_memory(bytes);
    *static_cast<std::size_t*>(block) = size;
    count_alloc(size);
    return static_cast<char*>(block) + kHeader;
}

void free(int device, void* ptr) {
    if (!ptr) return;
    void* block = static_cast<char*>(ptr) - kHeader;
    const std::size_t size = *static_cast<std::size_t*>(block);
    in_use.fetch_sub(size, std::memory_order_relaxed);
    if (kCaching && size >= kCachedMin && size <= kCachedMax) {
        Cache& c = cache();
        std::lock_guard lock(c.mutex);
        if (c.bytes + size <= c.limit) {
            c.blocks[size].push_back(block);
            c.bytes += size;
            return;
        }
    }
    std::free(block);
}

std::size_t host_bytes_in_use() { return in_use.load(std::memory_order_relaxed); }
std::size_t host_peak_bytes() { return peak.load(std::memory_order_relaxed); }
void reset_host_peak() { peak.store(in_use.load(std::memory_order_relaxed), std::memory_order_relaxed); }

}  // namespace fluxion::backend::cpu
