// shaders.cpp — the table of embedded SPIR-V modules, from the list shaders.cmake generates.
#include "vulkan/shaders.hpp"

#include <algorithm>
#include <iterator>

namespace fluxion::vulkan {

namespace spirv {
#define FLUXION_VULKAN_SHADER(name) \
    extern const std::uint32_t name[]; \
    extern const std::uint32_t name##_words;
#include "vulkan/shaders.inc"
#undef FLUXION_VULKAN_SHADER
}  // namespace spirv

namespace {
struct Module {
    std::string_view name;
    const std::uint32_t* words;
    const std::uint32_t* count;
};
constexpr Module kModules[] = {
#define FLUXION_VULKAN_SHADER(name) {#name, spirv::name, &spirv::name##_words},
#include "vulkan/shaders.inc"
#undef FLUXION_VULKAN_SHADER
};
}  // namespace

std::span<const std::uint32_t> spirv_module(std::string_view variant) {
    auto it = std::find_if(std::begin(kModules), std::end(kModules), [&](const Module& m) { return m.name == variant; });
    if (it == std::end(kModules)) return {};
    return {it->words, *it->count};
}

}  // namespace fluxion::vulkan
