// test_io_malformed.cpp — the reader never trusts a file: each malformed input below is refused
// with an IOError that names the file and the problem, and every input of the fuzzing corpus
// (fuzz/corpus/safetensors/) either loads or is refused the same way. This is the fuzzer's regression check.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/io/safetensors_format.hpp"
#include "test_io_support.hpp"

namespace {

std::string u64le(std::uint64_t n) {
    std::string s(8, '\0');
    std::memcpy(s.data(), &n, 8);
    return s;
}

// A safetensors file from header text and `data_bytes` bytes of data (values 0, 1, 2, ...).
std::string file_with(const std::string& header, std::size_t data_bytes = 0) {
    std::string data(data_bytes, '\0');
    for (std::size_t i = 0; i < data_bytes; ++i) data[i] = static_cast<char>(i);
    return u64le(header.size()) + header + data;
}

std::map<std::string, fx::Tensor> load(const std::string& bytes, const std::string& source = "<memory>") {
    return fx::load_state_from_memory(std::as_bytes(std::span(bytes.data(), bytes.size())), source);
}

// The header of a one-element U8 tensor "a" of shape {1, 1, ..., 1} with `rank` dimensions.
std::string one_byte_of_rank(int rank) {
    std::string dims = "1";
    for (int i = 1; i < rank; ++i) dims += ",1";
    return R"({"a": {"dtype": "U8", "shape": [)" + dims + R"(], "data_offsets": [0, 1]}})";
}

struct Malformed {
    const char* what;
    std::string bytes;
    const char* expected;  // a fragment of the error message
};

std::vector<Malformed> malformed_inputs() {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    return {
        {"shorter than the length field", "\x10\x00\x00", "fewer than the 8-byte header length"},
        {"absurd header length", u64le(1ull << 40) + "{}", "larger than the format's limit"},
        {"header length past the end", u64le(64) + "{}", "the file is truncated"},
        {"header length of 2^64 - 1", u64le(~0ull) + "{}", "larger than the format's limit"},
        {"empty header", u64le(0), "not valid JSON"},
        {"invalid JSON", file_with(R"({"a": [1,)"), "not valid JSON"},
        {"invalid UTF-8", file_with("{\"\xff\xfe\": 1}"), "not valid JSON"},
        {"NUL padding", file_with(std::string("{}") + '\0'), "not valid JSON"},
        {"array header", file_with("[1, 2]"), "is a JSON array, expected an object"},
        {"deeply nested", file_with(deep), "the header nests deeper than 8 levels"},
        {"absurdly many dimensions", file_with(one_byte_of_rank(65), 1), "an array longer than 64 elements"},
        {"nested inside an entry",
         file_with(R"({"a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0], "x": [[[[[[[[[1]]]]]]]]]}})"),
         "the header nests deeper than 8 levels"},
        {"duplicate name", file_with(R"({"a": {}, "a": {}})"), "names \"a\" twice"},
        {"duplicate field", file_with(R"({"a": {"dtype": "U8", "dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})"),
         "repeats the key \"dtype\" in one object"},
        {"entry not an object", file_with(R"({"a": 3})"), "tensor \"a\" is described by a number"},
        {"no dtype", file_with(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4), "tensor \"a\" has no \"dtype\""},
        {"no shape", file_with(R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", 4), "has no \"shape\""},
        {"no offsets", file_with(R"({"a": {"dtype": "F32", "shape": [1]}})", 4), "has no \"data_offsets\""},
        {"dtype not a string", file_with(R"({"a": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})", 4),
         "\"dtype\" must be a string"},
        {"unknown dtype", file_with(R"({"a": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}})", 4),
         "has dtype \"I8\", which fluxion does not read"},
        {"shape not an array", file_with(R"({"a": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", 16),
         "\"shape\" must be an array"},
        {"negative size", file_with(R"({"a": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}})", 16),
         "sizes must be whole numbers"},
        {"fractional size", file_with(R"({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})", 8),
         "sizes must be whole numbers"},
        {"size past int64", file_with(R"({"a": {"dtype": "U8", "shape": [18446744073709551615], "data_offsets": [0, 1]}})", 1),
         "sizes must be whole numbers"},
        {"byte size overflows",
         file_with(R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]}})", 16),
         "does not fit in 64 bits"},
        {"huge product that wraps to the right size",
         file_with(R"({"a": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})"),
         "does not fit in 64 bits"},
        {"one offset", file_with(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
         "expected [begin, end]"},
        {"negative offset", file_with(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4),
         "expected [begin, end]"},
        {"reversed offsets", file_with(R"({"a": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}})", 4),
         "whose begin is past its end"},
        {"offsets past the data", file_with(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 10),
         "needs bytes [0, 16) of a data section that has only 10 bytes"},
        {"offsets far past the data",
         file_with(R"({"a": {"dtype": "U8", "shape": [16], "data_offsets": [18446744073709551600, 18446744073709551615]}})"),
         "of a data section that has only 0 bytes"},
        {"size disagrees with shape", file_with(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
         "needs 12 bytes, but its data_offsets [0, 8) hold 8"},
        {"overlapping ranges",
         file_with(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12),
         "tensor \"a\" at bytes [0, 8) and tensor \"b\" at [4, 12) overlap"},
        {"empty tensor inside another",
         file_with(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})", 8),
         "overlap"},
        {"same range twice",
         file_with(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                       "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4),
         "overlap"},
        {"gap between tensors",
         file_with(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                       "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", 12),
         "bytes [4, 8) of the data section belong to no tensor"},
        {"trailing bytes", file_with(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 8),
         "bytes [4, 8) of the data section belong to no tensor"},
        {"metadata not an object", file_with(R"({"__metadata__": [1]})"), "\"__metadata__\" must be an object"},
        {"metadata not strings", file_with(R"({"__metadata__": {"epoch": 3}})"), "entry \"epoch\" is a number"},
    };
}

