// test_vulkan.cpp — the Vulkan plugin (src/vulkan/) on its own: probing, device properties, the
// caching allocator and its fake addresses, copies, fill / copy_strided / cast at odd element
// offsets and sizes that are no multiple of the workgroup, out of memory, the validation hook, and
// the loader without a driver; f16 and bf16 against the CPU's rounding and at odd element offsets.
// In ctest it runs on lavapipe with the validation layer on (tests/CMakeLists.txt); every test
// skips, saying why, where the plugin is not built or lavapipe is not installed, and fails where
// both are there and the plugin is not usable (fx_test::vulkan_expected).
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.hpp"
#include "cpu/half.hpp"
#include "fluxion/error.hpp"
#include "fluxion/fluxion.hpp"
#include "vulkan/exports.hpp"
#include "vulkan_environment.hpp"

namespace fx = fluxion;
using fx::backend::Strided;

namespace {

struct VulkanPlugin {
    const fx::backend::Backend* table = nullptr;
    decltype(&fluxion_vulkan_memory_stats) memory_stats = nullptr;
    decltype(&fluxion_vulkan_empty_cache) empty_cache = nullptr;
    decltype(&fluxion_vulkan_validation_messages) validation_messages = nullptr;
    decltype(&fluxion_vulkan_debug_invalid_call) invalid_call = nullptr;
    decltype(&fluxion_vulkan_transfer_uploads) transfer_uploads = nullptr;
    std::string why;        // why the plugin is unusable
    bool loaded = false;    // the table was found (functional or not)
};

VulkanPlugin load_plugin() {
    VulkanPlugin p;
    void* library = dlopen(FLUXION_BINARY_DIR "/lib/libfluxion-vulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        p.why = std::string("the plugin does not load: ") + dlerror();
        return p;
    }
    auto entry = reinterpret_cast<fx::backend::EntryFn>(dlsym(library, fx::backend::kEntrySymbol));
    p.memory_stats = reinterpret_cast<decltype(p.memory_stats)>(dlsym(library, "fluxion_vulkan_memory_stats"));
    p.empty_cache = reinterpret_cast<decltype(p.empty_cache)>(dlsym(library, "fluxion_vulkan_empty_cache"));
    p.validation_messages =
        reinterpret_cast<decltype(p.validation_messages)>(dlsym(library, "fluxion_vulkan_validation_messages"));
    p.invalid_call = reinterpret_cast<decltype(p.invalid_call)>(dlsym(library, "fluxion_vulkan_debug_invalid_call"));
    p.transfer_uploads =
        reinterpret_cast<decltype(p.transfer_uploads)>(dlsym(library, "fluxion_vulkan_transfer_uploads"));
    p.table = entry ? entry(fx::backend::kAbiVersion) : nullptr;
    if (!p.table || !p.memory_stats || !p.empty_cache || !p.validation_messages || !p.invalid_call ||
        !p.transfer_uploads) {
        p.why = "the plugin lacks its entry points";
        return p;
    }
    p.loaded = true;
    char why[512] = "";
    if (!p.table->functional(why, sizeof why)) p.why = why;
    return p;
}

const VulkanPlugin& plugin() {
    static const VulkanPlugin p = load_plugin();
    return p;
}

bool driver_files_missing() {
    const char* files = std::getenv("VK_DRIVER_FILES");
    return files && *files && !std::ifstream(files).good();
}

class Vulkan : public ::testing::Test {
protected:
    void SetUp() override {
        if (driver_files_missing()) GTEST_SKIP() << "VK_DRIVER_FILES names no file (the no-driver test's run)";
        if (!plugin().why.empty()) {
            if (fx_test::vulkan_expected())
                FAIL() << "lavapipe is installed, yet no usable Vulkan device: " << plugin().why;
            GTEST_SKIP() << "no usable Vulkan device: " << plugin().why;
        }
        messages_before_ = plugin().validation_messages();
    }
    // Every test ends with no validation message (FLUXION_VULKAN_VALIDATION=1 in ctest).
    void TearDown() override {
        if (IsSkipped()) return;
        t().synchronize(0);
        EXPECT_EQ(plugin().validation_messages(), messages_before_) << "the validation layer reported messages (above)";
    }
    const fx::backend::Backend& t() const { return *plugin().table; }

    template <class T> std::vector<T> download(const void* p, std::size_t n) {
        std::vector<T> out(n);
        t().copy_to_host(0, out.data(), p, n * sizeof(T));
        return out;
    }

