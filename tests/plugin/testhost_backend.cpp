// testhost_backend.cpp — a second backend for the tests, "TestHost": it runs the CPU kernels but
// keeps its data in its own host allocations (tagged, and checked on free) and reports two devices,
// so moves, mixed-device errors and plugin discovery are tested without a GPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/backend.hpp"
#include "fluxion/error.hpp"

namespace {

using fluxion::backend::Backend;

constexpr std::uint64_t kTag = 0x7e57'4057'0000'0000ull;  // tag | device index, stored before each block
constexpr std::size_t kHeader = 64;                      // keeps the user pointer 64-byte aligned

bool functional(char* why, std::size_t n) {
    if (const char* v = std::getenv("FLUXION_TESTHOST_BROKEN"); v && *v) {
        std::snprintf(why, n, "FLUXION_TESTHOST_BROKEN is set");
        return false;
    }
    return true;
}
int device_count() { return 2; }
void device_info(int device, char* name, std::size_t n, std::size_t* total, std::size_t* free) {
    std::snprintf(name, n, "TestHost device %d", device);
    *total = *free = std::size_t{1} << 30;
}
void synchronize(int) {}

void* alloc(int device, std::size_t bytes) {
    void* p = std::aligned_alloc(kHeader, kHeader + ((bytes + kHeader - 1) / kHeader) * kHeader);
    if (!p) throw fluxion::OutOfMemory("TestHost: cannot allocate " + std::to_string(bytes) + " bytes");
    *static_cast<std::uint64_t*>(p) = kTag | static_cast<std::uint64_t>(device);
    return static_cast<char*>(p) + kHeader;
}
void release(int device, void* ptr) {
    if (!ptr) return;
    void* base = static_cast<char*>(ptr) - kHeader;
    if (*static_cast<std::uint64_t*>(base) != (kTag | static_cast<std::uint64_t>(device))) std::abort();  // foreign memory
    std::free(base);
}
void copy_from_host(int, void* dst, const void* src, std::size_t n) { std::memcpy(dst, src, n); }
void copy_to_host(int, void* dst, const void* src, std::size_t n) { std::memcpy(dst, src, n); }
void copy_device(int, void* dst, int, const void* src, std::size_t n) { std::memcpy(dst, src, n); }

Backend make_table() {
    Backend b = fluxion::backend::cpu_backend();  // the CPU's kernels work on host memory
    b.name = "TestHost";
    b.functional = functional;
    b.device_count = device_count;
    b.device_info = device_info;
    b.synchronize = synchronize;
    b.alloc = alloc;
    b.free = release;
    b.copy_from_host = copy_from_host;
    b.copy_to_host = copy_to_host;
    b.copy_device = copy_device;
    return b;
}

}  // namespace

extern "C" const Backend* fluxion_backend_entry(int abi_version) {
    if (abi_version != fluxion::backend::kAbiVersion) return nullptr;
    static const Backend table = make_table();
    return &table;
}
