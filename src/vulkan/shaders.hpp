// shaders.hpp — the embedded SPIR-V modules, one per shader variant (shaders/variants.cmake).
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

namespace fluxion::vulkan {

// The module of `variant` ("fill_f32", ...), or an empty span when no such variant was built.
std::span<const std::uint32_t> spirv_module(std::string_view variant);

}  // namespace fluxion::vulkan
