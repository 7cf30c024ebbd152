// test_cpu_kernels.cpp — the CPU backend's kernel table called directly, each kernel against a
// plain reference loop written here (or, for gradients, central finite differences in f64).
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/ops/unary_registry.hpp"
#include "cpu/conv_direct.hpp"
#include "cpu/fused.hpp"
#include "cpu/gemm_half.hpp"
#include "cpu/kernels.hpp"
#include "cpu/onednn.hpp"
#include "cpu/openblas.hpp"
#include "cpu/pool_max2x2.hpp"
#include "fluxion/error.hpp"
#include "fluxion/info.hpp"

namespace {

namespace be = fluxion::backend;
using fluxion::DType;
using std::int64_t;

const be::Backend& cpu() { return be::cpu_backend(); }

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> random_values(int64_t n, double lo, double hi, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = dist(rng);
    return v;
}

template <class T> std::vector<T> converted(const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); }

be::Strided view(std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
    be::Strided v{};
    v.ndim = static_cast<int>(shape.size());
    int64_t step = 1;
    for (int d = v.ndim - 1; d >= 0; --d) {
        v.shape[d] = shape[d];
        v.strides[d] = strides.empty() ? step : strides[d];
        step *= shape[d];
    }
    return v;
}

int64_t numel(const be::Strided& v) {
    int64_t n = 1;
    for (int d = 0; d < v.ndim; ++d) n *= v.shape[d];
    return n;
}

// The element offset of the `linear`-th element (row-major order) of a view.
int64_t offset_of(const be::Strided& v, int64_t linear) {
    int64_t offset = 0;
    for (int d = v.ndim - 1; d >= 0; --d) {
        offset += (linear % v.shape[d]) * v.strides[d];
        linear /= v.shape[d];
    }
    return offset;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// ---------------------------------------------------------------- table, devices, memory

TEST(CpuBackend, TableIsComplete) {
    const auto& t = cpu();
    EXPECT_EQ(t.abi_version, be::kAbiVersion);
    EXPECT_STREQ(t.name, "CPU");
    const void* entries[] = {reinterpret_cast<const void*>(t.functional),
                             reinterpret_cast<const void*>(t.device_count),
                             reinterpret_cast<const void*>(t.device_properties),
                             reinterpret_cast<const void*>(t.supports),
                             reinterpret_cast<const void*>(t.synchronize),
                             reinterpret_cast<const void*>(t.alloc),
                             reinterpret_cast<const void*>(t.free),
                             reinterpret_cast<const void*>(t.copy_from_host),
                             reinterpret_cast<const void*>(t.copy_to_host),
                             reinterpret_cast<const void*>(t.copy_device),
                             reinterpret_cast<const void*>(t.fill),
                             reinterpret_cast<const void*>(t.copy_strided),
                             reinterpret_cast<const void*>(t.cast),
                             reinterpret_cast<const void*>(t.index_select),
                             reinterpret_cast<const void*>(t.index_add),
                             reinterpret_cast<const void*>(t.unary),
                             reinterpret_cast<const void*>(t.unary_backward),
                             reinterpret_cast<const void*>(t.binary),
                             reinterpret_cast<const void*>(t.where),
                             reinterpret_cast<const void*>(t.reduce),
                             reinterpret_cast<const void*>(t.gemm),
                             reinterpret_cast<const void*>(t.conv2d),
                             reinterpret_cast<const void*>(t.conv2d_backward_input),
                             reinterpret_cast<const void*>(t.conv2d_backward_weight),
                             reinterpret_cast<const void*>(t.pool2d),
                             reinterpret_cast<const void*>(t.pool2d_backward),
                             reinterpret_cast<const void*>(t.softmax),
                             reinterpret_cast<const void*>(t.softmax_backward),
                             reinterpret_cast<const void*>(t.optimiser_step)};
    for (const void* entry : entries) EXPECT_NE(entry, nullptr);
}

// OpenBLAS runs the kernel this CPU's features call for, never its generic one on a CPU it does not
// know (issue 29: "Prescott" on a Sapphire Rapids made the wide MLP 4 times slower). A user's
// OPENBLAS_CORETYPE is respected instead.
TEST(CpuBackend, OpenBlasRunsTheKernelOfThisCpusFeatures) {
    namespace blas = fluxion::backend::cpu::openblas;
    const blas::Library& lib = blas::library();
    std::printf("OpenBLAS kernel %s (%s)\n", lib.core.c_str(), lib.chosen.c_str());
    if (lib.chosen.find("set by the user") != std::string::npos) GTEST_SKIP() << lib.chosen;
    const std::string want = blas::core_for_this_cpu();
    if (want.empty()) GTEST_SKIP() << "no AVX2 on this CPU: OpenBLAS chooses";
    EXPECT_EQ(lib.core, want) << lib.chosen;
    EXPECT_NE(lib.core, "Prescott");
}

// fx::info() says what runs here: the version, the CPU, threads, the BLAS kernel actually loaded.
TEST(CpuBackend, InfoNamesTheCpuThreadsAndTheBlasKernel) {
    const std::string text = fluxion::info();
    std::printf("%s", text.c_str());
    for (const std::string& part :
         {std::string("fluxion "), std::string("CPU: "), std::string("threads: "),
          std::string("matrix products: "), "OpenBLAS, kernel " + fluxion::backend::cpu::openblas::library().core,
          std::string("convolutions: ")})
        EXPECT_NE(text.find(part), std::string::npos) << part << " is missing from:\n" << text;
}

// The kernel class fx::info() reports: on a CPU with AVX2 and FMA or better, one of OpenBLAS's
// vector kernels, never a generic one (Prescott, Core2, Nehalem, ...) that an unknown processor model
// gets from OpenBLAS's own table (issue 29).
TEST(CpuBackend, InfoNamesAVectorKernelOnAvx2) {
    const auto& lib = fluxion::backend::cpu::openblas::library();
    if (lib.chosen.find("set by the user") != std::string::npos) GTEST_SKIP() << lib.chosen;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2 with FMA";
    const std::string text = fluxion::info(), label = "OpenBLAS, kernel ";
    const auto at = text.find(label);
    ASSERT_NE(at, std::string::npos) << text;
    const auto start = at + label.size();
    const std::string kernel = text.substr(start, text.find(' ', start) - start);
    const std::set<std::string> vector_kernels{"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
    EXPECT_TRUE(vector_kernels.count(kernel)) << "fx::info() reports the kernel " << kernel << ":\n" << text;
}

// A user's OPENBLAS_CORETYPE wins over the CPU's features, even when it names the generic kernel,
// and fx::info() says so. OpenBLAS reads the variable once, when it is opened, so the test program
// runs this test again in a process of its own with OPENBLAS_CORETYPE=Prescott.
TEST(CpuBackend, InfoReportsAUsersCoreType) {
    // libfluxion sets the variable itself when it chooses, so only `chosen` tells the two apart.
    const auto& lib = fluxion::backend::cpu::openblas::library();
    if (lib.chosen.find("set by the user") != std::string::npos) {  // the run below, or a user's
        const char* user = std::getenv("OPENBLAS_CORETYPE");
        ASSERT_NE(user, nullptr);
        const std::string text = fluxion::info();
        std::printf("%s", text.c_str());
        std::string core = lib.core, wanted = user;
        for (std::string* s : {&core, &wanted})
            for (char& ch : *s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        EXPECT_EQ(core, wanted) << "OpenBLAS runs another kernel than OPENBLAS_CORETYPE=" << user;
        EXPECT_NE(text.find("(OPENBLAS_CORETYPE=" + std::string(user) + ", set by the user)"), std::string::npos)
            << text;
        return;
    }
    char self[4096] = {};
    ASSERT_GT(::readlink("/proc/self/exe", self, sizeof self - 1), 0);
    const std::string command = std::string("OPENBLAS_CORETYPE=Prescott '") + self +
                                "' --gtest_filter=CpuBackend.InfoReportsAUsersCoreType 2>&1";
    FILE* child = ::popen(command.c_str(), "r");
    ASSERT_NE(child, nullptr);
    std::string output;
    char buffer[4096];
    while (std::fgets(buffer, sizeof buffer, child)) output += buffer;
    EXPECT_EQ(::pclose(child), 0) << output;
    EXPECT_NE(output.find("kernel Prescott (OPENBLAS_CORETYPE=Prescott, set by the user)"), std::string::npos)
        << output;
    EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << output;
}

TEST(CpuBackend, OneDeviceDescribed) {
    EXPECT_TRUE(cpu().functional(nullptr, 0));
    EXPECT_EQ(cpu().device_count(), 1);
    EXPECT_EQ(cpu().priority, 0);
    fluxion::backend::DeviceProperties p{};
    cpu().device_properties(0, &p);
    EXPECT_GT(std::strlen(p.name), 0u);
    EXPECT_LT(std::strlen(p.name), sizeof p.name);
    EXPECT_EQ(p.kind, fluxion::DeviceKind::cpu);
    EXPECT_GT(p.total_bytes, std::size_t{1} << 20);
    EXPECT_GT(p.free_bytes, 0u);
    EXPECT_LE(p.free_bytes, p.total_bytes);
    EXPECT_THROW(cpu().device_properties(1, &p), fluxion::DeviceError);
}

TEST(CpuBackend, SupportsNamesTheMissingKernel) {
    using fluxion::DType;
    using fluxion::Op;
    ASSERT_NE(cpu().supports, nullptr);
    EXPECT_TRUE(cpu().supports(0, Op::gemm, DType::f64, nullptr, 0));
    EXPECT_TRUE(cpu().supports(0, Op::cast, DType::bf16, nullptr, 0));
    EXPECT_TRUE(cpu().supports(0, Op::binary, DType::boolean, nullptr, 0));
    EXPECT_FALSE(cpu().supports(0, Op::unary, DType::u8, nullptr, 0));
    char why[256] = {};
    EXPECT_TRUE(cpu().supports(0, Op::gemm, DType::f16, nullptr, 0));
    EXPECT_TRUE(cpu().supports(0, Op::conv2d, DType::bf16, nullptr, 0));
    EXPECT_FALSE(cpu().supports(0, Op::gemm, DType::i32, why, sizeof why));
    EXPECT_STREQ(why, "CPU:0: gemm has no kernel for i32 (supported: f32, f64, f16, bf16)");
    char tiny[8];
    EXPECT_FALSE(cpu().supports(0, Op::softmax, DType::i32, tiny, sizeof tiny));
    EXPECT_LT(std::strlen(tiny), sizeof tiny);
}

TEST(CpuBackend, AllocationsAreAlignedAndUnique) {
    void* a = cpu().alloc(0, 0);
    void* b = cpu().alloc(0, 0);
    void* c = cpu().alloc(0, 1000);
    EXPECT_NE(a, nullptr);
    EXPECT_NE(a, b);
    for (void* p : {a, b, c}) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
    std::vector<char> host(1000), back(1000);
    std::iota(host.begin(), host.end(), 0);
    cpu().copy_from_host(0, c, host.data(), host.size());
    void* d = cpu().alloc(0, 1000);
    cpu().copy_device(0, d, 0, c, 1000);
    cpu().copy_to_host(0, back.data(), d, back.size());
    EXPECT_EQ(host, back);
    for (void* p : {a, b, c, d}) cpu().free(0, p);
    cpu().free(0, nullptr);
}

// Large blocks are cached when freed and handed out again for the same size class, which spares a
// training step the page faults of fresh memory; under ASan every block goes back to malloc.
TEST(CpuBackend, LargeFreedBlocksAreReused) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "the cache is off under AddressSanitizer, so that use after free is caught";
#endif
    const std::size_t big = std::size_t(3) << 20;
    void* first = cpu().alloc(0, big);
    std::memset(first, 1, big);
    cpu().free(0, first);
    void* again = cpu().alloc(0, big - 1000);  // the same size class
    EXPECT_EQ(again, first);
    void* other = cpu().alloc(0, big);  // the cached block is taken: a new one
    EXPECT_NE(other, again);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(other) % 64, 0u);
    cpu().free(0, again);
    cpu().free(0, other);
}

TEST(CpuBackend, ImpossibleAllocationThrowsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer aborts on an impossible allocation instead of failing it";
#endif
    try {
        cpu().alloc(0, std::numeric_limits<std::size_t>::max() / 2);
        FAIL() << "expected OutOfMemory";
    } catch (const fluxion::OutOfMemory& e) {
        EXPECT_NE(std::string(e.what()).find("CPU: cannot allocate"), std::string::npos) << e.what();
    }
}

// ---------------------------------------------------------------- fill and cast

TEST(CpuLayout, FillEveryType) {
    std::vector<float> f(100);
    cpu().fill(0, DType::f32, 100, f.data(), 2.5);
    for (float v : f) EXPECT_EQ(v, 2.5f);
    std::vector<std::int64_t> i(7);
    cpu().fill(0, DType::i64, 7, i.data(), -3);
    for (auto v : i) EXPECT_EQ(v, -3);
    std::vector<std::uint8_t> flags(5, 7);
    cpu().fill(0, DType::boolean, 5, flags.data(), 2.0);
    for (auto v : flags) EXPECT_EQ(v, 1);
    std::vector<std::uint16_t> half(3);
    cpu().fill(0, DType::f16, 3, half.data(), 1.5);
    for (auto v : half) EXPECT_EQ(v, 0x3e00);
    cpu().fill(0, DType::bf16, 3, half.data(), -2.0);
    for (auto v : half) EXPECT_EQ(v, 0xc000);
}

TEST(CpuLayout, CastBetweenPlainTypes) {
    const std::vector<double> src{-2.7, -0.0, 0.5, 3.99, 300.0};
    std::vector<std::int32_t> i32(5);
    cpu().cast(0, DType::f64, DType::i32, 5, src.data(), i32.data());
    EXPECT_EQ(i32, (std::vector<std::int32_t>{-2, 0, 0, 3, 300}));

    std::vector<std::uint8_t> flags(5);
    const std::vector<float> f{0.0f, -0.5f, static_cast<float>(kNaN), 2.0f, -0.0f};
    cpu().cast(0, DType::f32, DType::boolean, 5, f.data(), flags.data());
    EXPECT_EQ(flags, (std::vector<std::uint8_t>{0, 1, 1, 1, 0}));

    std::vector<float> back(5);
    cpu().cast(0, DType::boolean, DType::f32, 5, flags.data(), back.data());
    EXPECT_EQ(back, (std::vector<float>{0, 1, 1, 1, 0}));

    const std::vector<std::int64_t> big{300, -1, 255};
    std::vector<std::uint8_t> bytes(3);
    cpu().cast(0, DType::i64, DType::u8, 3, big.data(), bytes.data());
    EXPECT_EQ(bytes, (std::vector<std::uint8_t>{44, 255, 255}));

    std::vector<double> wide(3);
    cpu().cast(0, DType::u8, DType::f64, 3, bytes.data(), wide.data());
    EXPECT_EQ(wide, (std::vector<double>{44, 255, 255}));

    std::vector<std::int64_t> same(3);
    cpu().cast(0, DType::i64, DType::i64, 3, big.data(), same.data());
    EXPECT_EQ(same, big);
}

float half_to_float(std::uint16_t h) {
    float f = 0;
    cpu().cast(0, DType::f16, DType::f32, 1, &h, &f);
    return f;
}
std::uint16_t float_to_half(float f) {
    std::uint16_t h = 0;
    cpu().cast(0, DType::f32, DType::f16, 1, &f, &h);
    return h;
}
std::uint16_t float_to_bfloat16(float f) {
    std::uint16_t h = 0;
    cpu().cast(0, DType::f32, DType::bf16, 1, &f, &h);
    return h;
}

TEST(CpuLayout, HalfRoundsToNearestEven) {
    EXPECT_EQ(float_to_half(1.0f), 0x3c00);
    EXPECT_EQ(float_to_half(-0.0f), 0x8000);
    EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
    EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
    EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // halfway to the next step: rounds up to infinity
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // halfway between 0 and 2^-24: even
    EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);  // halfway between 1 and 2 steps: even
    EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
    EXPECT_EQ(float_to_half(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14) * (1.0f - std::ldexp(1.0f, -12))), 0x0400);  // up to normal
    const std::uint16_t nan = float_to_half(static_cast<float>(kNaN));
    EXPECT_EQ(nan & 0x7c00, 0x7c00);
    EXPECT_NE(nan & 0x03ff, 0);
    EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
    EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(half_to_float(0xc000), -2.0f);
}