    std::uint64_t messages_before_ = 0;
};

TEST_F(Vulkan, DeviceProperties) {
    ASSERT_GE(t().device_count(), 1);
    EXPECT_EQ(t().priority, 50);
    fx::backend::DeviceProperties p{};
    t().device_properties(0, &p);
    EXPECT_GT(std::strlen(p.name), 0u);
    EXPECT_GT(p.total_bytes, 0u);
    EXPECT_LE(p.free_bytes, p.total_bytes);
    if (std::string(p.name).find("llvmpipe") != std::string::npos) {  // lavapipe, as in ctest
        EXPECT_EQ(p.kind, fx::DeviceKind::cpu);
        EXPECT_STREQ(p.vendor, "Mesa");
    }
    EXPECT_THROW(t().device_properties(t().device_count(), &p), fx::DeviceError);
}

// `supports` answers as the kernels do, naming the device in its reasons.
TEST_F(Vulkan, SupportsAnswersAsTheKernelsDo) {
    char why[256] = "";
    EXPECT_TRUE(t().supports(0, fx::Op::gemm, fx::DType::f32, why, sizeof why));
    EXPECT_TRUE(t().supports(0, fx::Op::cast, fx::DType::boolean, why, sizeof why));
    EXPECT_TRUE(t().supports(0, fx::Op::gemm, fx::DType::bf16, why, sizeof why)) << why;  // in any storage
    EXPECT_FALSE(t().supports(0, fx::Op::gemm, fx::DType::i32, why, sizeof why));
    EXPECT_NE(std::string(why).find("Vulkan:0"), std::string::npos) << why;
    void* p = t().alloc(0, 64);
    ASSERT_FALSE(t().supports(0, fx::Op::gemm, fx::DType::i32, why, sizeof why));
    try {
        t().gemm(0, fx::DType::i32, false, false, 2, 2, 2, 1, p, 2, 0, p, 2, 0, 0, p, 2, 0, 1);
        ADD_FAILURE() << "gemm on i32 ran";
    } catch (const fx::DTypeError& e) {
        EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what() << " does not give the reason " << why;
    }
    t().free(0, p);
}

TEST_F(Vulkan, RoundTripAndCachedReuse) {
    std::vector<float> host(1000);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = float(i) * 0.5f - 7;
    void* a = t().alloc(0, host.size() * sizeof(float));
    t().copy_from_host(0, a, host.data(), host.size() * sizeof(float));
    void* b = t().alloc(0, host.size() * sizeof(float));
    t().copy_device(0, b, 0, a, host.size() * sizeof(float));
    EXPECT_EQ(download<float>(b, host.size()), host);
    // A view at an odd element offset reads from the right place.
    EXPECT_EQ(download<float>(static_cast<float*>(b) + 3, 5), std::vector<float>(host.begin() + 3, host.begin() + 8));
    std::size_t allocated = 0, reserved = 0, peak = 0;
    ASSERT_TRUE(plugin().memory_stats(0, &allocated, &reserved, &peak));
    t().free(0, b);
    std::size_t allocated2 = 0, reserved2 = 0;
    plugin().memory_stats(0, &allocated2, &reserved2, nullptr);
    EXPECT_LT(allocated2, allocated);
    EXPECT_EQ(reserved2, reserved);  // kept in the cache
    void* c = t().alloc(0, host.size() * sizeof(float));
    EXPECT_EQ(c, b);  // the cached block comes back
    EXPECT_THROW(t().free(0, static_cast<char*>(c) + 4), fx::ValueError);
    t().free(0, c);
    t().free(0, a);
    plugin().empty_cache(0);
    plugin().memory_stats(0, &allocated2, &reserved2, nullptr);
    EXPECT_EQ(reserved2, allocated2);
}

// A capture belongs to the thread that began it: what another thread does meanwhile (a data
// loader uploading the next batch while fx::compile records a step) runs once, as usual, and is
// not replayed by the recording, which would write into memory that is no longer that batch's.
TEST_F(Vulkan, ACaptureRecordsOnlyItsOwnThreadsWork) {
    constexpr std::size_t n = 300;
    void* mine = t().alloc(0, n * sizeof(float));
    void* theirs = t().alloc(0, n * sizeof(float));
    ASSERT_NE(t().capture_begin, nullptr);
    t().capture_begin(0);
    std::thread other([&] {
        const std::vector<float> ones(n, 1.0f);  // gone when the thread ends
        t().copy_from_host(0, theirs, ones.data(), n * sizeof(float));
    });
    other.join();
    t().fill(0, fx::DType::f32, n, mine, 2.0);
    void* recording = t().capture_end(0);
    ASSERT_NE(recording, nullptr);
    EXPECT_EQ(download<float>(theirs, n), std::vector<float>(n, 1.0f));  // ran, without the recording
    const std::vector<float> sevens(n, 7.0f);
    t().copy_from_host(0, theirs, sevens.data(), n * sizeof(float));
    t().capture_run(0, recording);
    EXPECT_EQ(download<float>(mine, n), std::vector<float>(n, 2.0f));
    EXPECT_EQ(download<float>(theirs, n), sevens);  // the other thread's upload was not replayed
    t().capture_free(0, recording);
    t().free(0, mine);
    t().free(0, theirs);
}

// Uploads go to the transfer queue where the device has one (ctest's vulkan.transfer_queue run
// lends lavapipe's one queue for it); each waits for the queued commands that use its destination,
// and the commands recorded after it wait for the upload, whichever thread records them.
TEST_F(Vulkan, UploadsAreOrderedWithTheCommandsAroundThem) {
    constexpr std::size_t n = 1000, bytes = n * sizeof(float);
    const std::uint64_t uploads_before = plugin().transfer_uploads(0);
    std::vector<float> a(n), b(n), c(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = float(i), b[i] = -float(i), c[i] = 0.25f * float(i);
    void* x = t().alloc(0, bytes);
    void* y = t().alloc(0, bytes);
    t().copy_from_host(0, x, a.data(), bytes);
    // A queued copy reads x, then an upload overwrites it: the copy sees the old values.
    t().copy_device(0, y, 0, x, bytes);
    t().copy_from_host(0, x, b.data(), bytes);
    EXPECT_EQ(download<float>(y, n), a);
    EXPECT_EQ(download<float>(x, n), b);
    // A queued fill writes x, then an upload: the upload wins; then the reverse.
    t().fill(0, fx::DType::f32, std::int64_t(n), x, 5.0);
    t().copy_from_host(0, x, c.data(), bytes);
    EXPECT_EQ(download<float>(x, n), c);
    t().copy_from_host(0, x, a.data(), bytes);
    t().fill(0, fx::DType::f32, std::int64_t(n), x, 6.0);
    EXPECT_EQ(download<float>(x, n), std::vector<float>(n, 6.0f));
    // A block freed while a queued copy still reads it, handed out again and uploaded into.
    t().copy_from_host(0, x, b.data(), bytes);
    t().copy_device(0, y, 0, x, bytes);
    t().free(0, x);
    void* z = t().alloc(0, bytes);
    EXPECT_EQ(z, x);  // the cached block
    t().copy_from_host(0, z, c.data(), bytes);
    EXPECT_EQ(download<float>(y, n), b);
    EXPECT_EQ(download<float>(z, n), c);
    const std::uint64_t uploads = plugin().transfer_uploads(0) - uploads_before;
    const char* lent = std::getenv("FLUXION_VULKAN_DEBUG_TRANSFER_ON_COMPUTE");
    if (lent && std::string(lent) == "1") {
        EXPECT_EQ(uploads, 6u);
    }
    t().free(0, y);
    t().free(0, z);
}

// A thread waiting for the device lets go of the plugin, so that another thread (a data loader
// with the next batch) uploads while a long product runs, instead of after it.
TEST_F(Vulkan, AnotherThreadUploadsWhileTheDeviceRuns) {
    constexpr std::int64_t m = 384;  // about 0.1 GFLOP: a good fraction of a second on lavapipe
    const std::size_t bytes = std::size_t(m * m) * sizeof(float);
    void* a = t().alloc(0, bytes);
    void* c = t().alloc(0, bytes);
    void* next = t().alloc(0, 64 * sizeof(float));
    t().fill(0, fx::DType::f32, m * m, a, 1.0);
    t().synchronize(0);
    for (int i = 0; i < 4; ++i)
        t().gemm(0, fx::DType::f32, false, false, m, m, m, 1.0, a, m, 0, a, m, 0, 0.0, c, m, 0, 1);
    std::atomic<bool> waiting{false}, uploaded{false};
    const std::vector<float> batch(64, 3.0f);
    std::thread loader([&] {
        while (!waiting.load()) std::this_thread::yield();
        t().copy_from_host(0, next, batch.data(), batch.size() * sizeof(float));
        uploaded = true;
    });
    waiting = true;
    t().synchronize(0);  // the products run
    const bool uploaded_meanwhile = uploaded.load();
    loader.join();
    EXPECT_TRUE(uploaded_meanwhile) << "the upload waited for the products to finish";
    EXPECT_EQ(download<float>(c, 1), std::vector<float>(1, float(m)));
    EXPECT_EQ(download<float>(next, 64), batch);
    t().free(0, a);
    t().free(0, c);
    t().free(0, next);
}

// Fills at every offset 0..6 of sizes around the workgroup size: the bound range starts at the
// aligned-down offset and the shader adds the rest; bytes of u8/bool share words with neighbours.
TEST_F(Vulkan, FillAtOddOffsets) {
    for (std::int64_t n : {1, 3, 255, 257, 1031}) {
        for (int off = 0; off < 7; ++off) {
            void* f = t().alloc(0, std::size_t(n + 8) * 8);
            t().fill(0, fx::DType::f64, n + 8, f, -1.0);
            t().fill(0, fx::DType::f64, n, static_cast<double*>(f) + off, 2.5);
            auto got = download<double>(f, std::size_t(n + 8));
            for (std::int64_t i = 0; i < n + 8; ++i)
                ASSERT_EQ(got[i], (i >= off && i < off + n) ? 2.5 : -1.0) << "n " << n << " offset " << off << " i " << i;
            t().fill(0, fx::DType::u8, n + 8, f, 7);
            t().fill(0, fx::DType::boolean, n, static_cast<std::uint8_t*>(f) + off, 1);
            auto bytes = download<std::uint8_t>(f, std::size_t(n + 8));
            for (std::int64_t i = 0; i < n + 8; ++i)
                ASSERT_EQ(bytes[i], (i >= off && i < off + n) ? 1 : 7) << "n " << n << " offset " << off << " i " << i;
            t().fill(0, fx::DType::i64, 2, f, -3e12);
            EXPECT_EQ(download<std::int64_t>(f, 2), (std::vector<std::int64_t>{-3000000000000, -3000000000000}));
            t().free(0, f);
        }
    }
}

TEST_F(Vulkan, CopyStridedTransposesAndBroadcasts) {
    const std::int64_t rows = 5, cols = 7;
    std::vector<std::int32_t> host(rows * cols + 1);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = std::int32_t(i * 3 + 1);
    void* src = t().alloc(0, host.size() * 4);
    void* dst = t().alloc(0, host.size() * 4);
    t().copy_from_host(0, src, host.data(), host.size() * 4);
    // The transpose of the {rows, cols} matrix that starts at element 1.
    const Strided view{2, {cols, rows}, {1, cols}};
    const std::int64_t dst_strides[] = {rows, 1};
    t().copy_strided(0, fx::DType::i32, &view, static_cast<std::int32_t*>(src) + 1, dst_strides, dst);
    auto got = download<std::int32_t>(dst, std::size_t(rows * cols));
    for (std::int64_t c = 0; c < cols; ++c)
        for (std::int64_t r = 0; r < rows; ++r) ASSERT_EQ(got[c * rows + r], host[1 + r * cols + c]);
    // A stride-0 broadcast of one row, written at an odd offset.
    const Strided bcast{2, {3, cols}, {0, 1}};
    const std::int64_t dense[] = {cols, 1};
    t().copy_strided(0, fx::DType::i32, &bcast, src, dense, static_cast<std::int32_t*>(dst) + 1);
    got = download<std::int32_t>(static_cast<std::int32_t*>(dst) + 1, std::size_t(3 * cols));
    for (std::int64_t i = 0; i < 3 * cols; ++i) ASSERT_EQ(got[i], host[i % cols]);
    t().free(0, src);
    t().free(0, dst);
}

TEST_F(Vulkan, CastsBetweenAllTypes) {
    const std::vector<double> values{0, 1, -2, 3.75, 100, -0.5, 7, 0, 255};
    const std::vector<fx::DType> types{fx::DType::f32, fx::DType::f64, fx::DType::i32, fx::DType::i64, fx::DType::u8,
                                       fx::DType::boolean};
    const std::size_t n = values.size();
    void* src = t().alloc(0, n * 8 + 8);
    void* mid = t().alloc(0, n * 8 + 8);
    void* back = t().alloc(0, n * 8);
    t().copy_from_host(0, src, values.data(), n * 8);
    for (auto to : types) {
        // f64 -> `to` (written at element offset 1) -> f64 equals the host's conversion.
        const std::size_t size = fx::itemsize(to);
        void* at = static_cast<char*>(mid) + size;
        t().cast(0, fx::DType::f64, to, std::int64_t(n), src, at);
        t().cast(0, to, fx::DType::f64, std::int64_t(n), at, back);
        auto got = download<double>(back, n);
        for (std::size_t i = 0; i < n; ++i) {
            double want = values[i];
            if (to == fx::DType::boolean) want = values[i] != 0;
            else if (to == fx::DType::f32) want = double(float(values[i]));
            else if (to != fx::DType::f64) want = double(std::int64_t(values[i]));
            if (to == fx::DType::u8 && values[i] < 0) continue;  // C++ leaves negative -> u8 undefined
            EXPECT_EQ(got[i], want) << "f64 -> " << fx::name(to) << " -> f64, element " << i;
        }
    }
    t().free(0, src);
    t().free(0, mid);
    t().free(0, back);
}

TEST_F(Vulkan, OutOfMemoryThrowsAndLeavesTheDeviceUsable) {
    fx::backend::DeviceProperties props{};
    t().device_properties(0, &props);
    EXPECT_THROW(t().alloc(0, props.total_bytes * 4), fx::OutOfMemory);
    void* p = t().alloc(0, 64);
    t().fill(0, fx::DType::f32, 16, p, 1.5);
    EXPECT_EQ(download<float>(p, 16), std::vector<float>(16, 1.5f));
    t().free(0, p);
}

// The hook itself: a deliberately invalid call is reported, counted, and turns the next
// synchronisation into an error; the device is usable afterwards.
TEST_F(Vulkan, ValidationMessagesFailTheNextSynchronisation) {
    if (!std::getenv("FLUXION_VULKAN_VALIDATION")) GTEST_SKIP() << "FLUXION_VULKAN_VALIDATION is not set";
    plugin().invalid_call(0);
    EXPECT_GT(plugin().validation_messages(), messages_before_);
    EXPECT_THROW(t().synchronize(0), fx::DeviceError);
    messages_before_ = plugin().validation_messages();  // this test's message was expected
}

// The tiled GEMM against a host reference: sizes that are no multiple of any tile, every
// transpose, alpha and beta, batches with strides, operands at odd element offsets.
template <class T> void expect_gemm(const fx::backend::Backend& t, fx::DType dtype, bool ta, bool tb) {
    const std::int64_t m = 37, n = 45, k = 29, batch = 3, pad = 3;
    const std::int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 5;
    const std::int64_t sa = lda * (ta ? k : m) + 7, sb = ldb * (tb ? n : k) + 1, sc = ldc * m + 2;
    std::vector<T> a(std::size_t(pad + batch * sa)), b(std::size_t(pad + batch * sb)), c(std::size_t(pad + batch * sc));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = T(std::sin(double(i) * 0.37));
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = T(std::cos(double(i) * 0.11));
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = T(double(i % 7) - 3);
    const double alpha = 0.75, beta = -0.5;
    std::vector<T> want = c;
    for (std::int64_t p = 0; p < batch; ++p)
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
                double acc = 0;
                for (std::int64_t l = 0; l < k; ++l)
                    acc += double(a[std::size_t(pad + p * sa + (ta ? l * lda + i : i * lda + l))]) *
                           double(b[std::size_t(pad + p * sb + (tb ? j * ldb + l : l * ldb + j))]);
                T& out = want[std::size_t(pad + p * sc + i * ldc + j)];
                out = T(alpha * acc + beta * double(out));
            }
    void* da = t.alloc(0, a.size() * sizeof(T));
    void* db = t.alloc(0, b.size() * sizeof(T));
    void* dc = t.alloc(0, c.size() * sizeof(T));
    t.copy_from_host(0, da, a.data(), a.size() * sizeof(T));
    t.copy_from_host(0, db, b.data(), b.size() * sizeof(T));
    t.copy_from_host(0, dc, c.data(), c.size() * sizeof(T));
    t.gemm(0, dtype, ta, tb, m, n, k, alpha, static_cast<T*>(da) + pad, lda, sa, static_cast<T*>(db) + pad, ldb, sb, beta,
           static_cast<T*>(dc) + pad, ldc, sc, batch);
    std::vector<T> got(c.size());
    t.copy_to_host(0, got.data(), dc, got.size() * sizeof(T));
    const double tol = dtype == fx::DType::f64 ? 1e-12 : 1e-4;
    for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(double(got[i]), double(want[i]), tol * (1 + std::abs(double(want[i]))))
            << fx::name(dtype) << (ta ? " A^T" : " A") << (tb ? " B^T" : " B") << " element " << i;
    t.free(0, da);
    t.free(0, db);
    t.free(0, dc);
}

TEST_F(Vulkan, GemmMatchesTheHostForEveryTranspose) {
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            expect_gemm<double>(t(), fx::DType::f64, ta, tb);
            expect_gemm<float>(t(), fx::DType::f32, ta, tb);
        }
}

