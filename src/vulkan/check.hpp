// check.hpp — turning VkResult failures into fluxion errors that name the call, and handing
// messages to the table's callers.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <string>

namespace fluxion::vulkan {

const char* result_name(VkResult r);
// Throws fluxion::OutOfMemory for the out-of-memory results, fluxion::DeviceError otherwise.
[[noreturn]] void fail(VkResult r, const char* call, const char* file, int line);
// Copies `text` into out[out_size], cut and NUL-terminated (nothing when out is null).
void copy_text(const std::string& text, char* out, std::size_t out_size);

}  // namespace fluxion::vulkan

#define FLUXION_VK_CHECK(call)                                                   \
    do {                                                                         \
        const VkResult fluxion_vk_result_ = (call);                              \
        if (fluxion_vk_result_ != VK_SUCCESS)                                    \
            ::fluxion::vulkan::fail(fluxion_vk_result_, #call, __FILE__, __LINE__); \
    } while (0)