TEST(CpuLayout, EveryHalfAndBfloat16SurvivesARoundTrip) {
    std::vector<std::uint16_t> all(65536), back(65536);
    std::iota(all.begin(), all.end(), std::uint16_t{0});
    std::vector<float> wide(65536);
    for (DType t : {DType::f16, DType::bf16}) {
        cpu().cast(0, t, DType::f32, 65536, all.data(), wide.data());
        cpu().cast(0, DType::f32, t, 65536, wide.data(), back.data());
        for (int i = 0; i < 65536; ++i) {
            if (std::isnan(wide[i])) continue;
            ASSERT_EQ(back[i], all[i]) << fluxion::name(t) << " bits " << i;
        }
    }
    EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
    EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // halfway: even
    EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);
    const std::uint16_t nan = float_to_bfloat16(static_cast<float>(kNaN));
    EXPECT_EQ(nan & 0x7f80, 0x7f80);
    EXPECT_NE(nan & 0x007f, 0);
}

// A long cast runs eight elements at a time where the build has AVX2 and F16C; a cast of one element
// runs the scalar conversion. Both must give the same bits for every value: NaN payloads, ties,
// subnormals, overflow to infinity, and the tail that is not a multiple of eight.
TEST(CpuLayout, LongCastsEqualTheOneByOneCastsBitForBit) {
    std::vector<std::uint32_t> bits;
    for (std::uint32_t h = 0; h < 65536; ++h) {  // every half and bfloat16 widened, and its neighbours
        const std::uint32_t as_bf16 = h << 16;
        for (std::uint32_t x : {as_bf16, as_bf16 + 0x8000u, as_bf16 + 0x7fffu, as_bf16 + 0x8001u}) bits.push_back(x);
        const std::uint32_t as_f16 = std::bit_cast<std::uint32_t>(half_to_float(std::uint16_t(h)));
        for (std::uint32_t x : {as_f16, as_f16 + 0x1000u, as_f16 + 0xfffu, as_f16 + 0x1001u}) bits.push_back(x);
    }
    std::mt19937 rng(29);
    for (int i = 0; i < 200000; ++i) bits.push_back(rng());
    const std::size_t n = bits.size() - 5;  // from element 3: unaligned, with a tail
    for (DType t : {DType::f16, DType::bf16}) {
        std::vector<std::uint16_t> bulk(n), one(n);
        cpu().cast(0, DType::f32, t, int64_t(n), bits.data() + 3, bulk.data());
        for (std::size_t i = 0; i < n; ++i) cpu().cast(0, DType::f32, t, 1, bits.data() + 3 + i, &one[i]);
        for (std::size_t i = 0; i < n; ++i)
            ASSERT_EQ(bulk[i], one[i]) << fluxion::name(t) << " from f32 bits 0x" << std::hex << bits[3 + i];
        std::vector<std::uint16_t> all(65536 + 5);
        std::iota(all.begin(), all.end(), std::uint16_t{0});
        std::vector<std::uint32_t> wide(65536), wide_one(65536);
        cpu().cast(0, t, DType::f32, 65536, all.data() + 5, wide.data());
        for (std::size_t i = 0; i < 65536; ++i) cpu().cast(0, t, DType::f32, 1, all.data() + 5 + i, &wide_one[i]);
        for (std::size_t i = 0; i < 65536; ++i)
            ASSERT_EQ(wide[i], wide_one[i]) << fluxion::name(t) << " bits 0x" << std::hex << all[5 + i];
    }
}

// ---------------------------------------------------------------- copy_strided

void expect_strided_copy(const be::Strided& src_view, const std::vector<int64_t>& dst_strides, int64_t dst_size) {
    int64_t src_size = 1;
    for (int d = 0; d < src_view.ndim; ++d) src_size += (src_view.shape[d] - 1) * src_view.strides[d];
    const auto src = converted<float>(random_values(src_size, -1, 1, 7));
    std::vector<float> dst(static_cast<std::size_t>(dst_size), -99.0f);
    cpu().copy_strided(0, DType::f32, &src_view, src.data(), dst_strides.data(), dst.data());
    be::Strided dst_view = src_view;
    for (int d = 0; d < src_view.ndim; ++d) dst_view.strides[d] = dst_strides[d];
    for (int64_t i = 0; i < numel(src_view); ++i)
        ASSERT_EQ(dst[offset_of(dst_view, i)], src[offset_of(src_view, i)]) << "element " << i;
}

TEST(CpuLayout, CopyStridedViews) {
    expect_strided_copy(view({3, 4}, {1, 3}), {4, 1}, 12);                 // transpose
    expect_strided_copy(view({2, 3, 4}, {1, 8, 2}), {12, 4, 1}, 24);       // permutation
    expect_strided_copy(view({5, 4}, {0, 1}), {4, 1}, 20);                 // broadcast rows
    expect_strided_copy(view({4, 3}, {3, 1}), {1, 4}, 12);                 // into a transposed view
    expect_strided_copy(view({2, 3}, {6, 2}), {3, 1}, 6);                  // every other element
    expect_strided_copy(view({300, 257}, {1, 300}), {257, 1}, 300 * 257);  // large transpose, tiled
    expect_strided_copy(view({3, 70, 65}, {1, 3 * 65, 3}), {70 * 65, 65, 1}, 3 * 70 * 65);
    expect_strided_copy(view({100000}, {2}), {1}, 100000);  // one long strided row
    expect_strided_copy(view({}), {}, 1);                   // a scalar
}

TEST(CpuLayout, CopyStridedMovesAnyElementSize) {
    const std::vector<std::uint16_t> src{1, 2, 3, 4, 5, 6};
    std::vector<std::uint16_t> dst(6);
    const auto v = view({2, 3}, {1, 2});
    const std::vector<int64_t> strides{3, 1};
    cpu().copy_strided(0, DType::bf16, &v, src.data(), strides.data(), dst.data());
    EXPECT_EQ(dst, (std::vector<std::uint16_t>{1, 3, 5, 2, 4, 6}));
}

// ---------------------------------------------------------------- index_select / index_add

TEST(CpuLayout, IndexSelectGathersRows) {
    const int64_t outer = 2, n = 4, inner = 3;
    const auto src = converted<double>(random_values(outer * n * inner, -1, 1, 3));
    const std::vector<int64_t> idx{3, 0, 3, 1, 2};
    std::vector<double> dst(outer * idx.size() * inner);
    cpu().index_select(0, DType::f64, outer, n, inner, src.data(), idx.data(), 5, dst.data());
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < 5; ++j)
            for (int64_t i = 0; i < inner; ++i)
                EXPECT_EQ(dst[(o * 5 + j) * inner + i], src[(o * n + idx[j]) * inner + i]);

    const std::vector<std::int32_t> ints{10, 20, 30};
    const std::vector<int64_t> pick{2, 2, 0};
    std::vector<std::int32_t> picked(3);
    cpu().index_select(0, DType::i32, 1, 3, 1, ints.data(), pick.data(), 3, picked.data());
    EXPECT_EQ(picked, (std::vector<std::int32_t>{30, 30, 10}));
}

TEST(CpuLayout, IndexAddAccumulatesRepeatedIndices) {
    const int64_t outer = 2, n_dst = 3, inner = 2, n_idx = 4;
    const std::vector<int64_t> idx{2, 0, 2, 2};
    const auto src = converted<float>(random_values(outer * n_idx * inner, -1, 1, 4));
    std::vector<float> dst(outer * n_dst * inner, 1.0f), expected = dst;
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < n_idx; ++j)
            for (int64_t i = 0; i < inner; ++i)
                expected[(o * n_dst + idx[j]) * inner + i] += src[(o * n_idx + j) * inner + i];
    cpu().index_add(0, DType::f32, outer, n_dst, inner, src.data(), idx.data(), n_idx, dst.data());
    for (std::size_t i = 0; i < dst.size(); ++i) EXPECT_NEAR(dst[i], expected[i], 1e-6);

    // An embedding-sized gradient: many repeated rows, a wide inner axis split among threads.
    const int64_t rows = 50, width = 3000, picks = 400;
    std::vector<int64_t> many(picks);
    for (int64_t j = 0; j < picks; ++j) many[j] = (j * 7) % rows;
    const std::vector<double> ones(picks * width, 1.0);
    std::vector<double> counts(rows * width, 0.0);
    cpu().index_add(0, DType::f64, 1, rows, width, ones.data(), many.data(), picks, counts.data());
    for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(counts[r * width + width - 1], 8.0) << "row " << r;
}

// Nearest upsampling's shapes, large enough to be split among threads mid-row: single elements
// (inner 1, the last axis) and short rows, an odd count of indices with repeats; the gradient's
// index_add in u8, whose sums wrap.
TEST(CpuLayout, IndexSelectAndAddOfSingleElementsSplitAmongThreads) {
    const int64_t outer = 4099, n = 7, n_idx = 15;
    std::vector<int64_t> idx(n_idx);
    for (int64_t j = 0; j < n_idx; ++j) idx[j] = (j * 3) % n;
    for (const int64_t inner : {int64_t(1), int64_t(5)}) {
        const auto src = converted<float>(random_values(outer * n * inner, -1, 1, 11));
        std::vector<float> dst(outer * n_idx * inner, 0.0f);
        cpu().index_select(0, DType::f32, outer, n, inner, src.data(), idx.data(), n_idx, dst.data());
        int64_t wrong = 0;
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t j = 0; j < n_idx; ++j)
                for (int64_t i = 0; i < inner; ++i)
                    wrong += dst[(o * n_idx + j) * inner + i] != src[(o * n + idx[j]) * inner + i];
        EXPECT_EQ(wrong, 0) << "index_select, inner " << inner;

        std::vector<std::uint8_t> grad(outer * n_idx * inner), acc(outer * n * inner, 100), expected = acc;
        for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = std::uint8_t(i % 251);
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t j = 0; j < n_idx; ++j)
                for (int64_t i = 0; i < inner; ++i) {
                    std::uint8_t& e = expected[(o * n + idx[j]) * inner + i];
                    e = std::uint8_t(e + grad[(o * n_idx + j) * inner + i]);
                }
        cpu().index_add(0, DType::u8, outer, n, inner, grad.data(), idx.data(), n_idx, acc.data());
        EXPECT_EQ(acc, expected) << "index_add, inner " << inner;
    }
}

TEST(CpuLayout, IndexOutOfRangeThrowsAndWritesNothing) {
    const std::vector<float> src{1, 2, 3};
    const std::vector<int64_t> idx{0, 3};
    std::vector<float> dst{9, 9};
    EXPECT_THROW(cpu().index_select(0, DType::f32, 1, 3, 1, src.data(), idx.data(), 2, dst.data()),
                 fluxion::ValueError);
    EXPECT_EQ(dst, (std::vector<float>{9, 9}));
    const std::vector<int64_t> negative{-1};
    std::vector<float> acc{0, 0, 0};
    EXPECT_THROW(cpu().index_add(0, DType::f32, 1, 3, 1, src.data(), negative.data(), 1, acc.data()),
                 fluxion::ValueError);
    EXPECT_EQ(acc, (std::vector<float>{0, 0, 0}));
}

// ---------------------------------------------------------------- unary

struct UnaryCase {
    be::Unary op;
    const char* name;
    double a, b;
    double lo, hi;  // the domain sampled; points within 0.05 of a kink are skipped
    std::function<double(double)> f;
    std::vector<double> kinks;
};

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<UnaryCase> unary_cases() {
    using U = be::Unary;
    const double k = std::sqrt(2 / std::numbers::pi);
    return {
        {U::neg, "neg", 0, 0, -2, 2, [](double x) { return -x; }, {}},
        {U::exp, "exp", 0, 0, -2, 2, [](double x) { return std::exp(x); }, {}},
        {U::log, "log", 0, 0, 0.2, 3, [](double x) { return std::log(x); }, {}},
        {U::sqrt, "sqrt", 0, 0, 0.2, 3, [](double x) { return std::sqrt(x); }, {}},
        {U::abs, "abs", 0, 0, -2, 2, [](double x) { return std::abs(x); }, {0}},
        {U::square, "square", 0, 0, -2, 2, [](double x) { return x * x; }, {}},
        {U::sin, "sin", 0, 0, -3, 3, [](double x) { return std::sin(x); }, {}},
        {U::cos, "cos", 0, 0, -3, 3, [](double x) { return std::cos(x); }, {}},
        {U::tanh, "tanh", 0, 0, -3, 3, [](double x) { return std::tanh(x); }, {}},
        {U::sigmoid, "sigmoid", 0, 0, -5, 5, sigmoid, {}},
        {U::relu, "relu", 0, 0, -2, 2, [](double x) { return x > 0 ? x : 0; }, {0}},
        {U::leakyrelu, "leakyrelu", 0.1, 0, -2, 2, [](double x) { return x > 0 ? x : 0.1 * x; }, {0}},
        {U::elu, "elu", 1.5, 0, -2, 2, [](double x) { return x > 0 ? x : 1.5 * (std::exp(x) - 1); }, {0}},
        {U::gelu,
         "gelu",
         0,
         0,
         -3,
         3,
         [k](double x) { return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))); },
         {}},
        {U::softplus, "softplus", 0, 0, -30, 30, [](double x) { return std::log1p(std::exp(x)); }, {}},
        {U::swish, "swish", 0, 0, -4, 4, [](double x) { return x * sigmoid(x); }, {}},
        {U::clamp, "clamp", -0.5, 0.7, -2, 2, [](double x) { return std::min(std::max(x, -0.5), 0.7); }, {-0.5, 0.7}},
        {U::sign, "sign", 0, 0, -2, 2, [](double x) { return double((x > 0) - (x < 0)); }, {0}},
        {U::recip, "recip", 0, 0, 0.3, 3, [](double x) { return 1 / x; }, {}},
        {U::pow_scalar, "pow_scalar", 2.5, 0, 0.2, 3, [](double x) { return std::pow(x, 2.5); }, {}},
        {U::gelu_erf, "gelu_erf", 0, 0, -4, 4, [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, {}},
        {U::hardswish,
         "hardswish",
         0,
         0,
         -5,
         5,
         [](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; },
         {-3, 3}},
        {U::relu6, "relu6", 0, 0, -2, 8, [](double x) { return std::min(std::max(x, 0.0), 6.0); }, {0, 6}},
        {U::hardtanh,
         "hardtanh",
         -0.5,
         0.7,
         -2,
         2,
         [](double x) { return std::min(std::max(x, -0.5), 0.7); },
         {-0.5, 0.7}},
        {U::hardsigmoid,
         "hardsigmoid",
         0,
         0,
         -5,
         5,
         [](double x) { return std::min(std::max(x / 6 + 0.5, 0.0), 1.0); },
         {-3, 3}},
        {U::selu,
         "selu",
         0,
         0,
         -3,
         3,
         [](double x) { return 1.0507009873554804934 * (x > 0 ? x : 1.6732632423543772848 * std::expm1(x)); },
         {0}},
        {U::celu, "celu", 1.5, 0, -3, 3, [](double x) { return x > 0 ? x : 1.5 * std::expm1(x / 1.5); }, {}},
        {U::softsign, "softsign", 0, 0, -5, 5, [](double x) { return x / (1 + std::abs(x)); }, {0}},
        {U::logsigmoid, "logsigmoid", 0, 0, -30, 30, [](double x) { return std::log(sigmoid(x)); }, {}},
        {U::mish, "mish", 0, 0, -5, 5, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, {}},
        {U::tanhshrink, "tanhshrink", 0, 0, -3, 3, [](double x) { return x - std::tanh(x); }, {}},
        {U::softshrink,
         "softshrink",
         0.5,
         0,
         -2,
         2,
         [](double x) { return x > 0.5 ? x - 0.5 : (x < -0.5 ? x + 0.5 : 0.0); },
         {-0.5, 0.5}},
        {U::trelu, "trelu", 0.2, -0.5, -2, 2, [](double x) { return x > 0.2 ? x : -0.5; }, {0.2}},
        {U::gelu_sigmoid,
         "gelu_sigmoid",
         0,
         0,
         -3,
         3,
         [k](double x) { return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))); },
         {}},
        {U::quick_gelu, "quick_gelu", 0, 0, -4, 4, [](double x) { return x * sigmoid(1.702 * x); }, {}},
        {U::logcosh, "logcosh", 0, 0, -10, 10, [](double x) { return std::log(std::cosh(x)); }, {}},
        {U::lisht, "lisht", 0, 0, -3, 3, [](double x) { return x * std::tanh(x); }, {}},
    };
}