// Elementwise kernels at odd offsets, on sizes that are no multiple of the workgroup size.
TEST_F(Vulkan, UnaryAndReduceAtOddOffsets) {
    const std::int64_t n = 1031;
    std::vector<double> x(std::size_t(n) + 1);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(double(i)) * 3;
    void* dx = t().alloc(0, x.size() * 8);
    void* dy = t().alloc(0, x.size() * 8);
    t().copy_from_host(0, dx, x.data(), x.size() * 8);
    t().unary(0, fx::backend::Unary::tanh, fx::DType::f64, n, static_cast<double*>(dx) + 1, static_cast<double*>(dy) + 1,
              0, 0);
    const auto y = download<double>(static_cast<double*>(dy) + 1, std::size_t(n));
    for (std::int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], std::tanh(x[i + 1]), 1e-15) << i;
    // Sums of the columns of a {n, 1} view and of the whole: outputs and inputs at odd offsets.
    t().reduce(0, fx::backend::Reduce::sum, fx::DType::f64, 1, n, 1, static_cast<double*>(dx) + 1,
               static_cast<double*>(dy) + 3);
    t().reduce(0, fx::backend::Reduce::argmax, fx::DType::f64, 1, n, 1, static_cast<double*>(dx) + 1, dx);
    double sum = 0;
    std::int64_t best = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        sum += x[i + 1];
        if (x[i + 1] > x[best + 1]) best = i;
    }
    EXPECT_NEAR(download<double>(static_cast<double*>(dy) + 3, 1)[0], sum, 1e-12);
    EXPECT_EQ(download<std::int64_t>(dx, 1)[0], best);
    t().free(0, dx);
    t().free(0, dy);
}

