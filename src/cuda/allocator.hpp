// allocator.hpp — the caching device allocator, one pool per device. Freed blocks are kept and
// handed out again instead of going back to cudaFree. This is stream-ordered without extra
// bookkeeping because every kernel and copy touching a device's memory runs on that device's one
// compute stream: whatever reuses a block is queued after the work that last used it.
#pragma once
#include <cstddef>

namespace fluxion::cuda {

// Throws fluxion::OutOfMemory when the device is full even after the cache is released.
void* allocate(int device, std::size_t bytes);
// Returns a block from allocate() to the cache; throws fluxion::ValueError for a foreign pointer.
void deallocate(int device, void* ptr);

struct MemoryStats {
    std::size_t allocated = 0;  // bytes in blocks handed out and not yet freed
    std::size_t reserved = 0;   // bytes obtained from cudaMalloc: allocated plus cached
    std::size_t peak = 0;       // the most `allocated` has been
};
MemoryStats memory_stats(int device);
// Gives every cached (free) block back to the driver.
void empty_cache(int device);

// Device memory for the duration of one call (workspaces, column buffers). Returning it to the
// cache at the end of the scope is safe while kernels using it are still queued (see above); while
// the thread captures a CUDA graph, the recording keeps it instead (capture.hpp).
class Scratch {
public:
    Scratch(int device, std::size_t bytes);
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    void* get() const { return ptr_; }
    template <class T> T* as() const { return static_cast<T*>(ptr_); }

private:
    int device_;
    void* ptr_;
};

}  // namespace fluxion::cuda
