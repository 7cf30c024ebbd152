// pipelines.hpp — compute pipelines, created on first use and cached per (variant, specialisation
// constants). Every kernel's descriptor set is `bindings` storage buffers pushed with the command
// (VK_KHR_push_descriptor); constant 0 of every shader is its workgroup's first dimension.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vulkan/context.hpp"

namespace fluxion::vulkan {

struct Pipeline {
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
};

// fluxion::DTypeError naming `op` when `variant` was not built (an element type the kernel lacks).
const Pipeline& pipeline(Context& ctx, const std::string& variant, int bindings,
                         const std::vector<std::uint32_t>& constants, const char* op);

}  // namespace fluxion::vulkan