TEST_F(Vulkan, BadArgumentsRaiseClearErrors) {
    void* p = t().alloc(0, 64);
    std::int64_t idx[2] = {1, 5};
    void* di = t().alloc(0, sizeof idx);
    t().copy_from_host(0, di, idx, sizeof idx);
    // An index past the source's 4 rows raises, as on the CPU.
    EXPECT_THROW(t().index_select(0, fx::DType::f32, 1, 4, 1, p, static_cast<const std::int64_t*>(di), 2,
                                  static_cast<float*>(p) + 8),
                 fx::ValueError);
    // Bytes are gathered whole, into words shared with their neighbours.
    const std::uint8_t bytes[4] = {10, 11, 12, 13};
    t().copy_from_host(0, p, bytes, 4);
    t().fill(0, fx::DType::u8, 5, static_cast<std::uint8_t*>(p) + 32, 99);
    t().index_select(0, fx::DType::u8, 1, 4, 1, p, static_cast<const std::int64_t*>(di), 1,
                     static_cast<std::uint8_t*>(p) + 33);
    EXPECT_EQ(download<std::uint8_t>(static_cast<std::uint8_t*>(p) + 32, 3), (std::vector<std::uint8_t>{99, 11, 99}));
    EXPECT_THROW(t().unary(0, fx::backend::Unary::exp, fx::DType::i32, 4, p, p, 0, 0), fx::DTypeError);
    // A range that leaves its allocation is refused rather than read.
    EXPECT_THROW(t().fill(0, fx::DType::f32, 1000, p, 0), fx::ValueError);
    t().free(0, di);
    t().free(0, p);
}

