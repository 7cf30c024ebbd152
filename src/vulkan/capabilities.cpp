// capabilities.cpp — what the Vulkan backend runs: device properties for fx::devices and the
// `supports` entry (the answer kernels give by throwing fluxion::DTypeError, asked beforehand).
#include <algorithm>
#include <cstring>
#include <string>

#include "fluxion/error.hpp"
#include "vulkan/allocator.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/check.hpp"
#include "vulkan/context.hpp"
#include "fluxion/dtype.hpp"
#include "vulkan/kernels.hpp"

namespace fluxion::vulkan {

using backend::Op;

namespace {

// PCI vendor ids, and the Khronos ids of vendors without one (VkVendorId).
const char* vendor_name(std::uint32_t id) {
    switch (id) {
        case 0x10DE: return "NVIDIA";
        case 0x1002: return "AMD";
        case 0x8086: return "Intel";
        case 0x106B: return "Apple";
        case 0x13B5: return "ARM";
        case 0x5143: return "Qualcomm";
        case 0x1010: return "Imagination";
        case 0x10005: return "Mesa";
        default: return "";
    }
}

DeviceKind kind_of(VkPhysicalDeviceType type) {
    switch (type) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return DeviceKind::discrete_gpu;
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return DeviceKind::integrated_gpu;
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return DeviceKind::virtual_gpu;
        case VK_PHYSICAL_DEVICE_TYPE_CPU: return DeviceKind::cpu;
        default: return DeviceKind::other;
    }
}

}  // namespace

void device_properties(int device, backend::DeviceProperties* out) {
    std::lock_guard lock(plugin_mutex());
    const Context& ctx = context(device);
    *out = {};
    copy_text(ctx.properties.deviceName, out->name, sizeof out->name);
    copy_text(vendor_name(ctx.properties.vendorID), out->vendor, sizeof out->vendor);
    out->kind = kind_of(ctx.properties.deviceType);
    std::size_t heap_bytes = 0;
    for (std::uint32_t i = 0; i < ctx.memory.memoryHeapCount; ++i)
        if (ctx.memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            heap_bytes = std::max<std::size_t>(heap_bytes, ctx.memory.memoryHeaps[i].size);
    if (const std::size_t limit = memory_limit()) heap_bytes = std::min(heap_bytes, limit);
    const std::size_t reserved = memory_stats(device).reserved;
    out->total_bytes = heap_bytes;
    out->free_bytes = heap_bytes > reserved ? heap_bytes - reserved : 0;
}

std::string unsupported(const Context& ctx, Op op, DType t) {
    // f16 and bf16 compute in f32 wherever f32 does, in uint16_t storage or packed in words.
    const bool half = t == DType::f16 || t == DType::bf16;
    const bool floating = t == DType::f32 || t == DType::f64 || half;
    const bool number = floating || t == DType::i32 || t == DType::i64;
    const bool any_stored = number || t == DType::u8 || t == DType::boolean;
    bool typed = false;
    const char* types = "";
    switch (op) {
        case Op::fill:
        case Op::copy_strided:
        case Op::cast:
        case Op::index_select:
        case Op::where: typed = any_stored, types = "f32, f64, f16, bf16, i32, i64, u8, bool"; break;
        case Op::binary: typed = any_stored, types = "f32, f64, f16, bf16, i32, i64, u8; comparisons also bool"; break;
        case Op::unary: typed = number, types = "f32, f64, f16, bf16; neg, abs, square, sign also i32, i64"; break;
        case Op::index_add: typed = number, types = "f32, f64, f16, bf16, i32, i64"; break;
        case Op::reduce: typed = any_stored, types = "f32, f64, f16, bf16, i32, i64, u8; max and min also bool"; break;
        default: typed = floating, types = "f32, f64, f16, bf16"; break;
    }
    if (!typed) return ctx.label() + " runs " + name(op) + " on " + types + ", not " + fluxion::name(t);
    if (t == DType::f64 && !ctx.float64) return ctx.label() + " has no shaderFloat64 (f64 elements)";
    if ((t == DType::i64 || op == Op::index_select || op == Op::index_add || op == Op::reduce) && !ctx.int64)
        return ctx.label() + " has no shaderInt64 (i64 elements, indices and argmax)";
    return {};
}

void require(const Context& ctx, Op op, DType t, const char* kernel) {
    const std::string reason = unsupported(ctx, op, t);
    if (!reason.empty()) throw DTypeError(std::string(kernel) + ": " + reason);
}

bool supports(int device, Op op, DType t, char* why, std::size_t why_size) {
    std::lock_guard lock(plugin_mutex());
    const std::string reason = unsupported(context(device), op, t);
    if (reason.empty()) return true;
    copy_text(reason, why, why_size);
    return false;
}

}  // namespace fluxion::vulkan
