// test_tensorboard.cpp — fx::TensorBoardLogger's event files read back by TensorBoard's own reader
// (PyPI's `tensorboard`, under the `python3` on PATH; skipped with the reason where it is missing),
// the record checksum against its standard check values, refusals that write nothing, and
// fx::save_png read back by libpng.
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensorboard/record_writer.hpp"
#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"
#include "tensorboard_reading.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using fx_test::read_with_tensorboard;
using io_test::ScratchDir;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

std::uintmax_t size_of(const std::filesystem::path& p) { return std::filesystem::file_size(p); }

}  // namespace

TEST(TensorBoard, RecordChecksumIsCrc32cWithTheStandardCheckValues) {
    const std::string digits = "123456789";
    EXPECT_EQ(fx::detail::crc32c(digits.data(), digits.size()), 0xE3069283u);
    const std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF);
    EXPECT_EQ(fx::detail::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720, B.4
    EXPECT_EQ(fx::detail::crc32c(ones.data(), ones.size()), 0x62A8AB43u);
    EXPECT_EQ(fx::detail::crc32c(nullptr, 0), 0u);
}

TEST(TensorBoard, ItsOwnReaderReadsEveryKindOfValue) {
    ScratchDir dir;
    const auto logdir = dir.path() / "runs" / "a";
    {
        fx::TensorBoardLogger tb(logdir);
        for (int step = 0; step < 5; ++step) tb.scalar("loss/train", 1.0 / (step + 1), step);
        tb.scalar("accuracy", 0.875, 4);
        // 0, 1, ..., 99 in ten buckets of ten; NaN and infinities are not counted.
        std::vector<float> v(100);
        for (int i = 0; i < 100; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i);
        v.push_back(std::numeric_limits<float>::quiet_NaN());
        v.push_back(std::numeric_limits<float>::infinity());
        tb.histogram("values", fx::tensor(v), 7, 10);
        tb.image("rgb", fx::rand({3, 4, 5}), 2);
        tb.image("grey", fx::full({6, 7}, 200, {.dtype = fx::DType::u8}), 3);
        tb.text("config", "Adam(0.001), batch 128 — ünïcode", 0);
    }
    const fx_test::TensorBoardReading r = read_with_tensorboard(logdir);
    if (!r.error.empty()) FAIL() << r.error;
    if (!r.skip.empty()) GTEST_SKIP() << r.skip;
    const auto& j = r.json;
    EXPECT_EQ(j["files"], 1);
    EXPECT_EQ(j["records"], 1 + 5 + 1 + 1 + 2 + 1);  // the file version first
    const auto& loss = j["scalars"]["loss/train"];
    ASSERT_EQ(loss.size(), 5u);
    for (int step = 0; step < 5; ++step) {
        EXPECT_EQ(loss[step][0], step);
        EXPECT_EQ(loss[step][1].get<double>(), static_cast<double>(static_cast<float>(1.0 / (step + 1))));
    }
    EXPECT_EQ(j["scalars"]["accuracy"][0][1].get<double>(), 0.875);

    const auto& h = j["histograms"]["values"][0];
    EXPECT_EQ(h["step"], 7);
    EXPECT_EQ(h["min"], 0.0);
    EXPECT_EQ(h["max"], 99.0);
    EXPECT_EQ(h["num"], 100.0);
    EXPECT_EQ(h["sum"], 4950.0);
    EXPECT_EQ(h["sum_squares"], 328350.0);
    ASSERT_EQ(h["counts"].size(), 10u);
    for (int b = 0; b < 10; ++b) EXPECT_EQ(h["counts"][b], 10.0) << "bucket " << b;
    EXPECT_EQ(h["limits"][9], 99.0);

    const auto& rgb = j["images"]["rgb"][0];
    EXPECT_EQ(rgb["step"], 2);
    EXPECT_EQ(rgb["width"], 5);
    EXPECT_EQ(rgb["height"], 4);
    EXPECT_EQ(rgb["png_signature"], "89504e470d0a1a0a");
    EXPECT_EQ(j["images"]["grey"][0]["width"], 7);

    ASSERT_EQ(j["text"]["config"].size(), 1u);
    EXPECT_EQ(j["text"]["config"][0][1], "Adam(0.001), batch 128 — ünïcode");
}

TEST(TensorBoard, ModelHistogramsAreTaggedByPathFromEveryDevice) {
    ASSERT_TRUE(plugin_path_set);
    ScratchDir dir;
    fx::seed(3);
    auto model = fx::Chain(fx::Dense(4, 3, fx::relu), fx::Dense(3, 2));
    std::vector<fx::Device> devices{fx::Device{}};
    for (const auto& d : fx::testing::other_devices()) devices.push_back(d);
    for (std::size_t i = 0; i < devices.size(); ++i) {
        fx::TensorBoardLogger tb(dir.path() / ("d" + std::to_string(i)));
        tb.histograms("weights", model | devices[i], 1);
    }
    std::vector<nlohmann::json> readings;
    for (std::size_t i = 0; i < devices.size(); ++i) {
        const fx_test::TensorBoardReading r = read_with_tensorboard(dir.path() / ("d" + std::to_string(i)));
        if (!r.error.empty()) FAIL() << r.error;
        if (!r.skip.empty()) GTEST_SKIP() << r.skip;
        readings.push_back(r.json["histograms"]);
    }
    for (const char* tag : {"weights/layers.0.weight", "weights/layers.0.bias", "weights/layers.1.weight",
                            "weights/layers.1.bias"})
        EXPECT_TRUE(readings[0].contains(tag)) << tag << " in " << readings[0].dump();
    for (std::size_t i = 1; i < devices.size(); ++i) EXPECT_EQ(readings[i], readings[0]) << devices[i].str();
}