TEST(IOMalformed, EveryProblemIsAClearIOError) {
    for (const auto& c : malformed_inputs()) {
        SCOPED_TRACE(c.what);
        try {
            load(c.bytes, "bad.safetensors");
            ADD_FAILURE() << "accepted";
        } catch (const fx::IOError& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find(c.expected), std::string::npos) << m;
            EXPECT_NE(m.find("\"bad.safetensors\""), std::string::npos) << m;
        }
    }
}

TEST(IOMalformed, FilesOnDiskAreCheckedTheSameWay) {
    io_test::ScratchDir dir;
    const auto cases = malformed_inputs();
    for (std::size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(cases[i].what);
        const auto path = dir / ("case" + std::to_string(i) + ".safetensors");
        io_test::write_bytes(path, cases[i].bytes);
        io_test::MLP model = io_test::mlp({2, 2});
        try {
            fx::load(path, model);
            ADD_FAILURE() << "accepted";
        } catch (const fx::IOError& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find(cases[i].expected), std::string::npos) << m;
            EXPECT_NE(m.find(path.string()), std::string::npos) << m;
        }
    }
}

TEST(IOMalformed, UnusualButValidFilesLoad) {
    // No padding (data unaligned), whitespace, entry keys the format may add, no tensors at all.
    const auto unpadded = load(file_with(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", 3));
    EXPECT_EQ(unpadded.at("a").to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{0, 1, 2}));
    const auto spaced = load(file_with(
        "  {\n \"x\" : {\"shape\": [1, 2], \"data_offsets\": [0, 8], \"dtype\": \"I32\", \"note\": null} }   ", 8));
    EXPECT_EQ(spaced.at("x").shape(), (fx::Shape{1, 2}));
    EXPECT_EQ(spaced.at("x").to_vector<std::int32_t>(), (std::vector<std::int32_t>{0x03020100, 0x07060504}));
    EXPECT_TRUE(load(file_with("{}")).empty());
    EXPECT_TRUE(load(file_with(R"({"__metadata__": {"k": "v"}})")).empty());
    const auto zero_sized = load(file_with(R"({"e": {"dtype": "F64", "shape": [0, 5], "data_offsets": [0, 0]},
                                                "s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}})", 4));
    EXPECT_EQ(zero_sized.at("e").shape(), (fx::Shape{0, 5}));
    EXPECT_EQ(zero_sized.at("s").shape(), fx::Shape{});
    EXPECT_EQ(load(file_with(one_byte_of_rank(64), 1)).at("a").ndim(), 64);
}

// Reading a header is O(n log n) in its entries: a parser that rescans objects (nlohmann's callback
// parser does) needs minutes here, this one a fraction of a second.
TEST(IOMalformed, HeadersWithManyEntriesParseQuickly) {
#if !defined(NDEBUG) || defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "a timing check, meaningful only in optimised builds without sanitizers";
#endif
    std::string header = "{";
    for (int i = 0; i < 100000; ++i)
        header.append(i ? "," : "").append("\"t").append(std::to_string(i)).append(R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]})");
    const std::string bytes = file_with(header + "}");
    const auto start = std::chrono::steady_clock::now();
    const auto parsed = fx::detail::parse_safetensors(std::as_bytes(std::span(bytes.data(), bytes.size())), "many");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(parsed.tensors.size(), 100000u);
    EXPECT_LT(seconds, 10.0);
}

TEST(IOMalformed, FuzzCorpusNeverCrashes) {
    const std::filesystem::path corpus = std::filesystem::path(FLUXION_SOURCE_DIR) / "fuzz" / "corpus" / "safetensors";
    ASSERT_TRUE(std::filesystem::is_directory(corpus)) << corpus;
    std::size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
        const std::string name = entry.path().filename().string();
        SCOPED_TRACE(name);
        ++files;
        const bool valid = name.rfind("valid_", 0) == 0;
        try {
            const auto state = fx::load_state(entry.path());
            EXPECT_TRUE(valid) << "accepted a file the corpus marks invalid";
        } catch (const fx::IOError& e) {
            EXPECT_FALSE(valid) << e.what();
        }
    }
    EXPECT_GE(files, 38u);
}

}  // namespace