// Through the library: a tensor on Vulkan:0 and back, and the backend listed.
TEST_F(Vulkan, TensorsMoveToTheDeviceAndBack) {
    const fx::Device dev{"Vulkan", 0};
    ASSERT_TRUE(fx::functional("Vulkan"));
    const fx::Tensor x = fx::arange(0, 10, 1);
    const fx::Tensor y = x | dev;
    EXPECT_EQ(y.device(), dev);
    EXPECT_EQ((y | fx::cpu).to_vector<double>(), x.to_vector<double>());
    EXPECT_EQ((fx::zeros({3, 4}, {.device = dev}) | fx::cpu).to_vector<double>(), std::vector<double>(12, 0.0));
}

// lavapipe stops a shader invocation's loops after 65,535 iterations in all, silently: the sum of
// 2^24 ones came out as 524,280 before. Such sizes are a clear error on it, the same sum in rows
// that fit is right, and the device goes on working.
TEST_F(Vulkan, ReductionsPastLavapipesLoopLimitAreAClearErrorNotAWrongSum) {
    const fx::Device dev{"Vulkan", 0};
    if (fx::devices("Vulkan")[0].kind != fx::DeviceKind::cpu) GTEST_SKIP() << "not lavapipe: no loop limit";
    const fx::Tensor ones = fx::ones({std::int64_t{1} << 24}, {.device = dev});
    try {
        const double total = (fx::sum(ones) | fx::cpu).item<double>();
        EXPECT_EQ(total, 16777216.0) << "a sum past the loop limit must be right or an error";
    } catch (const fx::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("65535"), std::string::npos) << e.what();
    }
    EXPECT_EQ((fx::sum(fx::sum(ones.reshape({256, 65536}), 1)) | fx::cpu).item<double>(), 16777216.0);
    EXPECT_THROW(fx::softmax(ones, 0), fx::ValueError);
}

