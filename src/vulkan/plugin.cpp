// plugin.cpp — the Vulkan backend's kernel table and the plugin's exported functions.
#include <vulkan/vulkan.h>

#include "vulkan/allocator.hpp"
#include "vulkan/context.hpp"
#include "vulkan/exports.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/transfer.hpp"

namespace fluxion::vulkan {

namespace {

constexpr backend::Backend kTable{
    .abi_version = backend::kAbiVersion,
    .name = "Vulkan",
    .priority = 50,
    .functional = functional,
    .device_count = device_count,
    .device_properties = device_properties,
    .supports = supports,
    .synchronize = synchronize,
    .alloc = allocate,
    .free = deallocate,
    .copy_from_host = copy_from_host,
    .copy_to_host = copy_to_host,
    .copy_device = copy_device,
    .fill = fill,
    .copy_strided = copy_strided,
    .cast = cast,
    .index_select = index_select,
    .index_add = index_add,
    .unary = unary,
    .unary_backward = unary_backward,
    .binary = binary,
    .where = where,
    .reduce = reduce,
    .gemm = gemm,
    .conv2d = conv2d,
    .conv2d_backward_input = conv2d_backward_input,
    .conv2d_backward_weight = conv2d_backward_weight,
    .pool2d = pool2d,
    .pool2d_backward = pool2d_backward,
    .softmax = softmax,
    .softmax_backward = softmax_backward,
    .lstm_cell = lstm_cell,
    .lstm_cell_backward = lstm_cell_backward,
    .optimiser_step = optimiser_step,
    .elementwise_chain = elementwise_chain,
    .conv2d_epilogue = conv2d_epilogue,
    .pool2d_backward_activation = pool2d_backward_activation,
    .optimiser_steps = optimiser_steps,
    .capture_begin = capture_begin,
    .capture_end = capture_end,
    .capture_run = capture_run,
    .capture_free = capture_free,
    .nonfinite_check = nonfinite_check,
    .mixed_optimiser_steps = mixed_optimiser_steps,
    .batch_norm = batch_norm,
    .batch_norm_backward = batch_norm_backward,
};

}  // namespace

}  // namespace fluxion::vulkan

extern "C" {

const fluxion::backend::Backend* fluxion_backend_entry(int abi_version) {
    return abi_version == fluxion::backend::kAbiVersion ? &fluxion::vulkan::kTable : nullptr;
}

bool fluxion_vulkan_memory_stats(int device, std::size_t* allocated, std::size_t* reserved, std::size_t* peak) {
    std::lock_guard lock(fluxion::vulkan::plugin_mutex());
    if (device < 0 || std::size_t(device) >= fluxion::vulkan::probe().devices.size()) return false;
    const fluxion::vulkan::MemoryStats stats = fluxion::vulkan::memory_stats(device);
    if (allocated) *allocated = stats.allocated;
    if (reserved) *reserved = stats.reserved;
    if (peak) *peak = stats.peak;
    return true;
}

void fluxion_vulkan_empty_cache(int device) { fluxion::vulkan::empty_cache(device); }

std::uint64_t fluxion_vulkan_transfer_uploads(int device) {
    std::lock_guard lock(fluxion::vulkan::plugin_mutex());
    if (device < 0 || std::size_t(device) >= fluxion::vulkan::probe().devices.size()) return 0;
    return fluxion::vulkan::transfer_uploads(fluxion::vulkan::context(device));
}

std::uint64_t fluxion_vulkan_validation_messages() { return fluxion::vulkan::validation_message_count(); }

void fluxion_vulkan_debug_invalid_call(int device) {
    std::lock_guard lock(fluxion::vulkan::plugin_mutex());
    fluxion::vulkan::Context& ctx = fluxion::vulkan::context(device);
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = 0;  // VUID-VkBufferCreateInfo-size-00912: size must be greater than 0
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    VkBuffer buffer = VK_NULL_HANDLE;
    if (vkCreateBuffer(ctx.device, &info, nullptr, &buffer) == VK_SUCCESS && buffer) vkDestroyBuffer(ctx.device, buffer, nullptr);
}

}  // extern "C"