std::vector<double> sample(const UnaryCase& c, int64_t n) {
    std::vector<double> xs;
    for (double x : random_values(4 * n, c.lo, c.hi, 11)) {
        bool near_kink = false;
        for (double kink : c.kinks) near_kink |= std::abs(x - kink) < 0.05;
        if (!near_kink) xs.push_back(x);
        if (int64_t(xs.size()) == n) break;
    }
    return xs;
}

TEST(CpuUnary, ForwardMatchesDefinitions) {
    for (const auto& c : unary_cases()) {
        const auto x = sample(c, 1000);
        const int64_t n = int64_t(x.size());
        std::vector<double> y(n);
        cpu().unary(0, c.op, DType::f64, n, x.data(), y.data(), c.a, c.b);
        const auto xf = converted<float>(x);
        std::vector<float> yf(n);
        cpu().unary(0, c.op, DType::f32, n, xf.data(), yf.data(), c.a, c.b);
        for (int64_t i = 0; i < n; ++i) {
            const double expected = c.f(x[i]);
            ASSERT_NEAR(y[i], expected, 1e-12 * (1 + std::abs(expected))) << c.name << " at " << x[i];
            ASSERT_NEAR(yf[i], c.f(double(xf[i])), 2e-6 * (1 + std::abs(expected))) << c.name << " f32 at " << x[i];
        }
    }
}

TEST(CpuUnary, BackwardMatchesFiniteDifferences) {
    for (const auto& c : unary_cases()) {
        const auto x = sample(c, 200);
        const int64_t n = int64_t(x.size());
        const auto gy = random_values(n, -1, 1, 12);
        std::vector<double> y(n), gx(n);
        cpu().unary(0, c.op, DType::f64, n, x.data(), y.data(), c.a, c.b);
        cpu().unary_backward(0, c.op, DType::f64, n, x.data(), y.data(), gy.data(), gx.data(), c.a, c.b);
        const double h = 1e-6;
        for (int64_t i = 0; i < n; ++i) {
            std::vector<double> probe{x[i] + h, x[i] - h}, out(2);
            cpu().unary(0, c.op, DType::f64, 2, probe.data(), out.data(), c.a, c.b);
            const double expected = gy[i] * (out[0] - out[1]) / (2 * h);
            ASSERT_NEAR(gx[i], expected, 1e-6 * (1 + std::abs(expected))) << c.name << " at " << x[i];
        }
    }
}

// The registry says which of x and y each gradient reads, and the tape keeps only those: a gradient
// given NaN in place of what it does not read is unchanged. Every code of the registry, on values
// of both signs (a NaN where the op is undefined must stay a NaN).
TEST(CpuUnary, GradientsReadOnlyWhatTheRegistrySays) {
    using fluxion::detail::GradientReads;
    const auto x = random_values(200, -4, 4, 14), gy = random_values(200, -1, 1, 13);
    const int64_t n = int64_t(x.size());
    const std::vector<double> nan(n, std::numeric_limits<double>::quiet_NaN());
    const double a = 0.5, b = 1.5;  // leakyrelu's slope, elu's alpha, clamp's bounds, the power
    for (int code = 0; code < int(be::Unary::count); ++code) {
        const auto op = be::Unary(code);
        std::vector<double> y(n), want(n), got(n);
        cpu().unary(0, op, DType::f64, n, x.data(), y.data(), a, b);
        cpu().unary_backward(0, op, DType::f64, n, x.data(), y.data(), gy.data(), want.data(), a, b);
        const GradientReads reads = fluxion::detail::gradient_reads(op);
        const bool x_read = reads == GradientReads::X || reads == GradientReads::XY;
        const bool y_read = reads == GradientReads::Y || reads == GradientReads::XY;
        cpu().unary_backward(0, op, DType::f64, n, (x_read ? x : nan).data(), (y_read ? y : nan).data(), gy.data(),
                             got.data(), a, b);
        for (int64_t i = 0; i < n; ++i)
            ASSERT_TRUE(std::bit_cast<std::uint64_t>(got[i]) == std::bit_cast<std::uint64_t>(want[i]) ||
                        (std::isnan(got[i]) && std::isnan(want[i])))
                << fluxion::detail::unary_name(op) << " at " << x[i] << ": " << got[i] << " where " << want[i]
                << " was expected; its gradient reads more than the registry says";
    }
}

TEST(CpuUnary, SpecialValues) {
    // softplus stays finite for large |x|; relu, clamp and sign keep NaN; pow with exponent 0 has gradient 0.
    const std::vector<double> x{-1000, 1000, kNaN};
    std::vector<double> y(3);
    cpu().unary(0, be::Unary::softplus, DType::f64, 3, x.data(), y.data(), 0, 0);
    EXPECT_EQ(y[0], 0);
    EXPECT_EQ(y[1], 1000);
    cpu().unary(0, be::Unary::relu, DType::f64, 3, x.data(), y.data(), 0, 0);
    EXPECT_TRUE(std::isnan(y[2]));
    cpu().unary(0, be::Unary::sigmoid, DType::f64, 2, x.data(), y.data(), 0, 0);
    EXPECT_EQ(y[0], 0);
    EXPECT_EQ(y[1], 1);
    const std::vector<double> zero{0.0}, one{1.0};
    std::vector<double> g(1), p(1);
    cpu().unary(0, be::Unary::pow_scalar, DType::f64, 1, zero.data(), p.data(), 0, 0);
    cpu().unary_backward(0, be::Unary::pow_scalar, DType::f64, 1, zero.data(), p.data(), one.data(), g.data(), 0, 0);
    EXPECT_EQ(p[0], 1);
    EXPECT_EQ(g[0], 0);
}

TEST(CpuUnary, IntegersAndUnsupportedTypes) {
    const std::vector<std::int32_t> x{-3, 0, 5, std::numeric_limits<std::int32_t>::min()};
    std::vector<std::int32_t> y(4);
    cpu().unary(0, be::Unary::abs, DType::i32, 4, x.data(), y.data(), 0, 0);
    EXPECT_EQ(y[0], 3);
    EXPECT_EQ(y[2], 5);
    cpu().unary(0, be::Unary::sign, DType::i32, 3, x.data(), y.data(), 0, 0);
    EXPECT_EQ(y, (std::vector<std::int32_t>{-1, 0, 1, y[3]}));
    cpu().unary(0, be::Unary::neg, DType::i32, 3, x.data(), y.data(), 0, 0);
    EXPECT_EQ(y[0], 3);
    try {
        cpu().unary(0, be::Unary::exp, DType::i32, 4, x.data(), y.data(), 0, 0);
        FAIL() << "expected DTypeError";
    } catch (const fluxion::DTypeError& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("exp"), std::string::npos) << message;
        EXPECT_NE(message.find("i32"), std::string::npos) << message;
    }
    EXPECT_THROW(cpu().unary_backward(0, be::Unary::neg, DType::i64, 1, x.data(), x.data(), x.data(), y.data(), 0, 0),
                 fluxion::DTypeError);
}

// ---------------------------------------------------------------- binary and where

double reference_binary(be::Binary op, double a, double b) {
    using B = be::Binary;
    switch (op) {
        case B::add: return a + b;
        case B::sub: return a - b;
        case B::mul: return a * b;
        case B::div: return a / b;
        case B::pow: return std::pow(a, b);
        case B::maximum: return std::max(a, b);
        case B::minimum: return std::min(a, b);
        case B::eq: return a == b;
        case B::ne: return a != b;
        case B::lt: return a < b;
        case B::le: return a <= b;
        case B::gt: return a > b;
        case B::ge: return a >= b;
    }
    return kNaN;
}

// a and b hold every element their views reach; the result is compared elementwise.
void expect_binary(const be::Strided& va, const be::Strided& vb, int64_t a_size, int64_t b_size) {
    auto a = random_values(a_size, 0.5, 2, 21);
    auto b = random_values(b_size, 0.5, 2, 22);
    for (std::size_t i = 0; i < b.size(); i += 3) b[i] = a[i % a.size()];  // some equal pairs for comparisons
    const int64_t n = numel(va);
    for (int op = 0; op <= int(be::Binary::ge); ++op) {
        const auto bop = be::Binary(op);
        const bool comparison = bop >= be::Binary::eq;
        std::vector<double> out(n);
        std::vector<std::uint8_t> flags(n);
        cpu().binary(0, bop, DType::f64, &va, a.data(), &vb, b.data(), comparison ? (void*)flags.data() : out.data());
        for (int64_t i = 0; i < n; ++i) {
            const double expected = reference_binary(bop, a[offset_of(va, i)], b[offset_of(vb, i)]);
            if (comparison) ASSERT_EQ(flags[i], expected) << "op " << op << " element " << i;
            else ASSERT_NEAR(out[i], expected, 1e-14 * std::abs(expected)) << "op " << op << " element " << i;
        }
    }
}

TEST(CpuBinary, BroadcastViewsMatchReference) {
    expect_binary(view({4, 5}), view({4, 5}), 20, 20);                            // both contiguous
    expect_binary(view({4, 5}), view({4, 5}, {0, 0}), 20, 1);                     // scalar on the right
    expect_binary(view({3, 7}, {0, 0}), view({3, 7}), 1, 21);                     // scalar on the left
    expect_binary(view({2, 3, 4}, {4, 0, 1}), view({2, 3, 4}, {0, 1, 0}), 8, 3);  // outer-product broadcast
    expect_binary(view({3, 4}, {1, 3}), view({3, 4}, {0, 1}), 12, 4);             // transposed left operand
    expect_binary(view({64, 33, 40}, {1320, 40, 1}), view({64, 33, 40}, {0, 1, 0}), 64 * 33 * 40, 33);  // threads
    expect_binary(view({200000}), view({200000}, {0}), 200000, 1);  // one long row split among threads
}

TEST(CpuBinary, FloatEdgeCases) {
    const std::vector<float> a{1.0f, static_cast<float>(kNaN), 2.0f};
    const std::vector<float> b{static_cast<float>(kNaN), 1.0f, 3.0f};
    const auto v = view({3});
    std::vector<float> out(3);
    cpu().binary(0, be::Binary::maximum, DType::f32, &v, a.data(), &v, b.data(), out.data());
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_TRUE(std::isnan(out[1]));
    EXPECT_EQ(out[2], 3.0f);
    cpu().binary(0, be::Binary::minimum, DType::f32, &v, a.data(), &v, b.data(), out.data());
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_TRUE(std::isnan(out[1]));
    EXPECT_EQ(out[2], 2.0f);
}

TEST(CpuBinary, IntegerArithmeticNeverTraps) {
    using L = std::numeric_limits<std::int32_t>;
    const std::vector<std::int32_t> a{7, -7, 5, L::min(), 2, -2, 3, L::max()};
    const std::vector<std::int32_t> b{2, 2, 0, -1, 10, 3, -1, 1};
    const auto v = view({8});
    std::vector<std::int32_t> out(8);
    cpu().binary(0, be::Binary::div, DType::i32, &v, a.data(), &v, b.data(), out.data());
    EXPECT_EQ(out, (std::vector<std::int32_t>{3, -3, 0, L::min(), 0, 0, -3, L::max()}));
    cpu().binary(0, be::Binary::pow, DType::i32, &v, a.data(), &v, b.data(), out.data());
    EXPECT_EQ(out[0], 49);
    EXPECT_EQ(out[1], 49);
    EXPECT_EQ(out[2], 1);
    EXPECT_EQ(out[4], 1024);
    EXPECT_EQ(out[5], -8);
    EXPECT_EQ(out[6], 0);  // 3^-1 truncates to 0
    cpu().binary(0, be::Binary::add, DType::i32, &v, a.data(), &v, b.data(), out.data());
    EXPECT_EQ(out[7], L::min());  // wraps
    const std::vector<std::uint8_t> u{250, 3}, w{10, 5};
    std::vector<std::uint8_t> uo(2);
    const auto v2 = view({2});
    cpu().binary(0, be::Binary::add, DType::u8, &v2, u.data(), &v2, w.data(), uo.data());
    EXPECT_EQ(uo, (std::vector<std::uint8_t>{4, 8}));
    cpu().binary(0, be::Binary::lt, DType::u8, &v2, u.data(), &v2, w.data(), uo.data());
    EXPECT_EQ(uo, (std::vector<std::uint8_t>{0, 1}));
}

TEST(CpuBinary, BoolLogic) {
    const std::vector<std::uint8_t> a{0, 0, 1, 1}, b{0, 1, 0, 1};
    const auto v = view({4});
    std::vector<std::uint8_t> out(4);
    cpu().binary(0, be::Binary::add, DType::boolean, &v, a.data(), &v, b.data(), out.data());
    EXPECT_EQ(out, (std::vector<std::uint8_t>{0, 1, 1, 1}));
    cpu().binary(0, be::Binary::mul, DType::boolean, &v, a.data(), &v, b.data(), out.data());
    EXPECT_EQ(out, (std::vector<std::uint8_t>{0, 0, 0, 1}));
    cpu().binary(0, be::Binary::ne, DType::boolean, &v, a.data(), &v, b.data(), out.data());
    EXPECT_EQ(out, (std::vector<std::uint8_t>{0, 1, 1, 0}));
    EXPECT_THROW(cpu().binary(0, be::Binary::sub, DType::boolean, &v, a.data(), &v, b.data(), out.data()),
                 fluxion::DTypeError);
}

TEST(CpuBinary, MismatchedViewsAreRejected) {
    const auto va = view({2, 3}), vb = view({3, 2});
    std::vector<float> a(6), b(6), out(6);
    EXPECT_THROW(cpu().binary(0, be::Binary::add, DType::f32, &va, a.data(), &vb, b.data(), out.data()),
                 fluxion::ShapeError);
    EXPECT_THROW(cpu().binary(0, be::Binary::add, DType::f16, &va, a.data(), &vb, b.data(), out.data()),
                 fluxion::ShapeError);
}

TEST(CpuBinary, WhereBroadcastsAllThree) {
    const std::vector<std::uint8_t> cond{1, 0, 1};  // {3, 1}
    const std::vector<std::int64_t> a{1, 2, 3, 4};  // {1, 4}
    const std::vector<std::int64_t> b{-5};          // scalar
    const auto vc = view({3, 4}, {1, 0}), va = view({3, 4}, {0, 1}), vb = view({3, 4}, {0, 0});
    std::vector<std::int64_t> out(12);
    cpu().where(0, DType::i64, &vc, cond.data(), &va, a.data(), &vb, b.data(), out.data());
    EXPECT_EQ(out, (std::vector<std::int64_t>{1, 2, 3, 4, -5, -5, -5, -5, 1, 2, 3, 4}));
}

// ---------------------------------------------------------------- reduce