// Run by ctest with FLUXION_VULKAN_MEMORY_LIMIT=48M (vulkan.memory_limit): a model larger than the
// budget does not move, the error states the sizes and the budget, the model on the CPU is intact,
// and the device goes on working; its listed memory is the budget.
TEST_F(Vulkan, AModelLargerThanTheMemoryLimitIsOutOfMemoryAndTheDeviceStaysUsable) {
    const char* limit = std::getenv("FLUXION_VULKAN_MEMORY_LIMIT");
    if (!limit || std::string(limit) != "48M") GTEST_SKIP() << "run by ctest's vulkan.memory_limit, with the limit 48M";
    const fx::Device dev{"Vulkan", 0};
    EXPECT_EQ(fx::devices("Vulkan").at(0).total_memory, std::size_t{48} << 20);
    fx::seed(3);
    auto big = fx::Chain(fx::Dense(1024, 4096), fx::Dense(4096, 4096));  // 16 + 64 MiB of weights
    const double before = fx::sum(fx::abs(std::get<1>(big.layers).weight)).item();
    try {
        auto moved = big | dev;
        ADD_FAILURE() << "a model of 80 MiB moved into a budget of 48 MiB";
    } catch (const fx::OutOfMemory& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("allocating 67108864 bytes"), std::string::npos) << m;
        EXPECT_NE(m.find("FLUXION_VULKAN_MEMORY_LIMIT=48 MiB"), std::string::npos) << m;
    }
    EXPECT_EQ(fx::sum(fx::abs(std::get<1>(big.layers).weight)).item(), before);
    std::size_t allocated = 0;
    plugin().memory_stats(0, &allocated, nullptr, nullptr);
    EXPECT_EQ(allocated, 0u) << "the part of the model that had moved was not given back";
    auto small = fx::Dense(10, 5);
    const fx::Tensor x = fx::randn({2, 10});
    const auto on_device = (small | dev)(x | dev) | fx::cpu;
    EXPECT_EQ(on_device.to_vector<float>().size(), 10u);
    const auto expected = small(x).to_vector<float>(), got = on_device.to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5);
}

// Run by ctest as vulkan.driver_out_of_memory, alone in its process: the driver itself says no. The
// process's address space is capped (RLIMIT_AS) 128 MiB above what it holds, so that lavapipe's
// vkAllocateMemory fails for a 512 MiB block that fluxion's own checks let through (no
// FLUXION_VULKAN_MEMORY_LIMIT, below the heap's size): fx::OutOfMemory naming the size, nothing left
// allocated, and with the cap lifted the same block allocates and the device computes.
TEST_F(Vulkan, TheDriversOutOfMemoryIsOutOfMemoryAndTheDeviceStaysUsable) {
    if (!std::getenv("FLUXION_TEST_DRIVER_OUT_OF_MEMORY"))
        GTEST_SKIP() << "run by ctest's vulkan.driver_out_of_memory, alone in its process (it caps the address space)";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "the sanitizers' shadow memory needs terabytes of address space";
#endif
    constexpr std::size_t kBytes = std::size_t{512} << 20;
    ASSERT_EQ(std::getenv("FLUXION_VULKAN_MEMORY_LIMIT"), nullptr);
    fx::backend::DeviceProperties props{};
    t().device_properties(0, &props);
    ASSERT_GT(props.total_bytes, 2 * kBytes) << "fluxion's own heap check would refuse the block";
    long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
        std::fclose(f);
    }
    ASSERT_GT(pages, 0);
    rlimit original{};
    ASSERT_EQ(getrlimit(RLIMIT_AS, &original), 0);
    const rlimit capped{std::size_t(pages) * std::size_t(sysconf(_SC_PAGESIZE)) + (std::size_t{128} << 20),
                        original.rlim_max};
    std::string message;
    ASSERT_EQ(setrlimit(RLIMIT_AS, &capped), 0);
    try {
        t().free(0, t().alloc(0, kBytes));
    } catch (const fx::OutOfMemory& e) {
        message = e.what();
    }
    ASSERT_EQ(setrlimit(RLIMIT_AS, &original), 0);
    EXPECT_NE(message.find("allocating " + std::to_string(kBytes) + " bytes (0 MiB in use by fluxion)"), std::string::npos)
        << (message.empty() ? "the driver allocated 512 MiB in 128 MiB of address space" : message);
    std::size_t allocated = 0;
    plugin().memory_stats(0, &allocated, nullptr, nullptr);
    EXPECT_EQ(allocated, 0u);
    void* block = t().alloc(0, kBytes);  // the same size, uncapped: it was the cap that refused it
    t().free(0, block);
    void* p = t().alloc(0, 64);
    t().fill(0, fx::DType::f32, 16, p, 2.5);
    EXPECT_EQ(download<float>(p, 16), std::vector<float>(16, 2.5f));
    t().free(0, p);
}

// The bits of `values` in the half type t, rounded as the CPU backend rounds (src/cpu/half.hpp).
std::vector<std::uint16_t> cpu_bits(fx::DType t, const std::vector<float>& values) {
    std::vector<std::uint16_t> out;
    for (float v : values)
        out.push_back(t == fx::DType::f16 ? fx::backend::cpu::to_half(v).bits : fx::backend::cpu::to_bfloat16(v).bits);
    return out;
}

