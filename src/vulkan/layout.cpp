// layout.cpp — fill, strided copies, casts and index_select / index_add (shaders fill.comp,
// copy_strided.comp, cast.comp, index_select.comp, index_add.comp).
#include <cstring>

#include "fluxion/error.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"
#include "vulkan/strided.hpp"

namespace fluxion::vulkan {

void fill(int device, DType t, std::int64_t n, void* dst, double value) {
    if (n <= 0) return;
    Launch launch(device, "fill");
    const std::string type = suffix(t, launch.ctx(), "fill");
    check_count(n, launch.ctx(), "fill");
    const std::size_t size = itemsize(t);
    const std::int32_t off = launch.buffer(dst, std::size_t(n) * size, size, true);
    launch.param(std::int32_t(n));
    launch.param(off);
    switch (t) {
        case DType::f32:
        case DType::f16:
        case DType::bf16: launch.param(float(value)); break;  // half: rounded in the shader
        case DType::f64: launch.param(value); break;
        case DType::i32: launch.param(std::int32_t(value)); break;
        case DType::i64: launch.param(std::int64_t(value)); break;
        case DType::u8: launch.param(std::uint32_t(std::uint8_t(value))); break;
        default: launch.param(std::uint32_t(value != 0)); break;
    }
    launch.run("fill_" + type, launch.groups(n));
}

void copy_strided(int device, DType t, const Strided* src_view, const void* src, const std::int64_t* dst_strides,
                  void* dst) {
    Strided dst_view = *src_view;
    std::memcpy(dst_view.strides, dst_strides, sizeof(std::int64_t) * std::size_t(std::max(0, src_view->ndim)));
    const Views<2> v = merge_views<2>("copy_strided", {src_view, &dst_view});
    if (v.count == 0) return;
    Launch launch(device, "copy_strided");
    const std::string type = bits_suffix(t, launch.ctx(), "copy_strided");
    check_count(v.count, launch.ctx(), "copy_strided");
    const std::size_t size = itemsize(t);
    const std::int32_t off0 = launch.buffer(src, span_bytes(*src_view, size, "copy_strided"), size, false);
    const std::int32_t off1 = launch.buffer(dst, span_bytes(dst_view, size, "copy_strided"), size, true);
    launch.param(std::int32_t(v.count));
    launch.param(std::int32_t(v.ndim));
    launch.param(off0);
    launch.param(off1);
    put_views(launch, v);
    launch.run("copy_strided_" + type, launch.groups(v.count));
}

void cast(int device, DType from, DType to, std::int64_t n, const void* src, void* dst) {
    if (n <= 0) return;
    Launch launch(device, "cast");
    const std::string types = suffix(from, launch.ctx(), "cast") + "_" + suffix(to, launch.ctx(), "cast");
    check_count(n, launch.ctx(), "cast");
    const std::int32_t off0 = launch.buffer(src, std::size_t(n) * itemsize(from), itemsize(from), false);
    const std::int32_t off1 = launch.buffer(dst, std::size_t(n) * itemsize(to), itemsize(to), true);
    launch.param(std::int32_t(n));
    launch.param(off0);
    launch.param(off1);
    launch.run("cast_" + types, launch.groups(n));
}

}  // namespace fluxion::vulkan
