// png.cpp — encoding through libpng's simplified API, from the planar layout PyTorch uses for images
// ({C, H, W}) to the interleaved rows PNG stores.
#include "core/io/png.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <png.h>
#include <vector>

#include "core/io/atomic_file.hpp"
#include "fluxion/error.hpp"
#include "fluxion/io.hpp"

namespace fluxion::detail {

namespace {

unsigned char to_byte(double v) {
    if (!(v > 0)) return 0;  // NaN and negatives
    if (v >= 1) return 255;
    return static_cast<unsigned char>(std::lround(v * 255));
}

}  // namespace

Png encode_png(const Tensor& image, std::string_view who) {
    const Shape& s = image.shape();
    const bool planar = s.size() == 3;
    const std::int64_t c = planar ? s[0] : 1;
    if ((s.size() != 2 && !planar) || c < 1 || c > 4)
        throw ShapeError(std::string(who) + ": an image is {H, W} or {C, H, W} with C = 1, 2, 3 or 4 channels, got " +
                         to_string(s));
    const std::int64_t h = s[s.size() - 2], w = s[s.size() - 1];
    constexpr std::int64_t kMaxSide = std::numeric_limits<png_uint_32>::max() / 8;
    if (h < 1 || w < 1 || h > kMaxSide || w > kMaxSide)
        throw ShapeError(std::string(who) + ": an image needs at least one row and one column, got " + to_string(s));
    if (image.dtype() != DType::u8 && !is_floating(image.dtype()))
        throw DTypeError(std::string(who) + ": images are u8 (0-255) or a floating type (0-1), got " +
                         name(image.dtype()));

    std::vector<unsigned char> pixels(static_cast<std::size_t>(c * h * w));
    const std::size_t plane = static_cast<std::size_t>(h * w);
    auto interleave = [&](const auto& values, auto convert) {
        for (std::int64_t k = 0; k < c; ++k)
            for (std::size_t i = 0; i < plane; ++i) pixels[i * c + k] = convert(values[k * plane + i]);
    };
    if (image.dtype() == DType::u8) interleave(image.to_vector<std::uint8_t>(), [](std::uint8_t v) { return v; });
    else interleave(image.to_vector<double>(), to_byte);

    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    png.width = static_cast<png_uint_32>(w);
    png.height = static_cast<png_uint_32>(h);
    static constexpr png_uint_32 kFormats[] = {PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB, PNG_FORMAT_RGBA};
    png.format = kFormats[c - 1];
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&png, nullptr, &size, 0, pixels.data(), 0, nullptr))
        throw Error(std::string(who) + ": libpng cannot encode this image: " + png.message);
    Png out{std::string(size, '\0'), static_cast<int>(h), static_cast<int>(w), static_cast<int>(c)};
    if (!png_image_write_to_memory(&png, out.bytes.data(), &size, 0, pixels.data(), 0, nullptr))
        throw Error(std::string(who) + ": libpng cannot encode this image: " + png.message);
    out.bytes.resize(size);
    png_image_free(&png);
    return out;
}

}  // namespace fluxion::detail

namespace fluxion {

void save_png(const std::filesystem::path& path, const Tensor& image) {
    const detail::Png png = detail::encode_png(image, "save_png");
    detail::AtomicFile file(path, "save_png");
    file.write(png.bytes.data(), png.bytes.size());
    file.commit();
}

}  // namespace fluxion