float cpu_float(fx::DType t, std::uint16_t bits) {
    return t == fx::DType::f16 ? fx::backend::cpu::to_float(fx::backend::cpu::Half{bits})
                               : fx::backend::cpu::to_float(fx::backend::cpu::BFloat16{bits});
}

class VulkanHalf : public Vulkan, public ::testing::WithParamInterface<fx::DType> {
protected:
    void SetUp() override {
        Vulkan::SetUp();
        if (IsSkipped()) return;
        char why[256] = "";
        if (!t().supports(0, fx::Op::cast, GetParam(), why, sizeof why)) GTEST_SKIP() << why;
    }
};

// ctest runs these twice: with storageBuffer16BitAccess (uint16_t arrays), and as vulkan.half_packed
// with FLUXION_VULKAN_DEBUG_NO_16BIT_STORAGE=1 hiding it (halves of uint words, written with atomics).

// Rounding f32 to the half type and back gives the CPU's bits exactly: ties to even, subnormals,
// overflow to infinity, NaN (kept quiet), signed zeros; written at an odd element offset, which is
// half of a 32-bit word.
TEST_P(VulkanHalf, CastsRoundAsTheCpuDoesAtOddOffsets) {
    const fx::DType h = GetParam();
    const float nan = std::bit_cast<float>(0x7fa00001u), inf = std::numeric_limits<float>::infinity();
    // Ties of f16 (1 + 2^-11, 1 + 3 2^-11) and of bf16 (1 + 2^-8, 1 + 3 2^-8) at 1, f16 subnormals and
    // their ties (2^-24, 1.5 2^-24, 2^-25), an f32 subnormal (1e-40).
    const std::vector<float> values{0.0f,       -0.0f,     1.0f,      -2.5f,       65504.0f,   65519.0f,
                                    65520.0f,   -1e30f,    inf,       -inf,        nan,        0x1.002p0f,
                                    0x1.006p0f, 0x1.01p0f, 0x1.03p0f, 0x1p-24f,    0x1.8p-24f, 0x1p-25f,
                                    1e-8f,      6.1e-5f,   1e-40f,    3.14159265f, 1e38f};
    const std::size_t n = values.size();
    void* src = t().alloc(0, (n + 1) * 4);
    void* half = t().alloc(0, (n + 3) * 2);
    void* back = t().alloc(0, (n + 1) * 4);
    t().copy_from_host(0, static_cast<float*>(src) + 1, values.data(), n * 4);
    t().fill(0, h, std::int64_t(n + 3), half, 7.0);
    t().cast(0, fx::DType::f32, h, std::int64_t(n), static_cast<float*>(src) + 1,
             static_cast<std::uint16_t*>(half) + 1);
    const auto bits = download<std::uint16_t>(half, n + 3);
    const auto want = cpu_bits(h, values), seven = cpu_bits(h, {7.0f});
    EXPECT_EQ(bits[0], seven[0]) << "the element before the odd offset";
    EXPECT_EQ(bits[n + 1], seven[0]) << "the element after";
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(bits[i + 1], want[i]) << fx::name(h) << " of " << values[i];
    t().cast(0, h, fx::DType::f32, std::int64_t(n), static_cast<std::uint16_t*>(half) + 1,
             static_cast<float*>(back) + 1);
    const auto wide = download<std::uint32_t>(static_cast<float*>(back) + 1, n);
    for (std::size_t i = 0; i < n; ++i)
        EXPECT_EQ(wide[i], std::bit_cast<std::uint32_t>(cpu_float(h, want[i])))
            << "f32 of " << fx::name(h) << " " << want[i];
    t().free(0, src);
    t().free(0, half);
    t().free(0, back);
}

// Fills, strided copies (which keep every bit, a signalling NaN's too), arithmetic and a sum on
// views at odd element offsets, over sizes that are no multiple of the workgroup.
TEST_P(VulkanHalf, ViewsAtOddElementOffsets) {
    const fx::DType h = GetParam();
    for (std::int64_t n : {1, 3, 257, 1031}) {
        std::vector<float> x(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(double(i))) * 3;
        std::vector<std::uint16_t> host = cpu_bits(h, x);
        host[0] = h == fx::DType::f16 ? 0x7c01 : 0x7f81;  // a signalling NaN
        void* a = t().alloc(0, std::size_t(n + 8) * 2);
        void* b = t().alloc(0, std::size_t(n + 8) * 2);
        for (int off : {1, 3}) {
            t().fill(0, h, n + 8, a, -1.0);
            t().fill(0, h, n, static_cast<std::uint16_t*>(a) + off, 2.5);
            auto got = download<std::uint16_t>(a, std::size_t(n + 8));
            const std::uint16_t in = cpu_bits(h, {2.5f})[0], out = cpu_bits(h, {-1.0f})[0];
            for (std::int64_t i = 0; i < n + 8; ++i)
                ASSERT_EQ(got[i], (i >= off && i < off + n) ? in : out)
                    << "fill n " << n << " offset " << off << " i " << i;
            // b[off + 2 + j] = a[off + 2 j] through copy_strided, bit for bit: every other element,
            // so each read is the same half of consecutive words.
            t().copy_from_host(0, static_cast<std::uint16_t*>(a) + off, host.data(), host.size() * 2);
            const std::int64_t every_other = (n + 1) / 2;
            const Strided strided{1, {every_other}, {2}};
            const std::int64_t dense[] = {1};
            t().copy_strided(0, h, &strided, static_cast<std::uint16_t*>(a) + off, dense,
                             static_cast<std::uint16_t*>(b) + off + 2);
            got = download<std::uint16_t>(static_cast<std::uint16_t*>(b) + off + 2, std::size_t(every_other));
            for (std::int64_t j = 0; j < every_other; ++j)
                ASSERT_EQ(got[std::size_t(j)], host[std::size_t(2 * j)]) << "copy n " << n << " offset " << off;
            // a + a, computed in f32 and rounded once.
            const Strided view{1, {n}, {1}};
            t().binary(0, fx::backend::Binary::add, h, &view, static_cast<std::uint16_t*>(a) + off, &view,
                       static_cast<std::uint16_t*>(a) + off, static_cast<std::uint16_t*>(b) + off);
            got = download<std::uint16_t>(static_cast<std::uint16_t*>(b) + off, std::size_t(n));
            for (std::int64_t i = 1; i < n; ++i) {
                const float v = cpu_float(h, host[std::size_t(i)]);
                ASSERT_EQ(got[std::size_t(i)], cpu_bits(h, {v + v})[0])
                    << "add n " << n << " offset " << off << " i " << i;
            }
        }
        t().free(0, a);
        t().free(0, b);
    }
    // 4096 ones at an odd offset sum to 4096 exactly: the sum runs in f32.
    void* ones = t().alloc(0, 4098 * 2);
    t().fill(0, h, 4096, static_cast<std::uint16_t*>(ones) + 1, 1.0);
    t().reduce(0, fx::backend::Reduce::sum, h, 1, 4096, 1, static_cast<std::uint16_t*>(ones) + 1,
               static_cast<std::uint16_t*>(ones) + 4097);
    EXPECT_EQ(cpu_float(h, download<std::uint16_t>(static_cast<std::uint16_t*>(ones) + 4097, 1)[0]), 4096.0f);
    t().free(0, ones);
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanHalf, ::testing::Values(fx::DType::f16, fx::DType::bf16),
                         [](const ::testing::TestParamInfo<fx::DType>& info) { return fx::name(info.param); });

