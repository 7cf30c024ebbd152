// launch.hpp — one kernel launch: its parameter block (binding 0, std430, staged in host-visible
// memory), its storage buffers (bindings 1, 2, ...) and the dispatch, recorded on the device's
// stream. A buffer is bound at its offset rounded down to minStorageBufferOffsetAlignment; the rest
// is an element offset the shader adds, returned by buffer() for the parameter block.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

#include "fluxion/dtype.hpp"
#include "vulkan/context.hpp"
#include "fluxion/dtype.hpp"
#include "vulkan/stream.hpp"

namespace fluxion::vulkan {

// A kernel's parameter block (binding 0, std430 scalars), built without heap allocation so that a
// recording can rebuild it before each submission.
class ParamBlock {
public:
    // Appends a scalar at its natural alignment (std430).
    template <class T> void param(T value) {
        const std::size_t at = (size_ + sizeof(T) - 1) / sizeof(T) * sizeof(T);
        if (at + sizeof(T) > sizeof(bytes_)) throw_too_large();
        std::memcpy(bytes_ + at, &value, sizeof(T));
        size_ = at + sizeof(T);
    }
    const char* data() const { return bytes_; }
    std::size_t size() const { return std::max<std::size_t>(16, (size_ + 15) / 16 * 16); }  // whole 16-byte rows

private:
    [[noreturn]] static void throw_too_large();
    char bytes_[256] = {};
    std::size_t size_ = 0;
};

class Launch {
public:
    Launch(int device, const char* op);

    Context& ctx() { return ctx_; }
    // Binds `bytes` bytes at `ptr` as the next buffer; returns the pointer's offset in elements of
    // `itemsize` from the bound start.
    std::int32_t buffer(const void* ptr, std::size_t bytes, std::size_t itemsize, bool write);
    // Appends a scalar to the parameter block at its natural alignment (std430).
    template <class T> void param(T value) { params_.param(value); }
    ParamBlock& params() { return params_; }
    // Workgroups for a grid-stride loop over n elements with the context's 1-D workgroup.
    std::uint32_t groups(std::int64_t n) const;
    // Records the dispatch of `variant` (fluxion::DTypeError when it was not built). Constant 0 is
    // the workgroup size; `constants` follow from 1. Returns where the parameter block was staged
    // (host-visible; a recording may rewrite it before each submission).
    void* run(const std::string& variant, std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1,
              std::initializer_list<std::uint32_t> constants = {}, std::uint32_t local_x = 0);

private:
    std::lock_guard<PluginMutex> lock_;
    const char* op_;
    Context& ctx_;
    ParamBlock params_;
    std::vector<VkDescriptorBufferInfo> buffers_;
    std::vector<Access> accesses_;
};

// "f32", "i64", "f16", ...: the suffix of a variant for element type t; fluxion::DTypeError naming
// `op` and the device when the device cannot store t (f64 without shaderFloat64, i64 without
// shaderInt64). f16 and bf16 without storageBuffer16BitAccess: "f16p", "bf16p", packed in words.
std::string suffix(DType t, const Context& ctx, const char* op);
// suffix() for the kernels that take f32 and f64 only (BatchNorm's, the LSTM cell's: the core gives
// them no other type); fluxion::DTypeError naming `op` for any other.
std::string float_suffix(DType t, const Context& ctx, const char* op);
// suffix(), but "u16" ("u16p") for f16 and bf16: the variants of kernels that move elements without
// reading their values (copies, index_select, where) keep every bit, NaN payloads included.
std::string bits_suffix(DType t, const Context& ctx, const char* op);
// Raises fluxion::ShapeError when n elements do not fit the 32-bit indices of the shaders.
void check_count(std::int64_t n, const Context& ctx, const char* op);

// Mesa's lavapipe stops every loop of a shader invocation, silently, once their iterations add up
// to 65,535 (gallivm's loop limiter). On such a device a kernel whose invocations would loop
// `iterations` times or more is a ValueError naming the limit, never a wrong result. Other devices
// have no such limit.
void check_loop_limit(std::int64_t iterations, const Context& ctx, const char* op);

}  // namespace fluxion::vulkan
