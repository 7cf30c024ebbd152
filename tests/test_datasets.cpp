// test_datasets.cpp — the IDX reader on small files written here (plain, gzipped, and damaged in
// each way the reader must notice), MNIST-format folders, and the real Fashion-MNIST when installed.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <unistd.h>
#include <vector>

#include "fluxion/datasets.hpp"
#include "fluxion/ops.hpp"

namespace fx = fluxion;
namespace fs = std::filesystem;
using fx::datasets::Split;

namespace {

using Bytes = std::vector<unsigned char>;

Bytes idx_header(unsigned char type, std::initializer_list<std::uint32_t> dims) {
    Bytes b = {0, 0, type, static_cast<unsigned char>(dims.size())};
    for (auto d : dims)
        for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>(d >> shift));
    return b;
}

Bytes concat(Bytes a, const Bytes& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

Bytes counting(std::size_t n) {
    Bytes b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(i * 7 % 256);
    return b;
}

void write_file(const fs::path& path, const Bytes& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Bytes read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
}

// Compresses `path` to `path.gz` with the system's gzip (an independent encoder) and removes `path`.
fs::path gzip(const fs::path& path) {
    const std::string command = "gzip -f '" + path.string() + "'";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("test setup: `" + command + "` failed");
    return path.string() + ".gz";
}

template <class E> void expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
    try {
        f();
        ADD_FAILURE() << "no exception thrown";
    } catch (const E& e) {
        for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
}

// Sets (or unsets, for null) an environment variable for the lifetime of a test.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value) setenv(name, value, 1);
        else unsetenv(name);
    }
    ~ScopedEnv() {
        if (old_.empty()) unsetenv(name_);
        else setenv(name_, old_.c_str(), 1);
    }

private:
    const char* name_;
    std::string old_;
};

class Datasets : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("fluxion_test_datasets_" + std::to_string(getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    fs::path file(const std::string& name, const Bytes& bytes) {
        write_file(dir_ / name, bytes);
        return dir_ / name;
    }
    // A small MNIST-format set in a folder: n images of 2x3, labels i % 10.
    void write_mnist(const fs::path& folder, const std::string& prefix, std::uint32_t n, std::uint32_t n_labels) {
        fs::create_directories(folder);
        write_file(folder / (prefix + "-images-idx3-ubyte"), concat(idx_header(0x08, {n, 2, 3}), counting(n * 6)));
        Bytes labels;
        for (std::uint32_t i = 0; i < n_labels; ++i) labels.push_back(static_cast<unsigned char>(i % 10));
        gzip(write_path(folder / (prefix + "-labels-idx1-ubyte"), concat(idx_header(0x08, {n_labels}), labels)));
    }
    static fs::path write_path(const fs::path& path, const Bytes& bytes) {
        write_file(path, bytes);
        return path;
    }

    fs::path dir_;
};

}  // namespace

TEST_F(Datasets, ReadsPlainU8) {
    auto t = fx::datasets::read_idx(file("images", concat(idx_header(0x08, {3, 2, 4}), counting(24))));
    EXPECT_EQ(t.shape(), (fx::Shape{3, 2, 4}));
    EXPECT_EQ(t.dtype(), fx::DType::u8);
    EXPECT_TRUE(t.device().is_cpu());
    EXPECT_EQ(t.to_vector<std::uint8_t>(), counting(24));
}

TEST_F(Datasets, ReadsGzip) {
    const Bytes payload = counting(5000);
    auto t = fx::datasets::read_idx(gzip(file("labels", concat(idx_header(0x08, {5000}), payload))));
    EXPECT_EQ(t.shape(), (fx::Shape{5000}));
    EXPECT_EQ(t.to_vector<std::uint8_t>(), payload);
}

