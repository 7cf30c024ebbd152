// allocation_counting.cpp — counts every heap allocation of the test process (operator new and the
// malloc family, from any thread) while counting is on, by who asked: the kernel libraries and the
// Vulkan driver (OpenBLAS, oneDNN, the Vulkan loader, lavapipe and LLVM, the validation layer), or
// anything else (fluxion, the C++ library, the test). AddressSanitizer owns malloc: not built there.
#include "allocation_counting.hpp"

#if !defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_ours{0}, g_libraries{0};
std::atomic<std::size_t> g_largest{0};

bool in_kernel_library(void* caller) {
    Dl_info info;
    if (!dladdr(caller, &info) || !info.dli_fname) return false;
    for (const char* library : {"libopenblas", "libdnnl", "libvulkan", "libVkLayer", "libLLVM"})
        if (std::strstr(info.dli_fname, library)) return true;
    return false;
}

void counted(void* caller, std::size_t bytes) {
    if (!g_counting.load(std::memory_order_relaxed)) return;
    (in_kernel_library(caller) ? g_libraries : g_ours).fetch_add(1, std::memory_order_relaxed);
    for (std::size_t seen = g_largest.load(std::memory_order_relaxed);
         bytes > seen && !g_largest.compare_exchange_weak(seen, bytes, std::memory_order_relaxed);)
        ;
}
}  // namespace

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* malloc(std::size_t n) {
    counted(__builtin_return_address(0), n);
    return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
    counted(__builtin_return_address(0), n * size);
    return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
    counted(__builtin_return_address(0), n);
    return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
    counted(__builtin_return_address(0), n);
    return __libc_memalign(alignment, n);
}
int posix_memalign(void** p, std::size_t alignment, std::size_t n) {
    counted(__builtin_return_address(0), n);
    *p = __libc_memalign(alignment, n);
    return *p ? 0 : ENOMEM;
}
}

namespace {
void* allocate(std::size_t n, std::size_t alignment, void* caller) {
    counted(caller, n);
    void* p = alignment <= alignof(std::max_align_t) ? __libc_malloc(n) : __libc_memalign(alignment, n);
    if (!p) throw std::bad_alloc();
    return p;
}
}  // namespace

void* operator new(std::size_t n) { return allocate(n, 0, __builtin_return_address(0)); }
void* operator new[](std::size_t n) { return allocate(n, 0, __builtin_return_address(0)); }
void* operator new(std::size_t n, std::align_val_t a) {
    return allocate(n, static_cast<std::size_t>(a), __builtin_return_address(0));
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return allocate(n, static_cast<std::size_t>(a), __builtin_return_address(0));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace allocation_counting {

void start() {
    g_ours = 0;
    g_libraries = 0;
    g_largest = 0;
    g_counting = true;
}

Allocations stop() {
    g_counting = false;
    return {g_ours.load(), g_libraries.load(), g_largest.load()};
}

}  // namespace allocation_counting
#endif
