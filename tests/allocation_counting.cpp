// allocation_counting.cpp — counts every heap allocation of the test process (operator new and the
// malloc family, from any thread) while counting is on, by who asked: the kernel libraries and the
// GPU drivers (OpenBLAS, oneDNN, the Vulkan loader, lavapipe and LLVM, the validation layer, NVIDIA's
// CUDA and Vulkan drivers, cuBLAS and cuDNN), or anything else (fluxion, the C++ library, the test). AddressSanitizer owns malloc: not built there.
#include "allocation_counting.hpp"

#if !defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_ours{0}, g_libraries{0};
std::atomic<std::size_t> g_largest{0};

// The modules "ours" came from, the first few distinct ones (names owned by the dynamic loader).
std::atomic<const char*> g_ours_from[6];

// The module of `caller`, or nullptr where dladdr cannot tell.
const char* module_of(void* caller) {
    Dl_info info;
    return dladdr(caller, &info) ? info.dli_fname : nullptr;
}

// NVIDIA's drivers (CUDA's libcuda, the Vulkan driver libGLX_nvidia with its libnvidia-* parts) and
// CUDA's libraries count as libraries, as lavapipe and LLVM do.
bool in_kernel_library(const char* module) {
    if (!module) return false;
    for (const char* library : {"libopenblas", "libdnnl", "libvulkan", "libVkLayer", "libLLVM", "libcuda.",
                                "libcublas", "libcudnn", "libnvidia-", "libGLX_nvidia", "libnvrtc"})
        if (std::strstr(module, library)) return true;
    return false;
}

void remember(const char* module) {
    if (!module) module = "(unknown module)";
    for (auto& slot : g_ours_from) {
        const char* seen = slot.load(std::memory_order_relaxed);
        if (seen == module) return;
        if (!seen && slot.compare_exchange_strong(seen, module, std::memory_order_relaxed)) return;
        if (seen == module) return;
    }
}

void counted(void* caller, std::size_t bytes) {
    if (!g_counting.load(std::memory_order_relaxed)) return;
    const char* module = module_of(caller);
    if (in_kernel_library(module)) {
        g_libraries.fetch_add(1, std::memory_order_relaxed);
    } else {
        g_ours.fetch_add(1, std::memory_order_relaxed);
        remember(module);
    }
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
    for (auto& slot : g_ours_from) slot = nullptr;
    g_ours = 0;
    g_libraries = 0;
    g_largest = 0;
    g_counting = true;
}

Allocations stop() {
    g_counting = false;
    std::string from;
    for (const auto& slot : g_ours_from)
        if (const char* module = slot.load()) from += (from.empty() ? "" : ", ") + std::string(module);
    return {g_ours.load(), g_libraries.load(), g_largest.load(), from};
}

}  // namespace allocation_counting
#endif
