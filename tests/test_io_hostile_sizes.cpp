// test_io_hostile_sizes.cpp — safetensors files of every dtype the reader knows, and headers that
// declare huge shapes (2^60 elements, products past int64 and uint64, data offsets beyond the
// file): every such file is a clear IOError, and loading one never allocates beyond the file's size
// (checked in a child process with little address space to spare: reliability/load_under_memory_limit).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "test_io_support.hpp"

namespace {

std::string u64le(std::uint64_t n) {
    std::string s(8, '\0');
    std::memcpy(s.data(), &n, 8);
    return s;
}

std::string file_with(const std::string& header, const std::string& data = "") {
    return u64le(header.size()) + header + data;
}

std::string one_tensor(const std::string& dtype, const std::string& shape, std::uint64_t begin, std::uint64_t end) {
    return R"({"t": {"dtype": ")" + dtype + R"(", "shape": [)" + shape + R"(], "data_offsets": [)" +
           std::to_string(begin) + ", " + std::to_string(end) + "]}}";
}

std::map<std::string, fx::Tensor> load(const std::string& bytes) {
    return fx::load_state_from_memory(std::as_bytes(std::span(bytes.data(), bytes.size())), "hostile.safetensors");
}

struct FormatDType {
    const char* name;
    fx::DType dtype;
};
const std::vector<FormatDType> kDTypes = {
    {"F64", fx::DType::f64}, {"F32", fx::DType::f32}, {"F16", fx::DType::f16}, {"BF16", fx::DType::bf16},
    {"I64", fx::DType::i64}, {"I32", fx::DType::i32}, {"U8", fx::DType::u8},   {"BOOL", fx::DType::boolean}};

void expect_io_error(const std::string& bytes, const std::string& fragment) {
    try {
        load(bytes);
        ADD_FAILURE() << "accepted; expected an IOError containing: " << fragment;
    } catch (const fx::IOError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(fragment), std::string::npos) << m;
        EXPECT_NE(m.find("\"hostile.safetensors\""), std::string::npos) << m;
    }
}

TEST(IOHostileSizes, EveryDTypeLoadsWithItsBytes) {
    for (const auto& d : kDTypes) {
        SCOPED_TRACE(d.name);
        const std::size_t bytes = 3 * fx::itemsize(d.dtype);
        std::string data(bytes, '\0');
        for (std::size_t i = 0; i < bytes; ++i)
            data[i] = static_cast<char>(d.dtype == fx::DType::boolean ? i % 2 : i + 1);
        const auto state = load(file_with(one_tensor(d.name, "3", 0, bytes), data));
        const fx::Tensor& t = state.at("t");
        EXPECT_EQ(t.dtype(), d.dtype);
        EXPECT_EQ(t.shape(), (fx::Shape{3}));
        EXPECT_EQ(std::memcmp(t.data_ptr(), data.data(), bytes), 0) << "the bytes are copied as they are";
    }
}

TEST(IOHostileSizes, HugeDeclaredShapesOfEveryDTypeAreClearErrors) {
    const std::uint64_t two60 = std::uint64_t{1} << 60;
    for (const auto& d : kDTypes) {
        SCOPED_TRACE(d.name);
        const std::uint64_t huge = two60 * fx::itemsize(d.dtype);  // at most 2^63: no overflow
        expect_io_error(file_with(one_tensor(d.name, std::to_string(two60), 0, 0)),
                        "needs " + std::to_string(huge) + " bytes, but its data_offsets [0, 0) hold 0");
        expect_io_error(file_with(one_tensor(d.name, std::to_string(two60), 0, huge), std::string(64, '\0')),
                        "needs bytes [0, " + std::to_string(huge) + ") of a data section that has only 64 bytes");
        expect_io_error(file_with(one_tensor(d.name, "2147483648, 2147483648, 2147483648", 0, 0)),
                        "whose size in bytes does not fit in 64 bits");
        expect_io_error(file_with(one_tensor(d.name, "1", std::uint64_t{1} << 62, (std::uint64_t{1} << 62) + 8),
                                  std::string(8, '\0')),
                        "of a data section that has only 8 bytes");
    }
    // Past int64 but within uint64: the byte count is still exact, and still refused.
    expect_io_error(file_with(one_tensor("U8", "3037000500, 3037000500", 0, 0)),
                    "needs 9223372037000250000 bytes, but its data_offsets [0, 0) hold 0");
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FLUXION_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FLUXION_TEST_SANITIZED 1
#endif
#endif

// The helper's exit status and output.
std::pair<int, std::string> run_limited(const std::vector<std::string>& args) {
    std::string command = FLUXION_LOAD_UNDER_MEMORY_LIMIT;
    for (const auto& a : args) command += " '" + a + "'";
    command += " 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return {-1, "popen failed"};
    std::string out;
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    const int status = ::pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(IOHostileSizes, NothingIsAllocatedBeyondTheFileSize) {
#ifdef FLUXION_TEST_SANITIZED
    GTEST_SKIP() << "sanitizers reserve terabytes of address space, so an address space limit cannot be set";
#endif
    constexpr const char* kSpareMiB = "256";
    // The control: under this limit a 1 GiB allocation fails, so an eager reader would be caught.
    const auto [control, control_out] = run_limited({kSpareMiB, "--allocate=" + std::to_string(1u << 30)});
    ASSERT_EQ(control, 0) << control_out;

    io_test::ScratchDir dir;
    std::vector<std::string> args{kSpareMiB};
    const std::vector<std::pair<std::string, std::string>> files = {
        // Sizes an allocator might grant (1 GiB, 16 GiB) and ones it never would (2^40, 2^63 bytes).
        {"1GiB", file_with(one_tensor("F32", std::to_string(1u << 28), 0, 1u << 30), std::string(16, '\0'))},
        {"16GiB", file_with(one_tensor("F64", std::to_string(std::uint64_t{1} << 31), 0, std::uint64_t{1} << 34))},
        {"1TiB", file_with(one_tensor("U8", "1048576, 1048576", 0, std::uint64_t{1} << 40), std::string(4, '\0'))},
        {"2^60", file_with(one_tensor("I64", std::to_string(std::uint64_t{1} << 60), 0, 0))},
        {"1GiB_truncated", file_with(one_tensor("BF16", std::to_string(1u << 29), 0, 1u << 30)).substr(0, 40)},
    };
    for (const auto& [name, bytes] : files) {
        io_test::write_bytes(dir / (name + ".safetensors"), bytes);
        args.push_back((dir / (name + ".safetensors")).string());
    }
    const auto [status, out] = run_limited(args);
    EXPECT_EQ(status, 0) << out;
    for (const auto& [name, bytes] : files)
        EXPECT_NE(out.find(name + ".safetensors: IOError: "), std::string::npos) << name << "\n" << out;
}

}  // namespace
