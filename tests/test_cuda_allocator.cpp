// test_cuda_allocator.cpp — the CUDA plugin's caching allocator (src/cuda/allocator.hpp): freed
// blocks are reused, the statistics add up, reuse is ordered after earlier work, and running out of
// memory throws fluxion::OutOfMemory and leaves the device usable. Also the staged host copies.
// And that loading the plugin maps cuBLAS only where a GPU is usable. The allocator's tests skip,
// saying why, where the plugin is not built or no GPU is usable.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "cuda/exports.hpp"
#include "fluxion/error.hpp"

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

struct CudaPlugin {
    const fluxion::backend::Backend* table = nullptr;
    decltype(&fluxion_cuda_memory_stats) memory_stats = nullptr;
    decltype(&fluxion_cuda_empty_cache) empty_cache = nullptr;
    std::string unusable;  // why the tests skip; empty when the plugin works
};

CudaPlugin load_plugin() {
    CudaPlugin p;
    void* library = dlopen(FLUXION_BINARY_DIR "/lib/libfluxion-cuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        p.unusable = std::string("the plugin does not load: ") + dlerror();
        return p;
    }
    auto entry = reinterpret_cast<fluxion::backend::EntryFn>(dlsym(library, fluxion::backend::kEntrySymbol));
    p.memory_stats = reinterpret_cast<decltype(p.memory_stats)>(dlsym(library, "fluxion_cuda_memory_stats"));
    p.empty_cache = reinterpret_cast<decltype(p.empty_cache)>(dlsym(library, "fluxion_cuda_empty_cache"));
    p.table = entry ? entry(fluxion::backend::kAbiVersion) : nullptr;
    if (!p.table || !p.memory_stats || !p.empty_cache) {
        p.unusable = "the plugin lacks its entry points";
        return p;
    }
    char why[512] = "";
    if (!p.table->functional(why, sizeof why)) p.unusable = why;
    return p;
}

const CudaPlugin& plugin() {
    static const CudaPlugin p = load_plugin();
    return p;
}

bool mapped(const std::string& library) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line))
        if (line.find(library) != std::string::npos) return true;
    return false;
}

// cuBLAS (and cuDNN) are loaded once a GPU is found, never by merely loading the plugin, which every
// fluxion process does: on a machine without a GPU they cost each process 0.15 s and 200 MiB.
TEST(CudaPlugin, MapsCublasOnlyWhereAGpuIsUsable) {
    if (!plugin().table) GTEST_SKIP() << plugin().unusable;
    EXPECT_FALSE(mapped("libcudnn")) << "cuDNN is loaded by the first convolution only";
    if (plugin().unusable.empty()) {
        EXPECT_TRUE(mapped("libcublas.so")) << "a usable GPU needs cuBLAS";
    } else if (plugin().unusable.find("cuBLAS") == std::string::npos) {  // not unusable for want of cuBLAS
        EXPECT_FALSE(mapped("libcublas")) << "the plugin is not usable (" << plugin().unusable << ") but mapped cuBLAS";
    }
}

struct Stats {
    std::size_t allocated = 0, reserved = 0, peak = 0;
};

class CudaAllocator : public ::testing::Test {
protected:
    void SetUp() override {
        if (!plugin().unusable.empty()) GTEST_SKIP() << "no usable CUDA device: " << plugin().unusable;
        cuda = plugin().table;
        plugin().empty_cache(0);
    }

    static Stats stats() {
        Stats s;
        EXPECT_TRUE(plugin().memory_stats(0, &s.allocated, &s.reserved, &s.peak));
        return s;
    }

    static std::size_t free_memory() {
        fluxion::backend::DeviceProperties p{};
        plugin().table->device_properties(0, &p);
        return p.free_bytes;
    }

    const fluxion::backend::Backend* cuda = nullptr;
};

TEST_F(CudaAllocator, FreedBlockIsHandedOutAgain) {
    void* first = cuda->alloc(0, 3 * kMiB);
    cuda->free(0, first);
    const Stats cached = stats();
    void* second = cuda->alloc(0, 3 * kMiB);
    EXPECT_EQ(second, first);
    EXPECT_EQ(stats().reserved, cached.reserved) << "the cached block should be reused, not a new one allocated";
    cuda->free(0, second);
}

TEST_F(CudaAllocator, SlightlySmallerRequestReusesTheRoundedBlock) {
    void* first = cuda->alloc(0, 4 * kMiB);
    cuda->free(0, first);
    void* second = cuda->alloc(0, 4 * kMiB - 100);
    EXPECT_EQ(second, first);
    cuda->free(0, second);
}

