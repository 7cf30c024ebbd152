// testhost_backend.cpp — a second backend for the tests, "TestHost": it runs the CPU kernels but
// keeps its data in its own host allocations (tagged, and checked on free) and reports two devices,
// so moves, mixed-device errors and plugin discovery are tested without a GPU. Its devices are
// virtual GPUs of vendor "TestHost"; FLUXION_TESTHOST_VENDOR=<vendor> gives device 1 that vendor
// instead (how the tests see an "AMD" device on any machine), FLUXION_TESTHOST_KIND=cpu makes both
// cpu-kind (as lavapipe's). Built again under other names (TESTHOST_NAME, TESTHOST_PRIORITY,
// TESTHOST_BROKEN) for test_device's checks of selection by priority and of the reasons given.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/backend.hpp"
#include "fluxion/error.hpp"

namespace {

using fluxion::backend::Backend;

#ifndef TESTHOST_NAME
#define TESTHOST_NAME "TestHost"
#define TESTHOST_PRIORITY 0
#define TESTHOST_BROKEN false
#endif

constexpr std::uint64_t kTag = 0x7e57'4057'0000'0000ull;  // tag | device index, stored before each block
constexpr std::size_t kHeader = 64;                      // keeps the user pointer 64-byte aligned

bool functional(char* why, std::size_t n) {
    if (TESTHOST_BROKEN && why && n > 0) std::snprintf(why, n, "%s is built broken, to test the reasons given", TESTHOST_NAME);
    return !TESTHOST_BROKEN;
}
int device_count() { return 2; }
void device_properties(int device, fluxion::backend::DeviceProperties* out) {
    *out = {};
    std::snprintf(out->name, sizeof out->name, "%s device %d", TESTHOST_NAME, device);
    const char* vendor = std::getenv("FLUXION_TESTHOST_VENDOR");
    std::snprintf(out->vendor, sizeof out->vendor, "%s", device == 1 && vendor && *vendor ? vendor : "TestHost");
    const char* kind = std::getenv("FLUXION_TESTHOST_KIND");
    const bool cpu = kind && std::strcmp(kind, "cpu") == 0;
    out->kind = cpu ? fluxion::DeviceKind::cpu : fluxion::DeviceKind::virtual_gpu;
    out->total_bytes = out->free_bytes = std::size_t{1} << 30;
}
// The CPU's answer, the reason naming this device: "TestHost:1: gemm has no kernel for i32 (...)".
bool supports(int device, fluxion::Op op, fluxion::DType t, char* why, std::size_t n) {
    char cpu_why[256] = {};
    if (fluxion::backend::cpu_backend().supports(0, op, t, cpu_why, sizeof cpu_why)) return true;
    const char* reason = std::strchr(cpu_why, ' ');  // after "CPU:0:"
    if (why && n > 0) std::snprintf(why, n, "%s:%d:%s", TESTHOST_NAME, device, reason ? reason : cpu_why);
    return false;
}
// Counted per device, so that test_device can see fx::synchronize reach the device it names.
std::atomic<long> g_synchronize_calls[2];
void synchronize(int device) { ++g_synchronize_calls[device]; }

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
    b.name = TESTHOST_NAME;
    b.priority = TESTHOST_PRIORITY;
    b.functional = functional;
    b.device_count = device_count;
    b.device_properties = device_properties;
    b.supports = supports;
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

// The synchronize calls device `device` (0 or 1) of this plugin has received.
extern "C" long testhost_synchronize_calls(int device) { return g_synchronize_calls[device].load(); }
