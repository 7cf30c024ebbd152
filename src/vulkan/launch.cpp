// launch.cpp — binding buffers, staging the parameter block and recording a dispatch.
#include "vulkan/launch.hpp"

#include <algorithm>
#include <limits>

#include "fluxion/error.hpp"
#include "vulkan/allocator.hpp"
#include "vulkan/pipelines.hpp"

namespace fluxion::vulkan {

Launch::Launch(int device, const char* op) : lock_(plugin_mutex()), op_(op), ctx_(context(device)) {}

std::int32_t Launch::buffer(const void* ptr, std::size_t bytes, std::size_t itemsize, bool write) {
    const Resolved r = resolve(ctx_.index, ptr, bytes, op_);
    // At least a word: 8-bit and packed 16-bit elements are read as the uint words that hold them.
    const VkDeviceSize align = std::max<VkDeviceSize>(4, ctx_.properties.limits.minStorageBufferOffsetAlignment);
    const VkDeviceSize start = r.offset / align * align;
    const VkDeviceSize rem = r.offset - start;
    // Whole 32-bit words (8-bit types are read as words; blocks are whole granules, so this stays inside).
    VkDeviceSize range = std::max<VkDeviceSize>(4, (rem + bytes + 7) / 8 * 8);
    range = std::min(range, r.size - start);
    if (range > ctx_.properties.limits.maxStorageBufferRange)
        throw ShapeError(std::string(op_) + " on " + ctx_.label() + ": a tensor of " + std::to_string(bytes) +
                         " bytes is larger than the device's maxStorageBufferRange (" +
                         std::to_string(ctx_.properties.limits.maxStorageBufferRange) + " bytes); split it");
    buffers_.push_back({r.buffer, start, range});
    accesses_.push_back({r.buffer, write});
    return std::int32_t(rem / itemsize);
}

std::uint32_t Launch::groups(std::int64_t n) const {
    const std::int64_t wg = ctx_.workgroup_size;
    const std::int64_t want = std::max<std::int64_t>(1, (n + wg - 1) / wg);
    return std::uint32_t(std::min<std::int64_t>(want, ctx_.properties.limits.maxComputeWorkGroupCount[0]));
}

void ParamBlock::throw_too_large() {
    throw ValueError("Vulkan: a kernel's parameter block exceeds 256 bytes");
}

void* Launch::run(const std::string& variant, std::uint32_t x, std::uint32_t y, std::uint32_t z,
                  std::initializer_list<std::uint32_t> constants, std::uint32_t local_x) {
    std::vector<std::uint32_t> values{local_x ? local_x : ctx_.workgroup_size};
    values.insert(values.end(), constants.begin(), constants.end());
    const int bindings = int(buffers_.size()) + 1;
    const Pipeline* p = &pipeline(ctx_, variant, bindings, values, op_);
    Stream& s = stream(ctx_);
    const Staged staged = s.stage(params_.size());
    std::memcpy(staged.host, params_.data(), params_.size());
    std::vector<VkDescriptorBufferInfo> infos{{staged.buffer, staged.offset, params_.size()}};
    infos.insert(infos.end(), buffers_.begin(), buffers_.end());
    std::vector<Access> accesses = accesses_;
    accesses.push_back({staged.buffer, false});
    std::vector<VkWriteDescriptorSet> writes(infos.size());
    for (std::size_t i = 0; i < infos.size(); ++i) {
        writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes[i].dstBinding = std::uint32_t(i);
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
    }
    VkCommandBuffer cmd = s.record(accesses.data(), accesses.size());
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    ctx_.push_descriptor_set(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, std::uint32_t(writes.size()), writes.data());
    vkCmdDispatch(cmd, x, y, z);
    return staged.host;
}

std::string suffix(DType t, const Context& ctx, const char* op) {
    switch (t) {
        case DType::f32: return "f32";
        case DType::f64:
            if (!ctx.float64) throw DTypeError(std::string(op) + " on " + ctx.label() + ": f64 needs shaderFloat64, which the device lacks");
            return "f64";
        case DType::i32: return "i32";
        case DType::i64:
            if (!ctx.int64) throw DTypeError(std::string(op) + " on " + ctx.label() + ": i64 needs shaderInt64, which the device lacks");
            return "i64";
        case DType::u8: return "u8";
        case DType::boolean: return "bool";
        case DType::f16: return ctx.storage16 ? "f16" : "f16p";
        case DType::bf16: return ctx.storage16 ? "bf16" : "bf16p";
    }
    throw DTypeError(std::string(op) + " on " + ctx.label() + ": element type " + fluxion::name(t) +
                     " is not supported");
}

std::string float_suffix(DType t, const Context& ctx, const char* op) {
    if (t != DType::f32 && t != DType::f64)
        throw DTypeError(std::string(op) + " on " + ctx.label() + ": the kernel takes f32 and f64, got " +
                         fluxion::name(t));
    return suffix(t, ctx, op);
}

std::string bits_suffix(DType t, const Context& ctx, const char* op) {
    if (itemsize(t) == 2) return ctx.storage16 ? "u16" : "u16p";
    return suffix(t, ctx, op);
}

void check_count(std::int64_t n, const Context& ctx, const char* op) {
    if (n > std::numeric_limits<std::int32_t>::max())
        throw ShapeError(std::string(op) + " on " + ctx.label() + ": " + std::to_string(n) +
                         " elements exceed the 2^31 - 1 the Vulkan kernels index");
}

void check_loop_limit(std::int64_t iterations, const Context& ctx, const char* op) {
    constexpr std::int64_t kLavapipeLoopLimit = 65535;
    if (iterations < kLavapipeLoopLimit || ctx.properties.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU) return;
    throw ValueError(std::string(op) + " on " + ctx.label() + ": each shader invocation would loop " +
                     std::to_string(iterations) + " times, and this CPU device (Mesa's lavapipe) silently stops " +
                     "a shader's loops after " + std::to_string(kLavapipeLoopLimit) +
                     " iterations; run this size on the CPU backend");
}

}  // namespace fluxion::vulkan
