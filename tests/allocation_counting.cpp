// allocation_counting.cpp — counts every heap allocation of the test process (operator new and the
// malloc family, from any thread) while counting is on, by who asked: the kernel libraries and the
// GPU drivers (OpenBLAS, oneDNN, the Vulkan loader, lavapipe and LLVM, the validation layer, NVIDIA's
// CUDA and Vulkan drivers, cuBLAS and cuDNN), or anything else (fluxion, the C++ library, the test). AddressSanitizer owns malloc: not built there.
#include "allocation_counting.hpp"

#if !defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#include <execinfo.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

extern "C" void* __libc_malloc(std::size_t);

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

// The test program's own base address (this file is linked into it).
const void* program_base() {
    static const void* base = [] {
        Dl_info info;
        return dladdr(reinterpret_cast<void*>(&program_base), &info) ? info.dli_fbase : nullptr;
    }();
    return base;
}

// Who asked for an allocation made from `caller`. Where the caller is the test program, it may be the
// program's out-of-line copy of a C++ library template (std::string's _M_create, a vector's growth),
// which the dynamic linker binds every module's calls to: a program built at -O0 keeps such copies,
// and the validation layer's own strings then allocate "from the program". So the asker is the first
// module up the stack that is not the program; where there is none within reach (the test's own code,
// fluxion's headers in it, called from main by way of the C library), it is the program.
const char* asker_of(void* caller) {
    const char* module = module_of(caller);
    Dl_info info;
    if (!module || !dladdr(caller, &info) || info.dli_fbase != program_base()) return module;
    static const char* const c_library = module_of(reinterpret_cast<void*>(&__libc_malloc));
    void* frames[24];
    const int n = backtrace(frames, 24);
    for (int i = 0; i < n; ++i)
        if (dladdr(frames[i], &info) && info.dli_fbase != program_base())
            return info.dli_fname == c_library ? module : info.dli_fname;
    return module;
}

thread_local bool t_inside = false;  // backtrace() and dladdr() asking for memory themselves

void counted(void* caller, std::size_t bytes) {
    if (!g_counting.load(std::memory_order_relaxed) || t_inside) return;
    t_inside = true;
    const char* module = asker_of(caller);
    t_inside = false;
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
    // backtrace() loads its unwinder on first use, which allocates: before counting, not during it.
    void* frame[1];
    backtrace(frame, 1);
    program_base();
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
