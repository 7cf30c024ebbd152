// check.hpp — turning VkResult failures into fluxion errors that name the call.
#pragma once
#include <vulkan/vulkan.h>

namespace fluxion::vulkan {

const char* result_name(VkResult r);
// Throws fluxion::OutOfMemory for the out-of-memory results, fluxion::DeviceError otherwise.
[[noreturn]] void fail(VkResult r, const char* call, const char* file, int line);

}  // namespace fluxion::vulkan

#define FLUXION_VK_CHECK(call)                                                   \
    do {                                                                         \
        const VkResult fluxion_vk_result_ = (call);                              \
        if (fluxion_vk_result_ != VK_SUCCESS)                                    \
            ::fluxion::vulkan::fail(fluxion_vk_result_, #call, __FILE__, __LINE__); \
    } while (0)