template <class T> void expect_reduction(be::Reduce op, DType t, int64_t outer, int64_t n, int64_t inner,
                                         const std::vector<T>& x, double tolerance) {
    const bool index = op == be::Reduce::argmax || op == be::Reduce::argmin;
    std::vector<T> values(outer * inner);
    std::vector<int64_t> indices(outer * inner);
    cpu().reduce(0, op, t, outer, n, inner, x.data(), index ? (void*)indices.data() : values.data());
    for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
            double sum = 0;
            int64_t best = 0;
            for (int64_t j = 0; j < n; ++j) {
                const double v = double(x[(o * n + j) * inner + i]);
                const double current = double(x[(o * n + best) * inner + i]);
                sum += v;
                const bool better = op == be::Reduce::max || op == be::Reduce::argmax ? v > current : v < current;
                if ((better || (std::isnan(v) && !std::isnan(current))) && j > 0) best = j;
            }
            const int64_t at = o * inner + i;
            const double extreme = double(x[(o * n + best) * inner + i]);
            switch (op) {
                case be::Reduce::sum: ASSERT_NEAR(double(values[at]), sum, tolerance * (1 + std::abs(sum))); break;
                case be::Reduce::mean: ASSERT_NEAR(double(values[at]), sum / n, tolerance); break;
                case be::Reduce::max:
                case be::Reduce::min:
                    if (std::isnan(extreme)) ASSERT_TRUE(std::isnan(double(values[at])));
                    else ASSERT_EQ(double(values[at]), extreme);
                    break;
                default: ASSERT_EQ(indices[at], best) << "outer " << o << " inner " << i;
            }
        }
    }
}

TEST(CpuReduce, EveryOpAndLayoutMatchesReference) {
    struct Layout {
        int64_t outer, n, inner;
    };
    for (const Layout l :
         {Layout{3, 17, 1}, Layout{2, 9, 70}, Layout{1, 300000, 1}, Layout{1, 200, 300}, Layout{4, 1, 5}}) {
        const auto x = random_values(l.outer * l.n * l.inner, -3, 3, 31);
        auto rounded = x;
        for (auto& v : rounded) v = std::round(v);  // ties for the arg reductions
        for (int op = 0; op <= int(be::Reduce::argmin); ++op) {
            const auto rop = be::Reduce(op);
            expect_reduction(rop, DType::f64, l.outer, l.n, l.inner, x, 1e-12);
            expect_reduction(rop, DType::f32, l.outer, l.n, l.inner, converted<float>(x), 1e-6);
            expect_reduction(rop, DType::f64, l.outer, l.n, l.inner, rounded, 1e-12);
            if (rop != be::Reduce::mean)
                expect_reduction(rop, DType::i32, l.outer, l.n, l.inner, converted<std::int32_t>(rounded), 0);
        }
    }
}

TEST(CpuReduce, NaNWinsAndFirstNaNIsTheArgument) {
    std::vector<float> x{1, 5, static_cast<float>(kNaN), 7, static_cast<float>(kNaN), 0};
    for (auto op : {be::Reduce::max, be::Reduce::min, be::Reduce::argmax, be::Reduce::argmin})
        expect_reduction(op, DType::f32, 1, 6, 1, x, 0);
    expect_reduction(be::Reduce::argmax, DType::f32, 2, 3, 1, x, 0);
    expect_reduction(be::Reduce::argmax, DType::f32, 1, 3, 2, x, 0);
    std::vector<int64_t> index(1);
    cpu().reduce(0, be::Reduce::argmax, DType::f32, 1, 6, 1, x.data(), index.data());
    EXPECT_EQ(index[0], 2);
    // Rows long enough to be scanned in vector lanes: a NaN in the first lanes, the body or the tail wins.
    for (int64_t at : {3, 500, 998}) {
        std::vector<double> row = random_values(1000, -1, 1, 91);
        row[at] = kNaN;
        for (auto op : {be::Reduce::max, be::Reduce::min, be::Reduce::argmax, be::Reduce::argmin}) {
            expect_reduction(op, DType::f64, 1, 1000, 1, row, 0);
            expect_reduction(op, DType::f32, 1, 1000, 1, converted<float>(row), 0);
        }
    }
    // A long row is split among threads; the NaN in a later slice must still win.
    std::vector<double> long_row(400000, 1.0);
    long_row[350000] = kNaN;
    long_row[10] = 2.0;
    cpu().reduce(0, be::Reduce::argmax, DType::f64, 1, 400000, 1, long_row.data(), index.data());
    EXPECT_EQ(index[0], 350000);
}

TEST(CpuReduce, LongSumsStayAccurate) {
    std::vector<float> x(1 << 22, 0.1f);
    float sum = 0;
    cpu().reduce(0, be::Reduce::sum, DType::f32, 1, int64_t(x.size()), 1, x.data(), &sum);
    EXPECT_NEAR(sum, 0.1f * float(x.size()), 1e-5 * 0.1 * double(x.size()));
}

TEST(CpuReduce, BoolAndBytesAndEmptyAxes) {
    const std::vector<std::uint8_t> flags{0, 1, 1, 0};
    std::uint8_t any = 0;
    cpu().reduce(0, be::Reduce::max, DType::boolean, 1, 4, 1, flags.data(), &any);
    EXPECT_EQ(any, 1);
    int64_t first = -1;
    cpu().reduce(0, be::Reduce::argmax, DType::boolean, 1, 4, 1, flags.data(), &first);
    EXPECT_EQ(first, 1);
    std::uint8_t total = 0;
    EXPECT_THROW(cpu().reduce(0, be::Reduce::sum, DType::boolean, 1, 4, 1, flags.data(), &total), fluxion::DTypeError);
    cpu().reduce(0, be::Reduce::sum, DType::u8, 1, 4, 1, flags.data(), &total);
    EXPECT_EQ(total, 2);
    EXPECT_THROW(cpu().reduce(0, be::Reduce::mean, DType::i32, 1, 1, 1, flags.data(), &total), fluxion::DTypeError);
    std::vector<double> sums(3, -1);
    cpu().reduce(0, be::Reduce::sum, DType::f64, 3, 0, 1, nullptr, sums.data());
    EXPECT_EQ(sums, (std::vector<double>{0, 0, 0}));
    EXPECT_THROW(cpu().reduce(0, be::Reduce::max, DType::f64, 3, 0, 1, nullptr, sums.data()), fluxion::ValueError);
}

// ---------------------------------------------------------------- f16 and bf16 in the elementwise kernels

// The elementwise kernels and the reductions compute f16 and bf16 in their own loops (half.hpp's
// load and store). What they must give is what the f32 kernel gives on the widened operands,
// rounded once: that result, bit for bit (any NaN for a NaN), on values that include NaN, ±inf, ±0,
// the largest finite values and f16's subnormals, in sizes that split among threads.
class HalfElements {
public:
    HalfElements(DType t, int64_t n, unsigned seed, double lo = -4, double hi = 4) : t_(t), bits_(std::size_t(n)) {
        const auto values = random_values(n, lo, hi, seed);
        std::vector<float> f(values.begin(), values.end());
        const float big = t == DType::f16 ? 65504.0f : 3.3e38f, tiny = t == DType::f16 ? 3e-7f : 1e-39f;
        const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, big, -big, tiny, -tiny};
        for (std::size_t i = 0; i < f.size(); i += 97) f[i] = specials[(i / 97) % std::size(specials)];
        cpu().cast(0, DType::f32, t, n, f.data(), bits_.data());
    }
    const void* data() const { return bits_.data(); }
    std::vector<float> widened() const { return widen(t_, bits_); }
    static std::vector<float> widen(DType t, const std::vector<std::uint16_t>& bits) {
        std::vector<float> f(bits.size());
        cpu().cast(0, t, DType::f32, int64_t(bits.size()), bits.data(), f.data());
        return f;
    }
    static std::vector<std::uint16_t> narrow(DType t, const std::vector<float>& f) {
        std::vector<std::uint16_t> bits(f.size());
        cpu().cast(0, DType::f32, t, int64_t(f.size()), f.data(), bits.data());
        return bits;
    }

private:
    DType t_;
    std::vector<std::uint16_t> bits_;
};

// Equal bits, or both NaN (a NaN's payload is not part of the contract).
void expect_same_halves(DType t, const std::vector<std::uint16_t>& got, const std::vector<std::uint16_t>& want,
                        const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    const auto g = HalfElements::widen(t, got), w = HalfElements::widen(t, want);
    for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_TRUE(got[i] == want[i] || (std::isnan(g[i]) && std::isnan(w[i])))
            << fluxion::name(t) << " " << what << " element " << i << ": " << g[i] << " where the f32 kernel gave "
            << w[i];
}

constexpr DType kHalfTypes[] = {DType::f16, DType::bf16};

TEST(CpuHalf, UnaryIsTheF32KernelRoundedOnce) {
    const int64_t n = 3 * be::cpu::kParallelMin + 7;
    const double a = 0.5, b = 1.5;
    for (DType t : kHalfTypes)
        for (int code = 0; code < int(be::Unary::count); ++code) {
            const auto op = be::Unary(code);
            const std::string name = fluxion::detail::unary_name(op);
            const HalfElements x(t, n, 51), gy(t, n, 52, -1, 1);
            std::vector<std::uint16_t> y(n), gx(n);
            cpu().unary(0, op, t, n, x.data(), y.data(), a, b);
            cpu().unary_backward(0, op, t, n, x.data(), y.data(), gy.data(), gx.data(), a, b);
            const auto xf = x.widened(), yf = HalfElements::widen(t, y), gyf = gy.widened();
            std::vector<float> want(n), want_g(n);
            cpu().unary(0, op, DType::f32, n, xf.data(), want.data(), a, b);
            cpu().unary_backward(0, op, DType::f32, n, xf.data(), yf.data(), gyf.data(), want_g.data(), a, b);
            expect_same_halves(t, y, HalfElements::narrow(t, want), name);
            expect_same_halves(t, gx, HalfElements::narrow(t, want_g), name + " gradient");
        }
}

TEST(CpuHalf, BinaryIsTheF32KernelRoundedOnce) {
    struct Views {
        be::Strided a, b;
        int64_t a_size, b_size;
    };
    const Views cases[] = {
        {view({70001}), view({70001}), 70001, 70001},                             // contiguous, among threads
        {view({256, 1024}), view({256, 1024}, {0, 1}), 256 * 1024, 1024},         // a bias row
        {view({3, 7}, {0, 0}), view({3, 7}), 1, 21},                              // a scalar on the left
        {view({2, 3, 4}, {4, 0, 1}), view({2, 3, 4}, {0, 1, 0}), 8, 3},           // an outer product
        {view({40, 50}, {1, 40}), view({40, 50}, {50, 1}), 2000, 2000},           // a transposed operand
    };
    for (DType t : kHalfTypes)
        for (const Views& c : cases)
            for (int code = 0; code <= int(be::Binary::ge); ++code) {
                const auto op = be::Binary(code);
                const bool comparison = op >= be::Binary::eq;
                const int64_t n = numel(c.a);
                const HalfElements a(t, c.a_size, 53), b(t, c.b_size, 54);
                const auto af = a.widened(), bf = b.widened();
                if (comparison) {
                    std::vector<std::uint8_t> got(n), want(n);
                    cpu().binary(0, op, t, &c.a, a.data(), &c.b, b.data(), got.data());
                    cpu().binary(0, op, DType::f32, &c.a, af.data(), &c.b, bf.data(), want.data());
                    ASSERT_EQ(got, want) << fluxion::name(t) << " comparison " << code;
                } else {
                    std::vector<std::uint16_t> got(n);
                    std::vector<float> want(n);
                    cpu().binary(0, op, t, &c.a, a.data(), &c.b, b.data(), got.data());
                    cpu().binary(0, op, DType::f32, &c.a, af.data(), &c.b, bf.data(), want.data());
                    expect_same_halves(t, got, HalfElements::narrow(t, want), "binary op " + std::to_string(code));
                }
            }
}

TEST(CpuHalf, ReductionsAreTheF32KernelRoundedOnce) {
    struct Layout {
        int64_t outer, n, inner;
    };
    for (DType t : kHalfTypes)
        for (const Layout l : {Layout{3, 1000, 1}, Layout{1, 4 * be::cpu::kParallelMin + 5, 1}, Layout{4, 50, 70},
                               Layout{2, 1, 3}}) {
            const int64_t count = l.outer * l.n * l.inner, outs = l.outer * l.inner;
            for (int code = 0; code <= int(be::Reduce::argmin); ++code) {
                const auto op = be::Reduce(code);
                // With NaNs and infinities, and without (a sum of finite values is then finite).
                for (bool specials : {true, false}) {
                    std::vector<std::uint16_t> src(count);
                    const HalfElements with(t, count, 55);
                    if (specials) {
                        std::memcpy(src.data(), with.data(), src.size() * 2);
                    } else {
                        const auto values = random_values(count, -3, 3, 56);
                        src = HalfElements::narrow(t, std::vector<float>(values.begin(), values.end()));
                    }
                    const auto srcf = HalfElements::widen(t, src);
                    const std::string what = std::string("reduce op ") + std::to_string(code) + " of {" +
                                             std::to_string(l.outer) + ", " + std::to_string(l.n) + ", " +
                                             std::to_string(l.inner) + "}";
                    if (op == be::Reduce::argmax || op == be::Reduce::argmin) {
                        std::vector<int64_t> got(outs), want(outs);
                        cpu().reduce(0, op, t, l.outer, l.n, l.inner, src.data(), got.data());
                        cpu().reduce(0, op, DType::f32, l.outer, l.n, l.inner, srcf.data(), want.data());
                        ASSERT_EQ(got, want) << fluxion::name(t) << " " << what;
                    } else {
                        std::vector<std::uint16_t> got(outs);
                        std::vector<float> want(outs);
                        cpu().reduce(0, op, t, l.outer, l.n, l.inner, src.data(), got.data());
                        cpu().reduce(0, op, DType::f32, l.outer, l.n, l.inner, srcf.data(), want.data());
                        expect_same_halves(t, got, HalfElements::narrow(t, want), what);
                    }
                }
            }
        }
}

// ---------------------------------------------------------------- gemm

template <class T>
void expect_gemm(DType t, bool ta, bool tb, double tolerance, int64_t m = 5, int64_t n = 7, int64_t k = 4) {
    const int64_t batch = 3, pad = 2;
    const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    const int64_t sa = (ta ? k : m) * lda, sb = (tb ? n : k) * ldb, sc = m * ldc;
    const auto a = converted<T>(random_values(batch * sa, -1, 1, 41));
    const auto b = converted<T>(random_values(batch * sb, -1, 1, 42));
    const auto c0 = converted<T>(random_values(batch * sc, -1, 1, 43));
    const double alpha = 1.5, beta = -0.5;
    auto c = c0;
    cpu().gemm(0, t, ta, tb, m, n, k, alpha, a.data(), lda, sa, b.data(), ldb, sb, beta, c.data(), ldc, sc, batch);
    for (int64_t p = 0; p < batch; ++p)
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double acc = 0;
                for (int64_t q = 0; q < k; ++q)
                    acc += double(a[p * sa + (ta ? q * lda + i : i * lda + q)]) *
                           double(b[p * sb + (tb ? j * ldb + q : q * ldb + j)]);
                const int64_t at = p * sc + i * ldc + j;
                ASSERT_NEAR(double(c[at]), alpha * acc + beta * double(c0[at]), tolerance)
                    << "trans " << ta << tb << " batch " << p << " (" << i << ", " << j << ")";
            }
    for (int64_t p = 0; p < batch; ++p)  // the padding between rows is untouched
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[p * sc + i * ldc + j], c0[p * sc + i * ldc + j]);
}

TEST(CpuGemm, AllTransposesWithBatchAlphaAndBeta) {
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            expect_gemm<double>(DType::f64, ta, tb, 1e-12);
            expect_gemm<float>(DType::f32, ta, tb, 1e-5);
            // From 2^18 multiply-adds (2^14 without AVX-512) f32 products run in oneDNN's sgemm where
            // it is built in (fx::info() says which): 30·30·20 and 70·70·60 of them, with the same
            // transposes, strides and scalars.
            expect_gemm<double>(DType::f64, ta, tb, 1e-11, 70, 70, 60);
            expect_gemm<float>(DType::f32, ta, tb, 2e-5, 30, 30, 20);
            expect_gemm<float>(DType::f32, ta, tb, 5e-5, 70, 70, 60);
        }
}

