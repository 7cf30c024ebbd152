// reduce.cpp — sum, mean, max, min, argmax and argmin over the middle axis (shader reduce.comp;
// sums use subgroup arithmetic where the device has it).
#include <algorithm>
#include <limits>
#include <string>

#include "fluxion/error.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

void reduce(int device, Reduce op, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner, const void* src,
            void* dst) {
    const std::int64_t outputs = outer * inner;
    if (outputs <= 0) return;
    // The empty mean is NaN, as 0 / 0, on every backend (the CPU's, CUDA's and PyTorch's answer).
    if (n == 0 && op == Reduce::mean) return fill(device, t, outputs, dst, std::numeric_limits<double>::quiet_NaN());
    Launch launch(device, "reduce");
    const bool arg = op == Reduce::argmax || op == Reduce::argmin;
    require(launch.ctx(), backend::Op::reduce, t, "reduce");
    if (t == DType::boolean && (op == Reduce::sum || op == Reduce::mean))
        throw DTypeError("reduce on " + launch.ctx().label() + ": a bool tensor reduces by max and min only");
    if (n == 0 && op != Reduce::sum)
        throw ValueError("reduce on " + launch.ctx().label() + ": an empty axis has no extreme");
    const std::string type = suffix(t, launch.ctx(), "reduce");
    check_count(outer * n * inner, launch.ctx(), "reduce");
    const std::size_t size = itemsize(t), out_size = arg ? 8 : size;
    const std::int32_t off0 = launch.buffer(src, std::size_t(outer * n * inner) * size, size, false);
    const std::int32_t off1 = launch.buffer(dst, std::size_t(outputs) * out_size, out_size, true);
    launch.param(std::int32_t(outer));
    launch.param(std::int32_t(n));
    launch.param(std::int32_t(inner));
    launch.param(std::int32_t(op));
    launch.param(off0);
    launch.param(off1);
    const auto groups = std::uint32_t(std::min<std::int64_t>(outputs, launch.ctx().properties.limits.maxComputeWorkGroupCount[0]));
    const std::int64_t wg = launch.ctx().workgroup_size;
    check_loop_limit((outputs + groups - 1) / groups * ((n + wg - 1) / wg + 2 * 32), launch.ctx(), "reduce");
    const bool subgroup = launch.ctx().subgroup_arithmetic && !arg && op != Reduce::max && op != Reduce::min &&
                          t != DType::i64 && t != DType::u8;  // no subgroup variant for them
    launch.run((arg ? "argreduce_" : subgroup ? "reduce_subgroup_" : "reduce_") + type, groups);
}

}  // namespace fluxion::vulkan