TEST_F(Datasets, DecodesBigEndianElementTypes) {
    auto i32 = fx::datasets::read_idx(
        file("i32", concat(idx_header(0x0C, {2}), {0xFF, 0xFF, 0xFF, 0xFE, 0x00, 0x01, 0x11, 0x70})));
    EXPECT_EQ(i32.dtype(), fx::DType::i32);
    EXPECT_EQ(i32.to_vector<std::int32_t>(), (std::vector<std::int32_t>{-2, 70000}));

    auto i16 = fx::datasets::read_idx(file("i16", concat(idx_header(0x0B, {2}), {0xFE, 0xD4, 0x01, 0x2C})));
    EXPECT_EQ(i16.dtype(), fx::DType::i32);
    EXPECT_EQ(i16.to_vector<std::int32_t>(), (std::vector<std::int32_t>{-300, 300}));

    auto i8 = fx::datasets::read_idx(file("i8", concat(idx_header(0x09, {1, 2}), {0xFB, 0x07})));
    EXPECT_EQ(i8.shape(), (fx::Shape{1, 2}));
    EXPECT_EQ(i8.to_vector<std::int32_t>(), (std::vector<std::int32_t>{-5, 7}));

    // 1.5f = 0x3FC00000, -0.25f = 0xBE800000
    auto f32 = fx::datasets::read_idx(
        file("f32", concat(idx_header(0x0D, {2}), {0x3F, 0xC0, 0x00, 0x00, 0xBE, 0x80, 0x00, 0x00})));
    EXPECT_EQ(f32.dtype(), fx::DType::f32);
    EXPECT_EQ(f32.to_vector<float>(), (std::vector<float>{1.5f, -0.25f}));

    // 3.25 = 0x400A000000000000
    auto f64 = fx::datasets::read_idx(file("f64", concat(idx_header(0x0E, {1}), {0x40, 0x0A, 0, 0, 0, 0, 0, 0})));
    EXPECT_EQ(f64.dtype(), fx::DType::f64);
    EXPECT_EQ(f64.to_vector<double>(), (std::vector<double>{3.25}));
}

TEST_F(Datasets, MissingFile) {
    const auto path = dir_ / "nothing-here";
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(path); }, {path.string(), "no such file"});
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(dir_); }, {"folder"});
}

TEST_F(Datasets, WrongMagicNumber) {
    auto path = file("png", {0x89, 'P', 'N', 'G', 0, 0, 0, 0});
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(path); }, {"not an IDX file", "0x89504E47", path.string()});
    auto type = file("type", concat({0, 0, 0x07, 1}, {0, 0, 0, 1, 42}));
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(type); }, {"unknown element type code 0x07"});
    auto dims = file("dims", {0, 0, 0x08, 0});
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(dims); }, {"0 dimensions"});
    auto empty = file("empty", {});
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(empty); }, {"holds 0 bytes", "magic number"});
}

TEST_F(Datasets, TruncatedFiles) {
    const Bytes whole = concat(idx_header(0x08, {10, 4}), counting(40));
    auto data = file("data", Bytes(whole.begin(), whole.end() - 3));
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(data); }, {"truncated", "{10, 4}", "40 bytes", "holds 37"});
    auto header = file("header", Bytes(whole.begin(), whole.begin() + 6));
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(header); }, {"truncated inside its header"});
    auto longer = file("longer", concat(whole, {1, 2}));
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(longer); }, {"more data than its header describes"});
}

TEST_F(Datasets, DamagedGzip) {
    const Bytes compressed = read_file(gzip(file("x", concat(idx_header(0x08, {20000}), counting(20000)))));
    ASSERT_GT(compressed.size(), 100u);
    auto cut = file("cut.gz", Bytes(compressed.begin(), compressed.begin() + compressed.size() / 2));
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(cut); }, {"truncated", cut.string()});
    Bytes flipped = compressed;
    for (std::size_t i = 20; i < 40; ++i) flipped[i] ^= 0x5A;
    auto bad = file("bad.gz", flipped);
    expect_error<fx::IOError>([&] { fx::datasets::read_idx(bad); }, {"corrupt", bad.string()});
}