// FLUXION_SGEMM puts every f32 product in one library, and fx::info() says which; any other value is
// refused at the first product with the variable named. The variable is read once, so the test
// program runs this test again in processes of their own.
TEST(CpuGemm, FluxionSgemmNamesTheLibrary) {
    if (const char* chosen = std::getenv("FLUXION_SGEMM")) {  // the runs below
        const std::string value = chosen;
        std::vector<float> a(64 * 64, 1.0f), c(64 * 64);
        const auto product = [&] {
            cpu().gemm(0, DType::f32, false, false, 64, 64, 64, 1.0, a.data(), 64, 0, a.data(), 64, 0, 0.0, c.data(),
                       64, 0, 1);
        };
        if (value == "neither") {
            try {
                product();
                ADD_FAILURE() << "FLUXION_SGEMM=neither was accepted";
            } catch (const fluxion::ValueError& e) {
                EXPECT_NE(std::string(e.what()).find("FLUXION_SGEMM=neither names no library"), std::string::npos)
                    << e.what();
            }
            return;
        }
        product();
        EXPECT_EQ(c[0], 64.0f);
        const std::string text = fluxion::info();
        std::printf("%s", text.c_str());
        const std::string expected = value == "onednn" ? "matrix products: f32 in oneDNN's sgemm (FLUXION_SGEMM=onednn)"
                                                       : "matrix products: OpenBLAS, kernel ";
        EXPECT_NE(text.find(expected), std::string::npos) << text;
        return;
    }
    char self[4096] = {};
    ASSERT_GT(::readlink("/proc/self/exe", self, sizeof self - 1), 0);
    const bool onednn = fluxion::info().find("oneDNN") != std::string::npos;
    for (const char* value : {"openblas", "onednn", "neither"}) {
        if (std::string(value) == "onednn" && !onednn) continue;  // refused without oneDNN: nothing to name
        const std::string command = std::string("FLUXION_SGEMM=") + value + " '" + self +
                                    "' --gtest_filter=CpuGemm.FluxionSgemmNamesTheLibrary 2>&1";
        FILE* child = ::popen(command.c_str(), "r");
        ASSERT_NE(child, nullptr);
        std::string output;
        char buffer[4096];
        while (std::fgets(buffer, sizeof buffer, child)) output += buffer;
        EXPECT_EQ(::pclose(child), 0) << value << ":\n" << output;
        EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << value << ":\n" << output;
    }
}

// oneDNN's AVX2 sgemm reads an untransposed B in place for products of few rows; B's rows a
// multiple of 512 floats apart are then 4K-aliased and the product half as fast (the wide MLP's
// gy·W2, 256×1024×1024), so those go to OpenBLAS; the same product with B transposed, with more
// rows, or with B 1,000 wide stays in oneDNN, and with AVX-512 nothing changes (gemm.cpp).
TEST(CpuGemm, FewRowsTimesAnAliasedUntransposedBRunInOpenBlasWithAvx2) {
    if (be::cpu::sgemm_choice() != be::cpu::SgemmChoice::by_size) GTEST_SKIP() << "FLUXION_SGEMM names a library, or no oneDNN";
    const bool avx2 = !be::cpu::onednn_avx512();
    EXPECT_EQ(be::cpu::sgemm_in_onednn(false, 256, 1024, 1024, 1024), !avx2);
    EXPECT_EQ(be::cpu::sgemm_in_onednn(false, 64, 2048, 512, 2048), !avx2);
    EXPECT_EQ(be::cpu::sgemm_in_onednn(false, 128, 1024, 1024, 1536), !avx2);
    EXPECT_TRUE(be::cpu::sgemm_in_onednn(true, 256, 1024, 1024, 1024));
    EXPECT_TRUE(be::cpu::sgemm_in_onednn(false, 384, 1024, 1024, 1024));
    EXPECT_TRUE(be::cpu::sgemm_in_onednn(false, 256, 1000, 1024, 1000));
    EXPECT_FALSE(be::cpu::sgemm_in_onednn(false, 16, 16, 16, 16));  // below 2^14 multiply-adds
    // Attention's per-head products (49×49×16) in oneDNN only without AVX-512, where OpenBLAS has
    // no small-matrix kernels.
    EXPECT_EQ(be::cpu::sgemm_in_onednn(true, 49, 49, 16, 16), avx2);
    EXPECT_EQ(be::cpu::sgemm_onednn_min_macs(), avx2 ? 16384.0 : 262144.0);
    if (avx2) {
        const std::string text = fluxion::info();
        EXPECT_NE(text.find("but for up to 256 rows times an untransposed B"), std::string::npos) << text;
        EXPECT_NE(text.find("f32 from 2^14 multiply-adds in oneDNN's sgemm"), std::string::npos) << text;
    }
}

// A batch of small products goes to the threads product by product (above 2^23 FLOPs in all, enough
// with OMP_WAIT_POLICY=passive too): each product is the same single-threaded call as alone, so the
// results are those of the products one by one, bit for bit, for results one after another and side
// by side in rows (attention's heads); results that overlap are never split.
TEST(CpuGemm, BatchesOfSmallProductsEqualTheProductsOneByOne) {
    const int64_t m = 20, n = 20, k = 36, batch = 600;
    const auto a = random_values(batch * m * k, -1, 1, 44);
    const auto b = random_values(batch * k * n, -1, 1, 45);
    auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    const std::vector<float> fa = as_float(a), fb = as_float(b);
    struct Layout {
        int64_t ldc, sc;
        float beta;
    };
    for (const Layout& l : {Layout{n, m * n, 0.0f}, Layout{batch * n, n, 0.0f}, Layout{n, 0, 1.0f}}) {
        const std::size_t size = std::size_t(l.sc == 0 ? m * n : m * l.ldc * (l.sc == n ? 1 : batch));
        std::vector<float> whole(size, 0.5f), one_by_one(size, 0.5f);
        cpu().gemm(0, DType::f32, false, false, m, n, k, 1.0, fa.data(), k, m * k, fb.data(), n, k * n, l.beta,
                   whole.data(), l.ldc, l.sc, batch);
        for (int64_t p = 0; p < batch; ++p)
            cpu().gemm(0, DType::f32, false, false, m, n, k, 1.0, fa.data() + p * m * k, k, 0, fb.data() + p * k * n, n,
                       0, l.beta, one_by_one.data() + p * l.sc, l.ldc, 0, 1);
        EXPECT_EQ(whole, one_by_one) << "ldc " << l.ldc << ", stride " << l.sc;
    }
}

TEST(CpuGemm, ZeroBetaIgnoresGarbageInC) {
    const std::vector<float> a{1, 2, 3, 4}, b{1, 0, 0, 1};
    std::vector<float> c(4, static_cast<float>(kNaN));
    cpu().gemm(0, DType::f32, false, false, 2, 2, 2, 1.0, a.data(), 2, 0, b.data(), 2, 0, 0.0, c.data(), 2, 0, 1);
    EXPECT_EQ(c, a);
    std::vector<float> empty(4, static_cast<float>(kNaN));  // k = 0: C = beta C, and beta = 0 clears it
    cpu().gemm(0, DType::f32, false, false, 2, 2, 0, 1.0, a.data(), 0, 0, b.data(), 2, 0, 0.0, empty.data(), 2, 0, 1);
    EXPECT_EQ(empty, (std::vector<float>{0, 0, 0, 0}));
}

// k = 0 with another beta: C = beta C, computed by fluxion itself, not BLAS (a mutant that dropped
// beta there survived every other test).
TEST(CpuGemm, AnEmptyProductScalesCByBeta) {
    const std::vector<float> a(1), b(1);
    std::vector<float> c{1, -2, 3, 4, 5, 6};
    cpu().gemm(0, DType::f32, false, false, 2, 3, 0, 1.0, a.data(), 0, 0, b.data(), 3, 0, -0.5, c.data(), 3, 0, 1);
    EXPECT_EQ(c, (std::vector<float>{-0.5f, 1, -1.5f, -2, -2.5f, -3}));
}

TEST(CpuGemm, RejectsIntegersAndShortRows) {
    std::vector<std::int32_t> a(4), b(4), c(4);
    EXPECT_THROW(
        cpu().gemm(0, DType::i32, false, false, 2, 2, 2, 1, a.data(), 2, 0, b.data(), 2, 0, 0, c.data(), 2, 0, 1),
        fluxion::DTypeError);
    std::vector<float> f(4);
    EXPECT_THROW(  // lda = 1 is shorter than a row of A
        cpu().gemm(0, DType::f32, false, false, 2, 2, 2, 1, f.data(), 1, 0, f.data(), 2, 0, 0, f.data(), 2, 0, 1),
        fluxion::ValueError);
}

// f16 and bf16 products (fluxion's packing kernel where the CPU has AVX2, gemm_half.cpp; else f32
// copies) give the f32 product of the widened operands, rounded once: bit for bit where every f32
// sum is exact (small integers), else within one unit in the last place of the result plus the
// spread of summing in another order. The shapes cross the kernel's edges: 6 × 16 tiles cut short,
// blocks 256 deep and 96 tall, every transpose, padded rows, a batch, alpha and beta.
std::vector<std::uint16_t> half_values(DType t, int64_t n, unsigned seed, bool integers) {
    auto v = random_values(n, -2.49, 2.49, seed);
    if (integers)
        for (auto& x : v) x = std::round(x);
    const std::vector<float> f(v.begin(), v.end());
    return HalfElements::narrow(t, f);
}

TEST(CpuHalf, GemmIsTheF32ProductOfTheWidenedOperandsRoundedOnce) {
    struct Shape {
        int64_t m, n, k;
    };
    const int64_t batch = 2, pad = 3;
    for (DType t : kHalfTypes)
        for (const Shape& s : {Shape{5, 7, 4}, Shape{70, 70, 60}, Shape{97, 35, 300}, Shape{13, 600, 520}})
            for (bool integers : {true, false})
                for (bool ta : {false, true})
                    for (bool tb : {false, true}) {
                        const int64_t lda = (ta ? s.m : s.k) + pad, ldb = (tb ? s.k : s.n) + pad, ldc = s.n + pad;
                        const int64_t sa = (ta ? s.k : s.m) * lda, sb = (tb ? s.n : s.k) * ldb, sc = s.m * ldc;
                        const auto a = half_values(t, batch * sa, 61, integers);
                        const auto b = half_values(t, batch * sb, 62, integers);
                        const auto c0 = half_values(t, batch * sc, 63, integers);
                        const double alpha = integers ? 2.0 : 1.5, beta = integers ? -1.0 : -0.5;
                        auto c = c0;
                        cpu().gemm(0, t, ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, sa, b.data(), ldb, sb, beta,
                                   c.data(), ldc, sc, batch);
                        const auto af = HalfElements::widen(t, a), bf = HalfElements::widen(t, b);
                        auto wanted = HalfElements::widen(t, c0);
                        cpu().gemm(0, DType::f32, ta, tb, s.m, s.n, s.k, alpha, af.data(), lda, sa, bf.data(), ldb,
                                   sb, beta, wanted.data(), ldc, sc, batch);
                        const auto want = HalfElements::narrow(t, wanted);
                        const std::string what = std::string(integers ? "integers " : "") + std::to_string(s.m) +
                                                 "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " trans " +
                                                 std::to_string(ta) + std::to_string(tb);
                        if (integers) {
                            expect_same_halves(t, c, want, what);
                            continue;
                        }
                        const auto got = HalfElements::widen(t, c), exact = HalfElements::widen(t, want);
                        const double ulp = t == DType::bf16 ? 0x1p-7 : 0x1p-10;
                        for (int64_t p = 0; p < batch; ++p)
                            for (int64_t i = 0; i < s.m; ++i)
                                for (int64_t j = 0; j < ldc; ++j) {
                                    const int64_t at = p * sc + i * ldc + j;
                                    if (j >= s.n) {  // the padding between rows is untouched
                                        ASSERT_EQ(c[at], c0[at]) << what;
                                        continue;
                                    }
                                    double magnitude = std::abs(beta * double(HalfElements::widen(t, {c0[at]})[0]));
                                    for (int64_t q = 0; q < s.k; ++q)
                                        magnitude += std::abs(alpha * af[p * sa + (ta ? q * lda + i : i * lda + q)] *
                                                              bf[p * sb + (tb ? j * ldb + q : q * ldb + j)]);
                                    const double bound = ulp * std::abs(exact[at]) + 0x1p-22 * magnitude;
                                    ASSERT_LE(std::abs(got[at] - exact[at]), bound)
                                        << fluxion::name(t) << " " << what << " batch " << p << " (" << i << ", " << j
                                        << ")";
                                }
                    }
}

// A batch of small f16/bf16 products is split between threads by product (widen.cpp), each product
// then packed on its thread: the results are those of the products one by one, bit for bit.
TEST(CpuHalf, BatchesOfSmallProductsEqualTheProductsOneByOne) {
    const int64_t m = 20, n = 20, k = 36, batch = 600;
    for (DType t : kHalfTypes) {
        const auto a = half_values(t, batch * m * k, 64, false), b = half_values(t, batch * k * n, 65, false);
        std::vector<std::uint16_t> whole(batch * m * n), one_by_one(batch * m * n);
        cpu().gemm(0, t, false, true, m, n, k, 1.0, a.data(), k, m * k, b.data(), k, k * n, 0.0, whole.data(), n,
                   m * n, batch);
        for (int64_t p = 0; p < batch; ++p)
            cpu().gemm(0, t, false, true, m, n, k, 1.0, a.data() + p * m * k, k, 0, b.data() + p * k * n, k, 0, 0.0,
                       one_by_one.data() + p * m * n, n, 0, 1);
        EXPECT_EQ(whole, one_by_one) << fluxion::name(t);
    }
}

// A NaN or an infinity in an operand reaches the results it takes part in, and only those.
TEST(CpuHalf, GemmCarriesNanAndInfinityIntoTheirRowsAndColumns) {
    const int64_t m = 7, n = 19, k = 300;
    for (DType t : kHalfTypes) {
        std::vector<float> af(m * k, 1.0f), bf(k * n, 0.5f);
        af[2 * k + 290] = std::numeric_limits<float>::quiet_NaN();  // row 2, in the second block of the depth
        bf[5 * n + 17] = std::numeric_limits<float>::infinity();    // column 17
        const auto a = HalfElements::narrow(t, af), b = HalfElements::narrow(t, bf);
        std::vector<std::uint16_t> c(m * n);
        cpu().gemm(0, t, false, false, m, n, k, 1.0, a.data(), k, 0, b.data(), n, 0, 0.0, c.data(), n, 0, 1);
        const auto got = HalfElements::widen(t, c);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                const float v = got[i * n + j];
                if (i == 2) EXPECT_TRUE(std::isnan(v)) << fluxion::name(t) << " (" << i << ", " << j << ") = " << v;
                else if (j == 17) EXPECT_EQ(v, std::numeric_limits<float>::infinity()) << fluxion::name(t);
                else EXPECT_EQ(v, 150.0f) << fluxion::name(t) << " (" << i << ", " << j << ")";
            }
    }
}

// fx::info() names the kernel that f16 and bf16 products run in.
TEST(CpuHalf, InfoNamesTheHalfProductKernel) {
    const std::string text = fluxion::info();
    if (be::cpu::onednn_amx())
        EXPECT_NE(text.find("bf16 products and convolutions: oneDNN's bf16 kernels on AMX tiles"), std::string::npos)
            << text;
    else if (be::cpu::onednn_bf16_preferred())
        EXPECT_NE(text.find("bf16 products and convolutions: oneDNN's bf16 kernels"), std::string::npos) << text;
    else if (be::cpu::gemm_half_preferred())
        EXPECT_NE(text.find("f16 and bf16 products: converted to f32 as they are packed"), std::string::npos) << text;
    else EXPECT_NE(text.find("f16 and bf16 products: widened to f32 copies"), std::string::npos) << text;
}

// ---------------------------------------------------------------- conv2d