TEST(TensorBoard, RefusalsWriteNothing) {
    ScratchDir dir;
    fx::TensorBoardLogger tb(dir.path() / "runs");
    const auto before = size_of(tb.file());
    EXPECT_THROW(tb.scalar("", 1.0, 0), fx::ValueError);
    EXPECT_THROW(tb.histogram("h", fx::zeros({3}), 0, 0), fx::ValueError);
    EXPECT_THROW(tb.image("i", fx::zeros({5}), 0), fx::ShapeError);
    EXPECT_THROW(tb.image("i", fx::zeros({5, 3, 3}), 0), fx::ShapeError);
    EXPECT_THROW(tb.image("i", fx::zeros({3, 0, 3}), 0), fx::ShapeError);
    EXPECT_THROW(tb.image("i", fx::zeros({3, 3}, {.dtype = fx::DType::i64}), 0), fx::DTypeError);
    EXPECT_THROW(tb.text("", "x", 0), fx::ValueError);
    EXPECT_EQ(size_of(tb.file()), before);
    try {
        tb.image("i", fx::zeros({5, 3, 3}), 0);
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("{5, 3, 3}"), std::string::npos) << e.what();
    }
}

TEST(TensorBoard, AFileInThePlaceOfTheFolderIsAnIOError) {
    ScratchDir dir;
    std::ofstream(dir.path() / "taken") << "x";
    try {
        fx::TensorBoardLogger tb(dir.path() / "taken");
        FAIL() << "a logger was made over a file";
    } catch (const fx::IOError& e) {
        EXPECT_NE(std::string(e.what()).find("taken"), std::string::npos) << e.what();
    }
}

TEST(TensorBoard, TwoLoggersOfOneFolderWriteTwoFiles) {
    ScratchDir dir;
    fx::TensorBoardLogger a(dir.path()), b(dir.path());
    EXPECT_NE(a.file(), b.file());
    EXPECT_NE(a.file().filename().string().find("tfevents"), std::string::npos);
}

namespace {

// The pixels of a PNG file, interleaved, as libpng decodes them in the file's own format.
std::vector<unsigned char> decode_png(const std::filesystem::path& path, png_uint_32& width, png_uint_32& height,
                                      png_uint_32& format) {
    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    EXPECT_TRUE(png_image_begin_read_from_file(&png, path.c_str())) << png.message;
    width = png.width, height = png.height, format = png.format;
    std::vector<unsigned char> pixels(PNG_IMAGE_SIZE(png));
    EXPECT_TRUE(png_image_finish_read(&png, nullptr, pixels.data(), 0, nullptr)) << png.message;
    return pixels;
}

}  // namespace

TEST(SavePng, LibpngReadsBackThePixels) {
    ScratchDir dir;
    // {C, H, W} floats in [0, 1], clamped outside and NaN as 0; stored interleaved.
    const std::vector<float> planes = {0.0f, 1.0f, 0.5f, 2.0f, -1.0f, std::nanf(""),   // red
                                       0.2f, 0.4f, 0.6f, 0.8f, 1.0f, 0.0f,             // green
                                       1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f};            // blue
    fx::save_png(dir.path() / "rgb.png", fx::tensor(planes, {3, 2, 3}));
    png_uint_32 w, h, format;
    const auto rgb = decode_png(dir.path() / "rgb.png", w, h, format);
    EXPECT_EQ(w, 3u);
    EXPECT_EQ(h, 2u);
    EXPECT_EQ(format, static_cast<png_uint_32>(PNG_FORMAT_RGB));
    const std::vector<unsigned char> expected = {0, 51, 255, 255, 102, 0, 128, 153, 255,
                                                 255, 204, 0, 0, 255, 255, 0, 0, 0};
    EXPECT_EQ(rgb, expected);

    std::vector<std::uint8_t> bytes(12);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(20 * i);
    fx::save_png(dir.path() / "grey.png", fx::tensor(bytes, {3, 4}));
    const auto grey = decode_png(dir.path() / "grey.png", w, h, format);
    EXPECT_EQ(format, static_cast<png_uint_32>(PNG_FORMAT_GRAY));
    EXPECT_EQ(std::vector<std::uint8_t>(grey.begin(), grey.end()), bytes);
}

TEST(SavePng, AFailedSaveLeavesThePreviousFile) {
    ScratchDir dir;
    const auto path = dir.path() / "keep.png";
    fx::save_png(path, fx::zeros({2, 2}));
    const auto before = size_of(path);
    EXPECT_THROW(fx::save_png(path, fx::zeros({7, 2, 2})), fx::ShapeError);
    EXPECT_EQ(size_of(path), before);
    EXPECT_THROW(fx::save_png(dir.path() / "no" / "such" / "folder.png", fx::zeros({2, 2})), fx::IOError);
}