// Run by ctest with FLUXION_VULKAN_DEBUG_MAX_BUFFER_RANGE=4096: a tensor larger than the device's
// maxStorageBufferRange is a clear error, not a silent partial binding; smaller ones still run.
TEST_F(Vulkan, TensorsLargerThanTheStorageBufferRangeAreAClearError) {
    const char* range = std::getenv("FLUXION_VULKAN_DEBUG_MAX_BUFFER_RANGE");
    if (!range || std::string(range) != "4096") GTEST_SKIP() << "only with FLUXION_VULKAN_DEBUG_MAX_BUFFER_RANGE=4096";
    void* p = t().alloc(0, 8192);
    t().fill(0, fx::DType::f32, 512, p, 1.0);
    EXPECT_EQ(download<float>(p, 512), std::vector<float>(512, 1.0f));
    try {
        t().fill(0, fx::DType::f32, 2048, p, 1.0);
        ADD_FAILURE() << "a fill of 8192 bytes ran under a 4096-byte range";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("maxStorageBufferRange"), std::string::npos) << e.what();
    }
    t().free(0, p);
}

// Run by ctest a second time with VK_DRIVER_FILES naming a missing file: the loader is there, no
// driver is, and the plugin says so.
// The Vulkan evidence of the suite must not quietly become skips: with the plugin built, lavapipe
// and the validation layer must be installed (scripts/setup.sh installs both) and together give a
// usable device, or this fails with the reason. A run that names another driver is left alone.
TEST(VulkanEnvironment, TheBuiltPluginRunsOnLavapipeUnderTheValidationLayer) {
#ifndef FLUXION_TEST_VULKAN_BUILT
    GTEST_SKIP() << "this build has no Vulkan plugin (libvulkan-dev and glslc were not found)";
#endif
    const std::string lavapipe = fx_test::lavapipe_manifest(), layer = fx_test::validation_layer_manifest();
    for (const char* variable : {"VK_DRIVER_FILES", "VK_ICD_FILENAMES"})
        if (const char* named = std::getenv(variable); named && *named && std::string(named) != lavapipe)
            GTEST_SKIP() << variable << " names another driver: " << named;
    ASSERT_FALSE(lavapipe.empty()) << "the Vulkan plugin is built, but Mesa's lavapipe is not installed where Vulkan's "
                                      "loader looks (apt-get install mesa-vulkan-drivers; scripts/setup.sh does)";
    ASSERT_FALSE(layer.empty()) << "the Vulkan plugin is built, but the Khronos validation layer is not installed "
                                   "(apt-get install vulkan-validationlayers; scripts/setup.sh does)";
    ASSERT_TRUE(plugin().loaded) << plugin().why;
    EXPECT_EQ(plugin().why, "") << "lavapipe (" << lavapipe << ") and the validation layer (" << layer
                                << ") are installed, yet the Vulkan plugin is not usable";
    EXPECT_STREQ(std::getenv("FLUXION_VULKAN_VALIDATION"), "1") << "the suite runs Vulkan under the validation layer";
}

TEST(VulkanNoDriver, FunctionalSaysWhy) {
    if (!driver_files_missing()) GTEST_SKIP() << "only with VK_DRIVER_FILES naming a missing file";
    if (!plugin().loaded) GTEST_SKIP() << plugin().why;
    char why[512] = "";
    EXPECT_FALSE(plugin().table->functional(why, sizeof why));
    EXPECT_NE(std::string(why).find("VK_DRIVER_FILES"), std::string::npos) << why;
    EXPECT_EQ(plugin().table->device_count(), 0);
    EXPECT_FALSE(fx::functional("Vulkan"));
}

}  // namespace