be::Conv2dShape conv_shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                           int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h,
                           int64_t dil_w, int64_t groups) {
    be::Conv2dShape cs{};
    cs.n = n, cs.c = c, cs.h = h, cs.w = w, cs.k = k, cs.r = r, cs.s = s;
    cs.stride_h = stride_h, cs.stride_w = stride_w, cs.pad_h = pad_h, cs.pad_w = pad_w;
    cs.dil_h = dil_h, cs.dil_w = dil_w, cs.groups = groups;
    cs.oh = (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1;
    cs.ow = (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1;
    return cs;
}

// Calls f(x index, w index, y index) for every multiply of the convolution: the naive seven loops.
void for_each_tap(const be::Conv2dShape& s, const std::function<void(int64_t, int64_t, int64_t)>& f) {
    const int64_t cg = s.c / s.groups, kg = s.k / s.groups;
    for (int64_t b = 0; b < s.n; ++b)
        for (int64_t k = 0; k < s.k; ++k)
            for (int64_t oy = 0; oy < s.oh; ++oy)
                for (int64_t ox = 0; ox < s.ow; ++ox)
                    for (int64_t ci = 0; ci < cg; ++ci)
                        for (int64_t kr = 0; kr < s.r; ++kr)
                            for (int64_t ks = 0; ks < s.s; ++ks) {
                                const int64_t iy = oy * s.stride_h - s.pad_h + kr * s.dil_h;
                                const int64_t ix = ox * s.stride_w - s.pad_w + ks * s.dil_w;
                                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                                const int64_t channel = k / kg * cg + ci;
                                f(((b * s.c + channel) * s.h + iy) * s.w + ix, ((k * cg + ci) * s.r + kr) * s.s + ks,
                                  ((b * s.k + k) * s.oh + oy) * s.ow + ox);
                            }
}

void expect_conv(const be::Conv2dShape& s) {
    const int64_t nx = s.n * s.c * s.h * s.w, nw = s.k * (s.c / s.groups) * s.r * s.s, ny = s.n * s.k * s.oh * s.ow;
    const auto x = random_values(nx, -1, 1, 51), w = random_values(nw, -1, 1, 52), gy = random_values(ny, -1, 1, 53);
    std::vector<double> y_ref(ny, 0), gx_ref(nx, 0), gw_ref(nw, 0);
    for_each_tap(s, [&](int64_t xi, int64_t wi, int64_t yi) {
        y_ref[yi] += x[xi] * w[wi];
        gx_ref[xi] += gy[yi] * w[wi];
        gw_ref[wi] += gy[yi] * x[xi];
    });
    std::vector<double> y(ny, kNaN), gx(nx, kNaN), gw(nw, kNaN);
    cpu().conv2d(0, DType::f64, &s, x.data(), w.data(), y.data());
    cpu().conv2d_backward_input(0, DType::f64, &s, gy.data(), w.data(), gx.data());
    cpu().conv2d_backward_weight(0, DType::f64, &s, x.data(), gy.data(), gw.data());
    for (int64_t i = 0; i < ny; ++i) ASSERT_NEAR(y[i], y_ref[i], 1e-10) << "y " << i;
    for (int64_t i = 0; i < nx; ++i) ASSERT_NEAR(gx[i], gx_ref[i], 1e-10) << "gx " << i;
    for (int64_t i = 0; i < nw; ++i) ASSERT_NEAR(gw[i], gw_ref[i], 1e-9) << "gw " << i;
    // The backward kernels are the adjoints of the forward one in each argument.
    const double forward = dot(y, gy);
    EXPECT_NEAR(dot(x, gx), forward, 1e-9 * (1 + std::abs(forward)));
    EXPECT_NEAR(dot(w, gw), forward, 1e-9 * (1 + std::abs(forward)));

    // f32 takes oneDNN's kernels where libfluxion has them (blocked layouts, reorders), else the same
    // im2col + GEMM. Each output is a sum of m products; its exact value on the f32 inputs is the f64
    // reference below. Rounding each partial sum to f32 adds errors of at most u = 2^-24 of it, and
    // partial sums of products of random sign grow as sqrt(terms), so the total stays within a few
    // u·sqrt(m)·sqrt(Σ product²) in any summation order. One missing product (about sqrt(Σ
    // product²)/sqrt(m)) exceeds that for every m below ~1e6.
    const auto xf = converted<float>(x), wf = converted<float>(w), gyf = converted<float>(gy);
    const std::vector<double> xr(xf.begin(), xf.end()), wr(wf.begin(), wf.end()), gyr(gyf.begin(), gyf.end());
    std::vector<double> y32(ny, 0), gx32(nx, 0), gw32(nw, 0), y_sq(ny, 0), gx_sq(nx, 0), gw_sq(nw, 0);
    std::vector<int64_t> y_m(ny, 0), gx_m(nx, 0), gw_m(nw, 0);
    for_each_tap(s, [&](int64_t xi, int64_t wi, int64_t yi) {
        const double pyv = xr[xi] * wr[wi], pgx = gyr[yi] * wr[wi], pgw = gyr[yi] * xr[xi];
        y32[yi] += pyv, y_sq[yi] += pyv * pyv, ++y_m[yi];
        gx32[xi] += pgx, gx_sq[xi] += pgx * pgx, ++gx_m[xi];
        gw32[wi] += pgw, gw_sq[wi] += pgw * pgw, ++gw_m[wi];
    });
    std::vector<float> yf(ny, NAN), gxf(nx, NAN), gwf(nw, NAN);
    cpu().conv2d(0, DType::f32, &s, xf.data(), wf.data(), yf.data());
    cpu().conv2d_backward_input(0, DType::f32, &s, gyf.data(), wf.data(), gxf.data());
    cpu().conv2d_backward_weight(0, DType::f32, &s, xf.data(), gyf.data(), gwf.data());
    const auto expect_f32 = [](const char* what, const std::vector<float>& got, const std::vector<double>& want,
                               const std::vector<double>& sq, const std::vector<int64_t>& m) {
        constexpr double u = 0x1p-24, ulps = 4;
        for (std::size_t i = 0; i < got.size(); ++i)
            ASSERT_NEAR(got[i], want[i], ulps * u * std::sqrt(double(m[i]) * sq[i]) + 1e-30)
                << "f32 " << what << " " << i;
    };
    expect_f32("y", yf, y32, y_sq, y_m);
    expect_f32("gx", gxf, gx32, gx_sq, gx_m);
    expect_f32("gw", gwf, gw32, gw_sq, gw_m);
}

TEST(CpuConv, MatchesNaiveLoops) {
    expect_conv(conv_shape(2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1));  // same padding
    expect_conv(conv_shape(3, 4, 9, 8, 6, 3, 2, 2, 1, 1, 2, 1, 2, 2));  // stride, asymmetric padding, dilation, groups
    expect_conv(conv_shape(2, 6, 7, 7, 6, 3, 3, 2, 2, 2, 0, 2, 1, 6));  // depthwise
    expect_conv(conv_shape(1, 5, 4, 4, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1));  // 1x1, a single image
    expect_conv(conv_shape(2, 2, 3, 3, 2, 3, 3, 3, 3, 0, 0, 1, 1, 1));  // one output pixel
    // Channel counts that fill vector blocks, as in real networks (oneDNN's blocked layouts).
    expect_conv(conv_shape(3, 16, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1));
    expect_conv(conv_shape(2, 1, 12, 12, 6, 5, 5, 1, 1, 0, 0, 1, 1, 1));   // LeNet-5's first layer
    expect_conv(conv_shape(2, 32, 8, 8, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1));   // stride 2, rows left unread
    expect_conv(conv_shape(2, 32, 7, 7, 32, 3, 3, 1, 1, 2, 2, 2, 2, 32));  // depthwise, dilated
}

// Few channels, no padding and output rows of whole 8-pixel vectors: f32 takes the direct kernels
// (conv_direct.cpp) for the passes their rules pick. The shapes cover each kernel's tiles and their
// remainders: output rows of 1, 2 and 4 vectors, filters split into several tiles, kernel widths 2
// to 7, and input rows that are and are not a multiple of 8 (the input gradient's overlapping
// last segment).
TEST(CpuConv, DirectKernelShapesMatchNaiveLoops) {
    expect_conv(conv_shape(2, 6, 12, 12, 16, 5, 5, 1, 1, 0, 0, 1, 1, 1));  // LeNet-5's second layer
    expect_conv(conv_shape(3, 2, 11, 18, 5, 3, 3, 1, 1, 0, 0, 1, 1, 1));   // rows of 2 vectors; 18-pixel input rows
    expect_conv(conv_shape(2, 1, 9, 12, 30, 2, 5, 1, 1, 0, 0, 1, 1, 1));   // 30 filters: several tiles each pass
    expect_conv(conv_shape(2, 2, 14, 14, 3, 7, 7, 1, 1, 0, 0, 1, 1, 1));   // 7×7
    expect_conv(conv_shape(2, 3, 4, 34, 7, 3, 3, 1, 1, 0, 0, 1, 1, 1));    // rows of 4 vectors
    expect_conv(conv_shape(1, 1, 8, 10, 2, 1, 3, 1, 1, 0, 0, 1, 1, 1));    // one image, one-row kernel
}

// A fused replay's convolution with bias and relu (the table's conv2d_epilogue) gives the bits of the eager calls it
// stands for: the convolution, the broadcast add of the bias, then relu as x < 0 ? 0 : x, which
// keeps NaN. One image holds a NaN, so that part of the output is NaN.
TEST(CpuConv, FusedBiasAndReluGiveTheEagerBits) {
    for (const auto& s : {conv_shape(2, 1, 12, 12, 6, 5, 5, 1, 1, 0, 0, 1, 1, 1),    // direct kernel
                          conv_shape(2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1)}) {  // oneDNN or im2col
        const int64_t nx = s.n * s.c * s.h * s.w, nw = s.k * s.c * s.r * s.s, plane = s.oh * s.ow;
        const int64_t ny = s.n * s.k * plane;
        auto x = converted<float>(random_values(nx, -1, 1, 61));
        const auto w = converted<float>(random_values(nw, -1, 1, 62)),
                   b = converted<float>(random_values(s.k, -1, 1, 63));
        x[nx - 1] = NAN;  // read by the last output pixel of every filter
        std::vector<float> eager(ny), fused(ny);
        cpu().conv2d(0, DType::f32, &s, x.data(), w.data(), eager.data());
        for (int64_t i = 0; i < ny; ++i) {
            const float v = eager[i] + b[i / plane % s.k];
            eager[i] = v < 0 ? 0.0f : v;
        }
        be::ConvEpilogue e;
        e.bias = e.activation = true;
        e.op = be::Unary::relu;
        cpu().conv2d_epilogue(0, DType::f32, &s, x.data(), w.data(), b.data(), &e, fused.data());
        EXPECT_TRUE(std::isnan(eager[ny - 1]));
        for (int64_t i = 0; i < ny; ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(fused[i]), std::bit_cast<uint32_t>(eager[i]))
                << "c " << s.c << ", y " << i;
    }
}

// The direct kernels on bf16 and f16 cells (widened as they are read, rounded as they are written)
// give the bits of the widened path: f32 copies, the f32 direct kernel, rounded back; the forward
// pass with bias and relu, those of the eager calls after it in the 16-bit type. Image 0 holds
// ordinary values; image 1 the type's smallest subnormal among zeros, so that sums round to ±0
// (relu must see the rounded -0); image 2 a NaN and infinities (its rows take the exact rounding,
// the others the fast one). Each pass the f32 kernels decline, the 16-bit ones decline too.
TEST(CpuConv, HalfCellsInTheDirectKernelsGiveTheWidenedPathsBits) {
    using be::cpu::ConvPass;
    if (!be::cpu::direct_conv2d_takes(ConvPass::forward, conv_shape(1, 1, 12, 12, 6, 5, 5, 1, 1, 0, 0, 1, 1, 1)))
        GTEST_SKIP() << "libfluxion was built without AVX2 and FMA: no direct convolution kernels";
    for (const DType t : {DType::bf16, DType::f16}) {
        for (const auto& s : {conv_shape(3, 1, 28, 28, 6, 5, 5, 1, 1, 0, 0, 1, 1, 1),     // LeNet-5's first layer
                              conv_shape(3, 6, 12, 12, 16, 5, 5, 1, 1, 0, 0, 1, 1, 1),    // its second
                              conv_shape(3, 3, 20, 20, 8, 3, 3, 1, 1, 0, 0, 1, 1, 1)}) {  // 2 vectors a row
            const int64_t plane = s.c * s.h * s.w, nx = s.n * plane, nw = s.k * s.c * s.r * s.s;
            const int64_t ny = s.n * s.k * s.oh * s.ow;
            const float smallest = std::ldexp(1.0f, t == DType::bf16 ? -133 : -24);
            auto x = converted<float>(random_values(nx, -1, 1, 71));
            for (int64_t i = plane; i < 2 * plane; ++i) x[i] = i % 7 ? 0.0f : i % 2 ? smallest : -smallest;
            x[2 * plane + 5] = NAN;
            x[2 * plane + plane / 2] = INFINITY;
            x[nx - 1] = -INFINITY;
            const auto w = converted<float>(random_values(nw, -0.45, 0.45, 72));
            const auto gy = converted<float>(random_values(ny, -1, 1, 73));
            auto b = converted<float>(random_values(s.k, -1, 1, 74));
            b[0] = -0.0f;  // keeps the sums' -0
            const auto cells = [&](const std::vector<float>& v) {
                std::vector<std::uint16_t> out(v.size());
                cpu().cast(0, DType::f32, t, int64_t(v.size()), v.data(), out.data());
                return out;
            };
            const auto wide = [&](const std::vector<std::uint16_t>& v) {
                std::vector<float> out(v.size());
                cpu().cast(0, t, DType::f32, int64_t(v.size()), v.data(), out.data());
                return out;
            };
            const auto x16 = cells(x), w16 = cells(w), gy16 = cells(gy), b16 = cells(b);
            const auto xw = wide(x16), ww = wide(w16), gyw = wide(gy16);
            const std::string what = std::string(name(t)) + " c " + std::to_string(s.c) + " ";
            // pass, its two operands in f32 and in t, and the size of its result.
            const auto check = [&](ConvPass pass, const char* label, const std::vector<float>& a,
                                   const std::vector<float>& bb, const std::vector<std::uint16_t>& a16,
                                   const std::vector<std::uint16_t>& b16_, int64_t n) {
                std::vector<float> f32(n);
                std::vector<std::uint16_t> got(n, 0x1234);
                const bool taken = be::cpu::direct_conv2d(pass, s, a.data(), bb.data(), f32.data());
                ASSERT_EQ(be::cpu::direct_conv2d(t, pass, s, a16.data(), b16_.data(), got.data()), taken)
                    << what << label << ": taken in f32 but not in 16 bits, or the other way (no F16C?)";
                if (!taken) return;
                const auto want = cells(f32);
                for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << what << label << ", element " << i;
            };
            check(ConvPass::forward, "forward", xw, ww, x16, w16, ny);
            check(ConvPass::backward_input, "input gradient", gyw, ww, gy16, w16, nx);
            check(ConvPass::backward_weight, "weight gradient", xw, gyw, x16, gy16, nw);
            if (HasFatalFailure() || !be::cpu::direct_conv2d_takes(ConvPass::forward, s)) continue;

            // With bias and relu: the eager add and relu in t after the rounded convolution.
            std::vector<float> y(ny);
            ASSERT_TRUE(be::cpu::direct_conv2d(ConvPass::forward, s, xw.data(), ww.data(), y.data()));
            const auto y16 = cells(y);
            std::vector<std::uint16_t> want(ny), fused(ny, 0x1234);
            const be::Strided yv{4, {s.n, s.k, s.oh, s.ow}, {s.k * s.oh * s.ow, s.oh * s.ow, s.ow, 1}};
            const be::Strided bv{4, {s.n, s.k, s.oh, s.ow}, {0, 1, 0, 0}};
            cpu().binary(0, be::Binary::add, t, &yv, y16.data(), &bv, b16.data(), want.data());
            cpu().unary(0, be::Unary::relu, t, ny, want.data(), want.data(), 0, 0);
            ASSERT_TRUE(be::cpu::direct_conv2d(t, ConvPass::forward, s, x16.data(), w16.data(), fused.data(),
                                               b16.data(), true));
            int64_t signed_zeros = 0;
            for (int64_t i = 0; i < ny; ++i) {
                ASSERT_EQ(fused[i], want[i]) << what << "forward with bias and relu, y " << i;
                signed_zeros += fused[i] == 0x8000;
            }
            // relu without the bias: the rounded sum decides, so tiny negative sums stay -0.
            cpu().unary(0, be::Unary::relu, t, ny, y16.data(), want.data(), 0, 0);
            ASSERT_TRUE(be::cpu::direct_conv2d(t, ConvPass::forward, s, x16.data(), w16.data(), fused.data(), nullptr,
                                               true));
            for (int64_t i = 0; i < ny; ++i) {
                ASSERT_EQ(fused[i], want[i]) << what << "forward with relu, y " << i;
                signed_zeros += fused[i] == 0x8000;
            }
            EXPECT_GT(signed_zeros, 0) << what << ": no sum rounded to -0, so relu's order went untested";
        }
    }
}

TEST(CpuConv, ManyImagesAreSplitIntoChunks) {
    // About 0.7 M workspace elements per image: chunks of 2, 2, 2 and 1 images.
    expect_conv(conv_shape(7, 8, 94, 94, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2));
}

TEST(CpuConv, RejectsBadShapes) {
    auto s = conv_shape(1, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    s.groups = 2;  // 3 channels do not divide into 2 groups
    std::vector<float> buffer(1000);
    EXPECT_THROW(cpu().conv2d(0, DType::f32, &s, buffer.data(), buffer.data(), buffer.data()), fluxion::ShapeError);
    s.groups = 1;
    EXPECT_THROW(cpu().conv2d(0, DType::i32, &s, buffer.data(), buffer.data(), buffer.data()), fluxion::DTypeError);
}

// ---------------------------------------------------------------- pooling

be::Pool2dShape pool_shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride_h,
                           int64_t stride_w, int64_t pad_h, int64_t pad_w) {
    be::Pool2dShape s{};
    s.n = n, s.c = c, s.h = h, s.w = w, s.kh = kh, s.kw = kw;
    s.stride_h = stride_h, s.stride_w = stride_w, s.pad_h = pad_h, s.pad_w = pad_w;
    s.oh = (h + 2 * pad_h - kh) / stride_h + 1;
    s.ow = (w + 2 * pad_w - kw) / stride_w + 1;
    return s;
}

void expect_pool(const be::Pool2dShape& s) {
    const int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.oh * s.ow;
    auto x = random_values(nx, -1, 1, 61);
    for (int64_t i = 0; i < nx; i += 5) x[i] = x[(i * 7) % nx];  // repeated values: the first maximum wins
    const auto gy = random_values(ny, -1, 1, 62);
    std::vector<double> max_ref(ny), mean_ref(ny), gmax_ref(nx, 0), gmean_ref(nx, 0);
    for (int64_t p = 0; p < s.n * s.c; ++p)
        for (int64_t oy = 0; oy < s.oh; ++oy)
            for (int64_t ox = 0; ox < s.ow; ++ox) {
                const int64_t yi = (p * s.oh + oy) * s.ow + ox;
                double best = -INFINITY, sum = 0;
                int64_t best_at = -1;
                for (int64_t ky = 0; ky < s.kh; ++ky)
                    for (int64_t kx = 0; kx < s.kw; ++kx) {
                        const int64_t iy = oy * s.stride_h - s.pad_h + ky, ix = ox * s.stride_w - s.pad_w + kx;
                        if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;  // padding: zero for the mean
                        const int64_t xi = (p * s.h + iy) * s.w + ix;
                        sum += x[xi];
                        if (x[xi] > best) best = x[xi], best_at = xi;
                    }
                max_ref[yi] = best;
                mean_ref[yi] = sum / double(s.kh * s.kw);
                gmax_ref[best_at] += gy[yi];
                for (int64_t ky = 0; ky < s.kh; ++ky)
                    for (int64_t kx = 0; kx < s.kw; ++kx) {
                        const int64_t iy = oy * s.stride_h - s.pad_h + ky, ix = ox * s.stride_w - s.pad_w + kx;
                        if (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w)
                            gmean_ref[(p * s.h + iy) * s.w + ix] += gy[yi] / double(s.kh * s.kw);
                    }
            }
    std::vector<double> y(ny), gx(nx, kNaN);
    cpu().pool2d(0, be::Pool::max, DType::f64, &s, x.data(), y.data());
    for (int64_t i = 0; i < ny; ++i) ASSERT_EQ(y[i], max_ref[i]) << "max " << i;
    cpu().pool2d_backward(0, be::Pool::max, DType::f64, &s, x.data(), y.data(), gy.data(), gx.data());
    for (int64_t i = 0; i < nx; ++i) ASSERT_NEAR(gx[i], gmax_ref[i], 1e-12) << "max backward " << i;
    cpu().pool2d(0, be::Pool::mean, DType::f64, &s, x.data(), y.data());
    for (int64_t i = 0; i < ny; ++i) ASSERT_NEAR(y[i], mean_ref[i], 1e-12) << "mean " << i;
    cpu().pool2d_backward(0, be::Pool::mean, DType::f64, &s, x.data(), y.data(), gy.data(), gx.data());
    for (int64_t i = 0; i < nx; ++i) ASSERT_NEAR(gx[i], gmean_ref[i], 1e-12) << "mean backward " << i;
    EXPECT_NEAR(dot(y, gy), dot(x, gx), 1e-10);  // mean pooling is linear: backward is its adjoint
}

TEST(CpuPool, MaxAndMeanWithPadding) {
    expect_pool(pool_shape(2, 3, 8, 8, 2, 2, 2, 2, 0, 0));
    expect_pool(pool_shape(2, 3, 7, 9, 2, 2, 2, 2, 0, 0));      // odd sizes leave cells that no window covers
    expect_pool(pool_shape(1, 2, 6, 6, 2, 2, 2, 2, 1, 1));      // padded on every side
    expect_pool(pool_shape(1, 2, 7, 6, 3, 3, 2, 2, 1, 1));      // padded borders
    expect_pool(pool_shape(2, 2, 5, 9, 3, 2, 1, 3, 1, 1));      // overlapping windows, unequal strides
    expect_pool(pool_shape(2, 3, 6, 7, 3, 3, 1, 1, 1, 1));      // stride 1 (its own compiled loops), padded
    expect_pool(pool_shape(64, 32, 14, 14, 2, 2, 2, 2, 0, 0));  // enough work for threads
    expect_pool(pool_shape(3, 2, 7, 8, 2, 2, 2, 2, 0, 0));      // windows tile the columns, a row left over
    expect_pool(pool_shape(2, 3, 9, 12, 3, 3, 3, 3, 0, 0));     // 3×3 windows tiling the input
    expect_pool(pool_shape(2, 2, 11, 6, 3, 3, 3, 3, 0, 0));     // 3×3, two rows left over
    expect_pool(pool_shape(5, 7, 30, 30, 2, 2, 2, 2, 0, 0));    // planes in several chunks
}

// Windows that tile the columns (2×2 and 3×3, unpadded, stride the window) take their own loops
// (pool.cpp). They must compute, bit for bit, what the general loops compute: those run for the same
// cells stored with one more column that no window reaches. Ties, signed zeros and NaNs (several in a
// window) decide which value and which cell win, and the order of a mean's sums its rounding.
// Tiled windows run their own passes (and 2×2 max windows' gradient its own vector kernel, 8, 4
// and 1 windows a step: 15 windows a row take all three).
TEST(CpuPool, TiledWindowsMatchTheGeneralLoopsBitForBit) {
    for (const auto& [k, windows] : {std::pair<int64_t, int64_t>{2, 6}, {2, 15}, {3, 6}}) {
        const auto tiled = pool_shape(3, 4, 5 * k + 1, windows * k, k, k, k, k, 0, 0);
        auto general = tiled;
        general.w += 1;  // the same windows; the general loops run
        const int64_t nx = tiled.n * tiled.c * tiled.h * tiled.w, ny = tiled.n * tiled.c * tiled.oh * tiled.ow;
        std::vector<float> x = converted<float>(random_values(nx, -2, 2, 91));
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (int64_t i = 0; i < nx; ++i) {
            if (i % 7 == 0) x[i] = std::round(x[i]);  // ties between cells of a window
            if (i % 11 == 0) x[i] = i % 2 ? -0.0f : 0.0f;
            if (i % 37 == 0 || i % 41 == 0) x[i] = nan;
        }
        std::vector<float> wide(nx + tiled.n * tiled.c * tiled.h, 5.0f);  // the extra column: never read
        for (int64_t r = 0; r < tiled.n * tiled.c * tiled.h; ++r)
            std::copy_n(x.begin() + r * tiled.w, tiled.w, wide.begin() + r * general.w);
        const auto gy = converted<float>(random_values(ny, -1, 1, 92));
        for (const be::Pool op : {be::Pool::max, be::Pool::mean}) {
            std::vector<float> y(ny), y_ref(ny), gx(nx, nan), gx_wide(wide.size(), nan);
            cpu().pool2d(0, op, DType::f32, &tiled, x.data(), y.data());
            cpu().pool2d(0, op, DType::f32, &general, wide.data(), y_ref.data());
            for (int64_t i = 0; i < ny; ++i)
                ASSERT_EQ(std::bit_cast<std::uint32_t>(y[i]), std::bit_cast<std::uint32_t>(y_ref[i]))
                    << "k " << k << " op " << int(op) << " output " << i << ": " << y[i] << " vs " << y_ref[i];
            cpu().pool2d_backward(0, op, DType::f32, &tiled, x.data(), y.data(), gy.data(), gx.data());
            cpu().pool2d_backward(0, op, DType::f32, &general, wide.data(), y_ref.data(), gy.data(), gx_wide.data());
            for (int64_t r = 0; r < tiled.n * tiled.c * tiled.h; ++r)
                for (int64_t c = 0; c < tiled.w; ++c) {
                    const float got = gx[r * tiled.w + c], want = gx_wide[r * general.w + c];
                    ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
                        << "k " << k << " op " << int(op) << " row " << r << " column " << c << ": " << got << " vs "
                        << want;
                }
        }
    }
}

// Every window of plane p holds the same four cells, p's digits in base 5 over {-0, +0, 1, NaN,
// another NaN}: 625 planes give every tie of zeros and NaNs at every position, in each of the 2×2
// kernel's paths (8, 4 and 1 windows a step: 15 windows a row). Forward and gradient must pick the
// cell the general loops pick, down to the NaN's bits and zero's sign.
TEST(CpuPool, TiledMaxBreaksEveryTieAsTheGeneralLoops) {
    const auto tiled = pool_shape(625, 1, 2, 30, 2, 2, 2, 2, 0, 0);
    auto general = tiled;
    general.w += 1;
    const float values[5] = {-0.0f, 0.0f, 1.0f, std::bit_cast<float>(0x7fc00000u), std::bit_cast<float>(0xffc00123u)};
    std::vector<float> x(625 * 2 * 30), wide(625 * 2 * 31, 7.0f);
    for (int64_t p = 0; p < 625; ++p)
        for (int64_t r = 0; r < 2; ++r)
            for (int64_t c = 0; c < 30; ++c) {
                int64_t digit = p;
                for (int64_t k = 0; k < r * 2 + c % 2; ++k) digit /= 5;
                x[(p * 2 + r) * 30 + c] = wide[(p * 2 + r) * 31 + c] = values[digit % 5];
            }
    std::vector<float> y(625 * 15), y_ref(y.size()), gy(y.size()), gx(x.size()), gx_wide(wide.size());
    for (std::size_t i = 0; i < gy.size(); ++i) gy[i] = float(i % 13) - 6.0f;
    cpu().pool2d(0, be::Pool::max, DType::f32, &tiled, x.data(), y.data());
    cpu().pool2d(0, be::Pool::max, DType::f32, &general, wide.data(), y_ref.data());
    for (std::size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(y[i]), std::bit_cast<std::uint32_t>(y_ref[i])) << "window " << i;
    cpu().pool2d_backward(0, be::Pool::max, DType::f32, &tiled, x.data(), y.data(), gy.data(), gx.data());
    cpu().pool2d_backward(0, be::Pool::max, DType::f32, &general, wide.data(), y_ref.data(), gy.data(), gx_wide.data());
    for (int64_t r = 0; r < 625 * 2; ++r)
        for (int64_t c = 0; c < 30; ++c)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(gx[r * 30 + c]), std::bit_cast<std::uint32_t>(gx_wide[r * 31 + c]))
                << "row " << r << " column " << c;
}

// A fused replay's max-pool gradient followed by relu's (x being relu's output) is the two calls'.
TEST(CpuPool, MaxGradientWithReluGivesThePoolsThenRelusBits) {
    const auto s = pool_shape(2, 3, 9, 30, 2, 2, 2, 2, 0, 0);
    const int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.oh * s.ow;
    std::vector<float> x = converted<float>(random_values(nx, -1, 2, 93));
    for (int64_t i = 0; i < nx; ++i) {
        x[i] = x[i] < 0 ? 0.0f : x[i];            // relu's output
        if (i % 5 == 0) x[i] = std::round(x[i]);  // ties, and windows whose maximum is 0
        if (i % 43 == 0) x[i] = std::numeric_limits<float>::quiet_NaN();
    }
    const auto gy = converted<float>(random_values(ny, -1, 1, 94));
    std::vector<float> y(ny), pooled(nx), want(nx), got(nx);
    cpu().pool2d(0, be::Pool::max, DType::f32, &s, x.data(), y.data());
    cpu().pool2d_backward(0, be::Pool::max, DType::f32, &s, x.data(), y.data(), gy.data(), pooled.data());
    cpu().unary_backward(0, be::Unary::relu, DType::f32, nx, x.data(), x.data(), pooled.data(), want.data(), 0, 0);
    if (!be::cpu::max_pool_2x2_backward(s, x.data(), y.data(), gy.data(), got.data(), true))
        GTEST_SKIP() << "libfluxion was built without AVX2: no vector 2x2 max-pool kernel";
    for (int64_t i = 0; i < nx; ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i])) << "cell " << i;
}