TEST_F(CudaAllocator, StatisticsCountBlocksInUseCachedAndPeak) {
    const Stats before = stats();
    void* block = cuda->alloc(0, 8 * kMiB);
    const Stats during = stats();
    EXPECT_GE(during.allocated, before.allocated + 8 * kMiB);
    EXPECT_GE(during.reserved, during.allocated);
    EXPECT_GE(during.peak, during.allocated);

    cuda->free(0, block);
    const Stats after = stats();
    EXPECT_EQ(after.allocated, before.allocated);
    EXPECT_EQ(after.reserved, during.reserved) << "a freed block stays cached";
    EXPECT_EQ(after.peak, during.peak);

    plugin().empty_cache(0);
    EXPECT_EQ(stats().reserved, stats().allocated) << "empty_cache returns every cached block";
}

TEST_F(CudaAllocator, StatisticsOfAMissingDeviceAreRefused) {
    std::size_t allocated = 7, reserved = 7, peak = 7;
    EXPECT_FALSE(plugin().memory_stats(1 << 20, &allocated, &reserved, &peak));
    EXPECT_EQ(allocated, 7u);
}

// The copy into the first block is still queued when the block is freed and handed out again; the
// fill of the new owner must not overtake it.
TEST_F(CudaAllocator, ReuseIsOrderedAfterEarlierWork) {
    const std::int64_t n = 16 * kMiB / sizeof(float);
    void* source = cuda->alloc(0, n * sizeof(float));
    void* target = cuda->alloc(0, n * sizeof(float));
    cuda->fill(0, fluxion::DType::f32, n, source, 1.0);
    cuda->copy_device(0, target, 0, source, n * sizeof(float));
    cuda->free(0, source);
    void* reused = cuda->alloc(0, n * sizeof(float));
    ASSERT_EQ(reused, source);
    cuda->fill(0, fluxion::DType::f32, n, reused, 2.0);
    std::vector<float> copied(n);
    cuda->copy_to_host(0, copied.data(), target, n * sizeof(float));
    EXPECT_EQ(copied.front(), 1.0f);
    EXPECT_EQ(copied.back(), 1.0f);
    cuda->free(0, reused);
    cuda->free(0, target);
}

TEST_F(CudaAllocator, CacheIsReleasedWhenTheDeviceIsFull) {
    const std::size_t free = free_memory();
    void* big = cuda->alloc(0, free / 10 * 6);
    cuda->free(0, big);  // cached: the next request fits only once it is given back
    void* other = nullptr;
    EXPECT_NO_THROW(other = cuda->alloc(0, free / 2));
    cuda->free(0, other);
}

TEST_F(CudaAllocator, OutOfMemoryThrowsAndTheDeviceStaysUsable) {
    fluxion::backend::DeviceProperties p{};
    cuda->device_properties(0, &p);
    const std::size_t total = p.total_bytes;
    try {
        cuda->alloc(0, 2 * total);
        FAIL() << "allocating twice the device's memory should throw fluxion::OutOfMemory";
    } catch (const fluxion::OutOfMemory& e) {
        EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("CUDA:0"), std::string::npos) << e.what();
    }

    const std::vector<std::int32_t> values = {1, -2, 3, -4, 5};
    void* block = cuda->alloc(0, values.size() * sizeof(std::int32_t));
    cuda->copy_from_host(0, block, values.data(), values.size() * sizeof(std::int32_t));
    std::vector<std::int32_t> back(values.size());
    cuda->copy_to_host(0, back.data(), block, back.size() * sizeof(std::int32_t));
    EXPECT_EQ(back, values);
    cuda->free(0, block);
}

TEST_F(CudaAllocator, FreeingAForeignPointerIsRefused) {
    int on_the_host = 0;
    EXPECT_THROW(cuda->free(0, &on_the_host), fluxion::ValueError);
}

// Host-to-device copies larger than the staging buffers go through them in pieces; the caller's
// memory may be overwritten as soon as the call returns.
TEST_F(CudaAllocator, LargeHostCopiesRoundTrip) {
    const std::size_t bytes = 20 * kMiB + 3;
    std::vector<std::uint8_t> data(bytes);
    for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::uint8_t>(i * 7 + i / 4096);
    const std::vector<std::uint8_t> original = data;
    void* block = cuda->alloc(0, bytes);
    cuda->copy_from_host(0, block, data.data(), bytes);
    std::fill(data.begin(), data.end(), std::uint8_t{0});
    std::vector<std::uint8_t> back(bytes);
    cuda->copy_to_host(0, back.data(), block, bytes);
    EXPECT_TRUE(back == original) << "the bytes read back differ from those written";
    cuda->free(0, block);
}

}  // namespace