TEST_F(Datasets, MnistFolder) {
    write_mnist(dir_, "train", 5, 5);
    write_mnist(dir_, "t10k", 2, 2);
    auto [X, Y] = fx::datasets::mnist(dir_, Split::Train);
    EXPECT_EQ(X.shape(), (fx::Shape{5, 1, 2, 3}));
    EXPECT_EQ(X.dtype(), fx::DType::f32);
    EXPECT_EQ(Y.shape(), (fx::Shape{5}));
    EXPECT_EQ(Y.dtype(), fx::DType::i64);
    EXPECT_EQ(Y.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
    const auto raw = counting(30);
    const auto x = X.to_vector<float>();
    for (std::size_t i = 0; i < raw.size(); ++i) EXPECT_FLOAT_EQ(x[i], raw[i] / 255.0f) << i;
    auto [Xt, Yt] = fx::datasets::mnist(dir_, Split::Test);
    EXPECT_EQ(Xt.shape(), (fx::Shape{2, 1, 2, 3}));
    EXPECT_EQ(Yt.shape(), (fx::Shape{2}));
    // As bytes: the file's values, the same shape, the same labels.
    auto [B, L] = fx::datasets::mnist(dir_, Split::Train, fx::datasets::Pixels::bytes);
    EXPECT_EQ(B.shape(), (fx::Shape{5, 1, 2, 3}));
    EXPECT_EQ(B.dtype(), fx::DType::u8);
    EXPECT_EQ(B.to_vector<std::uint8_t>(), raw);
    EXPECT_EQ(L.to_vector<std::int64_t>(), Y.to_vector<std::int64_t>());
}

TEST_F(Datasets, MnistChecksTheFilesBelongTogether) {
    write_mnist(dir_, "train", 5, 4);
    expect_error<fx::IOError>([&] { fx::datasets::mnist(dir_, Split::Train); },
                              {"inconsistent counts", "5 images", "4 labels"});
    write_file(dir_ / "t10k-images-idx3-ubyte", concat(idx_header(0x08, {6}), counting(6)));
    write_file(dir_ / "t10k-labels-idx1-ubyte", concat(idx_header(0x08, {6}), counting(6)));
    expect_error<fx::IOError>([&] { fx::datasets::mnist(dir_, Split::Test); }, {"{6}", "expected u8 images"});
    expect_error<fx::IOError>([&] { fx::datasets::mnist(dir_ / "elsewhere", Split::Train); },
                              {"no train-images-idx3-ubyte or train-images-idx3-ubyte.gz in"});
}

TEST_F(Datasets, FashionMnistReadsTheFolderInFluxionData) {
    write_mnist(dir_, "t10k", 3, 3);
    ScopedEnv env("FLUXION_DATA", dir_.c_str());
    auto [X, Y] = fx::datasets::fashion_mnist(Split::Test);
    EXPECT_EQ(X.shape(), (fx::Shape{3, 1, 2, 3}));
    EXPECT_EQ(Y.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2}));
    expect_error<fx::IOError>([] { fx::datasets::fashion_mnist(Split::Train); },
                              {"FLUXION_DATA", "train-images-idx3-ubyte", "dataset-fashion-mnist"});
}

namespace {
const fs::path kPackageDir = "/usr/share/datasets/fashion-mnist";
bool package_installed() {
    for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                          "t10k-labels-idx1-ubyte"})
        if (!fs::exists(kPackageDir / f) && !fs::exists(kPackageDir / (std::string(f) + ".gz"))) return false;
    return true;
}
}  // namespace

TEST(FashionMnist, MissingPackageSaysHowToInstallIt) {
    if (package_installed()) GTEST_SKIP() << "dataset-fashion-mnist is installed, so it is not missing";
    ScopedEnv env("FLUXION_DATA", nullptr);
    expect_error<fx::IOError>([] { fx::datasets::fashion_mnist(Split::Train); },
                              {"apt-get install dataset-fashion-mnist", "FLUXION_DATA"});
}

TEST(FashionMnist, RealDataSet) {
    if (!package_installed())
        GTEST_SKIP() << "Fashion-MNIST is not installed in " << kPackageDir
                     << " (apt-get install dataset-fashion-mnist)";
    ScopedEnv env("FLUXION_DATA", nullptr);
    for (auto [split, n] : {std::pair{Split::Train, 60000}, std::pair{Split::Test, 10000}}) {
        auto [X, Y] = fx::datasets::fashion_mnist(split);
        EXPECT_EQ(X.shape(), (fx::Shape{n, 1, 28, 28}));
        EXPECT_EQ(X.dtype(), fx::DType::f32);
        EXPECT_EQ(Y.shape(), (fx::Shape{n}));
        EXPECT_EQ(Y.dtype(), fx::DType::i64);
        EXPECT_EQ(fx::min(X).item(), 0.0);
        EXPECT_EQ(fx::max(X).item(), 1.0);
        std::array<std::int64_t, 10> counts{};
        for (auto label : Y.to_vector<std::int64_t>()) {
            ASSERT_GE(label, 0);
            ASSERT_LT(label, 10);
            ++counts[static_cast<std::size_t>(label)];
        }
        for (auto c : counts) EXPECT_EQ(c, n / 10);
    }
}