// bf16 and f16 cells pooled in their own type give the bits of the widened path (f32 copies, the
// f32 kernel, rounded back): the every-tie planes above, gradients of every sign, 3 input rows (the
// last below every window) and 15 windows a row (the 8-, 4- and 1-window paths); the gradient with
// relu's folded in as the widened gradient with relu's applied after.
TEST(CpuPool, HalfMaxGivesTheWidenedPathsBits) {
    const auto s = pool_shape(625, 1, 3, 30, 2, 2, 2, 2, 0, 0);
    const int64_t nx = 625 * 3 * 30, ny = 625 * 15;
    for (DType t : {DType::bf16, DType::f16}) {
        const std::uint16_t values[5] = {0x8000, 0x0000, std::uint16_t(t == DType::bf16 ? 0x3f80 : 0x3c00),
                                         std::uint16_t(t == DType::bf16 ? 0x7fc0 : 0x7e00),
                                         std::uint16_t(t == DType::bf16 ? 0xffc1 : 0xfe01)};
        std::vector<std::uint16_t> x(nx), gy(ny), y(ny), gx(nx, 0x1234), y_want(ny), gx_want(nx);
        for (int64_t p = 0; p < 625; ++p)
            for (int64_t r = 0; r < 3; ++r)
                for (int64_t c = 0; c < 30; ++c) {
                    int64_t digit = p;
                    for (int64_t k = 0; k < (r % 2) * 2 + c % 2; ++k) digit /= 5;
                    x[(p * 3 + r) * 30 + c] = values[digit % 5];
                }
        std::vector<float> wide_x(nx), wide_gy(ny), wide_y(ny), wide_gx(nx);
        for (int64_t i = 0; i < ny; ++i) wide_gy[i] = float(i % 13) - 6.0f;
        cpu().cast(0, DType::f32, t, ny, wide_gy.data(), gy.data());
        cpu().cast(0, t, DType::f32, nx, x.data(), wide_x.data());
        cpu().pool2d(0, be::Pool::max, DType::f32, &s, wide_x.data(), wide_y.data());
        cpu().pool2d_backward(0, be::Pool::max, DType::f32, &s, wide_x.data(), wide_y.data(), wide_gy.data(),
                              wide_gx.data());
        cpu().cast(0, DType::f32, t, ny, wide_y.data(), y_want.data());
        cpu().cast(0, DType::f32, t, nx, wide_gx.data(), gx_want.data());
        if (!be::cpu::max_pool_2x2_forward(t, s, x.data(), y.data()))
            GTEST_SKIP() << "libfluxion was built without AVX2 (or F16C): no vector 2x2 max-pool kernel";
        ASSERT_TRUE(be::cpu::max_pool_2x2_backward(t, s, x.data(), y.data(), gy.data(), gx.data(), false));
        for (int64_t i = 0; i < ny; ++i) ASSERT_EQ(y[i], y_want[i]) << name(t) << " window " << i;
        for (int64_t i = 0; i < nx; ++i) ASSERT_EQ(gx[i], gx_want[i]) << name(t) << " cell " << i;

        cpu().unary_backward(0, be::Unary::relu, DType::f32, nx, wide_x.data(), wide_x.data(), wide_gx.data(),
                             wide_gx.data(), 0, 0);
        cpu().cast(0, DType::f32, t, nx, wide_gx.data(), gx_want.data());
        std::fill(gx.begin(), gx.end(), std::uint16_t(0x1234));
        ASSERT_TRUE(be::cpu::max_pool_2x2_backward(t, s, x.data(), y.data(), gy.data(), gx.data(), true));
        for (int64_t i = 0; i < nx; ++i) ASSERT_EQ(gx[i], gx_want[i]) << name(t) << " cell " << i << " with relu";
    }
}

TEST(CpuPool, MaxLetsNaNWin) {
    const auto s = pool_shape(1, 1, 2, 2, 2, 2, 2, 2, 0, 0);
    const std::vector<float> x{1, static_cast<float>(kNaN), 3, 2};
    float y = 0;
    cpu().pool2d(0, be::Pool::max, DType::f32, &s, x.data(), &y);
    EXPECT_TRUE(std::isnan(y));
    const float gy = 1;
    std::vector<float> gx(4);
    cpu().pool2d_backward(0, be::Pool::max, DType::f32, &s, x.data(), &y, &gy, gx.data());
    EXPECT_EQ(gx, (std::vector<float>{0, 1, 0, 0}));
}

// ---------------------------------------------------------------- softmax

TEST(CpuSoftmax, MatchesNaiveAndSumsToOne) {
    struct Layout {
        int64_t outer, n, inner;
    };
    for (const Layout l : {Layout{4, 10, 1}, Layout{3, 6, 5}, Layout{2, 5, 130}, Layout{512, 100, 1}}) {
        auto x = random_values(l.outer * l.n * l.inner, -5, 5, 71);
        x[0] = 1000;  // a large logit must not overflow
        for (bool log : {false, true}) {
            std::vector<double> y(x.size());
            cpu().softmax(0, log, DType::f64, l.outer, l.n, l.inner, x.data(), y.data());
            for (int64_t o = 0; o < l.outer; ++o)
                for (int64_t i = 0; i < l.inner; ++i) {
                    const auto at = [&](int64_t j) { return (o * l.n + j) * l.inner + i; };
                    double m = -INFINITY, s = 0, total = 0;
                    for (int64_t j = 0; j < l.n; ++j) m = std::max(m, x[at(j)]);
                    for (int64_t j = 0; j < l.n; ++j) s += std::exp(x[at(j)] - m);
                    for (int64_t j = 0; j < l.n; ++j) {
                        const double log_p = x[at(j)] - m - std::log(s);
                        ASSERT_NEAR(y[at(j)], log ? log_p : std::exp(log_p), 1e-12 * (log ? 1 + std::abs(log_p) : 1));
                        total += log ? std::exp(y[at(j)]) : y[at(j)];
                    }
                    ASSERT_NEAR(total, 1.0, 1e-12);
                }
        }
    }
}

TEST(CpuSoftmax, BackwardMatchesFiniteDifferences) {
    struct Layout {
        int64_t outer, n, inner;
    };
    for (const Layout l : {Layout{2, 7, 1}, Layout{2, 4, 3}}) {
        const int64_t size = l.outer * l.n * l.inner;
        const auto x = random_values(size, -2, 2, 81), gy = random_values(size, -1, 1, 82);
        for (bool log : {false, true}) {
            std::vector<double> y(size), gx(size), probe(size), out(size);
            cpu().softmax(0, log, DType::f64, l.outer, l.n, l.inner, x.data(), y.data());
            cpu().softmax_backward(0, log, DType::f64, l.outer, l.n, l.inner, y.data(), gy.data(), gx.data());
            const double h = 1e-6;
            for (int64_t e = 0; e < size; ++e) {
                probe = x;
                probe[e] += h;
                cpu().softmax(0, log, DType::f64, l.outer, l.n, l.inner, probe.data(), out.data());
                const double up = dot(out, gy);
                probe[e] -= 2 * h;
                cpu().softmax(0, log, DType::f64, l.outer, l.n, l.inner, probe.data(), out.data());
                const double expected = (up - dot(out, gy)) / (2 * h);
                ASSERT_NEAR(gx[e], expected, 1e-7) << (log ? "logsoftmax" : "softmax") << " element " << e;
            }
        }
    }
}

// f32 rows of every length up to 80 (every position of a vector's last masked lane), across the
// 1,024-term blocks of the sums, and with a -inf entry (a masked score): forward and backward
// against the f64 kernel on the same values, within what f32 rounding allows (u = 2^-24: the row's
// sum, 4u·√n relative, and exp's argument, u·|x - max|). A lane left out of a sum or a tail left
// unwritten is off by far more.
TEST(CpuSoftmax, F32RowsOfEveryLengthMatchF64) {
    const double u = std::ldexp(1.0, -24);
    std::vector<int64_t> lengths;
    for (int64_t n = 1; n <= 80; ++n) lengths.push_back(n);
    for (int64_t n : {1023, 1024, 1025, 2049}) lengths.push_back(n);
    for (const int64_t n : lengths) {
        const int64_t rows = 3, size = rows * n;
        std::vector<float> x = converted<float>(random_values(size, -8, 8, unsigned(90 + n)));
        std::vector<float> gy = converted<float>(random_values(size, -1, 1, unsigned(190 + n)));
        if (n >= 3) x[n + n / 2] = -std::numeric_limits<float>::infinity();  // row 1
        const std::vector<double> xd(x.begin(), x.end()), gyd(gy.begin(), gy.end());
        for (bool log : {false, true}) {
            SCOPED_TRACE(std::string(log ? "logsoftmax" : "softmax") + ", rows of " + std::to_string(n));
            std::vector<float> y(size), gx(size);
            std::vector<double> yd(size), gxd(size);
            cpu().softmax(0, log, DType::f32, rows, n, 1, x.data(), y.data());
            cpu().softmax(0, log, DType::f64, rows, n, 1, xd.data(), yd.data());
            // The gradient from the f32 forward's values, in both types.
            const std::vector<double> y32(y.begin(), y.end());
            cpu().softmax_backward(0, log, DType::f32, rows, n, 1, y.data(), gy.data(), gx.data());
            cpu().softmax_backward(0, log, DType::f64, rows, n, 1, y32.data(), gyd.data(), gxd.data());
            for (int64_t r = 0; r < rows; ++r) {
                double top = -INFINITY, scale = 0;
                for (int64_t j = 0; j < n; ++j) top = std::max(top, xd[r * n + j]);
                for (int64_t j = 0; j < n; ++j) {
                    const int64_t i = r * n + j;
                    scale += std::abs(gyd[i]) * (log ? 1.0 : std::abs(y32[i]));
                }
                for (int64_t j = 0; j < n; ++j) {
                    const int64_t i = r * n + j;
                    if (std::isinf(xd[i])) {
                        ASSERT_EQ(y[i], log ? -INFINITY : 0.0f) << "column " << j;
                        continue;
                    }
                    const double spread = 4 * u * (std::sqrt(double(n)) + std::abs(xd[i] - top) + 4);
                    const double bound = log ? spread + 4 * u * std::abs(yd[i]) : spread * yd[i];
                    ASSERT_NEAR(y[i], yd[i], bound) << "row " << r << ", column " << j;
                    const double weight = log ? std::exp(y32[i]) : std::abs(y32[i]);
                    const double g_bound = 8 * u * std::sqrt(double(n)) * (std::abs(gyd[i]) + weight * scale) + 1e-30;
                    ASSERT_NEAR(gx[i], gxd[i], g_bound) << "gradient, row " << r << ", column " << j;
                }
            }
        }
    }
}

// ---------------------------------------------------------------- optimisers

template <class T> void expect_step(be::Optimiser rule, const be::OptimiserStep& hp, T p, T g, T s1, T s2, T want_p,
                                    T want_s1, T want_s2, double tolerance) {
    const DType t = sizeof(T) == 4 ? DType::f32 : DType::f64;
    cpu().optimiser_step(0, rule, t, 1, &p, &g, &s1, &s2, nullptr, &hp);
    EXPECT_NEAR(p, want_p, tolerance) << "rule " << int(rule);
    EXPECT_NEAR(s1, want_s1, tolerance) << "rule " << int(rule);
    EXPECT_NEAR(s2, want_s2, tolerance) << "rule " << int(rule);
}

TEST(CpuOptimiser, StepsMatchHandComputedValues) {
    using O = be::Optimiser;
    be::OptimiserStep hp;
    hp.eta = 0.1, hp.rho = 0.9, hp.beta1 = 0.9, hp.beta2 = 0.999, hp.epsilon = 1e-8, hp.decay = 0.01, hp.t = 2;
    // p = 1, g = 0.5, s1 = 0.2, s2 = 0.04 before the step.
    for (double tol : {1e-12, 1e-6}) {
        const auto check = [&](O rule, double want_p, double want_s1, double want_s2) {
            if (tol < 1e-9) expect_step<double>(rule, hp, 1.0, 0.5, 0.2, 0.04, want_p, want_s1, want_s2, tol);
            else
                expect_step<float>(rule, hp, 1.0f, 0.5f, 0.2f, 0.04f, float(want_p), float(want_s1), float(want_s2),
                                   tol);
        };
        check(O::descent, 1 - 0.1 * 0.5, 0.2, 0.04);
        check(O::momentum, 1 - 0.1 * 0.68, 0.68, 0.04);  // s1 = 0.9 * 0.2 + 0.5
        check(O::nesterov, 1 - 0.1 * (0.5 + 0.9 * 0.68), 0.68, 0.04);
        const double rms = 0.9 * 0.2 + 0.1 * 0.25;  // 0.205
        check(O::rmsprop, 1 - 0.1 * 0.5 / (std::sqrt(rms) + 1e-8), rms, 0.04);
        const double m = 0.9 * 0.2 + 0.1 * 0.5, v = 0.999 * 0.04 + 0.001 * 0.25;  // 0.23, 0.04021
        const double update = 0.1 * (m / (1 - 0.81)) / (std::sqrt(v / (1 - 0.999 * 0.999)) + 1e-8);
        check(O::adam, 1 - update, m, v);
        check(O::adamw, 1 * (1 - 0.1 * 0.01) - update, m, v);
    }
}

// The CPU's optimiser steps run with subnormals flushed to zero (optimiser.cpp says why: a first
// moment decaying in the subnormal range made Adam's step 15 times slower): a subnormal first moment
// with a zero gradient becomes 0, where IEEE arithmetic would keep 0.9 of it, while normal states
// step as always. The caller's floating-point mode is left as it was, on the calling thread and so
// for the code after the step: subnormal arithmetic still gives subnormals there. Through the one-
// tensor entry (on several threads), the multi-tensor one and mixed precision's.
TEST(CpuOptimiser, SubnormalStatesFlushToZeroAndTheCallersModeIsKept) {
    const int64_t n = 100000;
    const float subnormal = 1e-39f;
    ASSERT_EQ(std::fpclassify(subnormal), FP_SUBNORMAL);
    be::OptimiserStep hp;
    hp.eta = 0.01, hp.beta1 = 0.9, hp.beta2 = 0.999, hp.epsilon = 1e-8, hp.t = 5;
    const auto expect_flushed = [&](const char* entry, const std::vector<float>& p, const std::vector<float>& m,
                                    const std::vector<float>& v) {
        for (int64_t i = 0; i < int64_t(m.size()); i += 991) {
            ASSERT_EQ(m[i], 0.0f) << entry << ": the subnormal first moment " << i << " was not flushed";
            ASSERT_FLOAT_EQ(v[i], 0.999f * 1e-6f) << entry << ", " << i;
            ASSERT_EQ(p[i], 1.0f) << entry << ", " << i;  // a zero first moment moves nothing
        }
        volatile float tiny = 1e-38f;
        EXPECT_EQ(std::fpclassify(tiny * 0.5f), FP_SUBNORMAL) << entry << " left the caller flushing subnormals";
    };
    std::vector<float> p(n, 1.0f), g(n, 0.0f), m(n, subnormal), v(n, 1e-6f);
    cpu().optimiser_step(0, be::Optimiser::adam, DType::f32, n, p.data(), g.data(), m.data(), v.data(), nullptr, &hp);
    expect_flushed("optimiser_step", p, m, v);

    std::fill(m.begin(), m.end(), subnormal);
    std::fill(v.begin(), v.end(), 1e-6f);
    const int64_t sizes[] = {n / 2, n / 2};
    const be::OptimiserStep* steps[] = {&hp, &hp};
    void* const tensors[] = {p.data(), g.data(), m.data(), v.data(), nullptr,
                             p.data() + n / 2, g.data() + n / 2, m.data() + n / 2, v.data() + n / 2, nullptr};
    cpu().optimiser_steps(0, be::Optimiser::adam, DType::f32, 2, sizes, steps, tensors);
    expect_flushed("optimiser_steps", p, m, v);

    std::fill(m.begin(), m.end(), subnormal);
    std::fill(v.begin(), v.end(), 1e-6f);
    std::vector<std::uint16_t> g16(n, 0), copy(n, 0);
    void* const mixed[] = {p.data(), g16.data(), m.data(), v.data(), nullptr, copy.data()};
    cpu().mixed_optimiser_steps(0, be::Optimiser::adam, DType::bf16, 1, &n, steps, 1.0, mixed);
    expect_flushed("mixed_optimiser_steps", p, m, v);
    EXPECT_EQ(copy[0], 0x3f80) << "the bf16 copy of the parameter 1";
}

TEST(CpuOptimiser, LargeBuffersAndMissingState) {
    const int64_t n = 100000;
    std::vector<float> p(n, 1.0f), g(n, 2.0f), s1(n, 0.0f), s2(n, 0.0f);
    be::OptimiserStep hp;
    hp.eta = 0.01, hp.beta1 = 0.9, hp.beta2 = 0.999, hp.epsilon = 1e-8, hp.t = 1;
    cpu().optimiser_step(0, be::Optimiser::adam, DType::f32, n, p.data(), g.data(), s1.data(), s2.data(), nullptr, &hp);
    for (int64_t i = 0; i < n; i += 997) EXPECT_NEAR(p[i], 0.99f, 1e-6);  // Adam's first step moves by eta
    const auto step = [&](be::Optimiser rule, void* state1, void* state2) {
        cpu().optimiser_step(0, rule, DType::f32, n, p.data(), g.data(), state1, state2, nullptr, &hp);
    };
    EXPECT_THROW(step(be::Optimiser::adam, s1.data(), nullptr), fluxion::ValueError);
    EXPECT_THROW(step(be::Optimiser::momentum, nullptr, nullptr), fluxion::ValueError);
    EXPECT_THROW(step(be::Optimiser::amsgrad, s1.data(), s2.data()), fluxion::ValueError);  // no third state
    EXPECT_NEAR(p[0], 0.99f, 1e-6);  // the refused steps changed nothing
}

}  // namespace
