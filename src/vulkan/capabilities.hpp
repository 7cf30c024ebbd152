// capabilities.hpp — which ops and element types a device runs, for the `supports` entry and for
// the kernels' own checks, so that both give the same reason.
#pragma once
#include <string>

#include "core/backend.hpp"
#include "vulkan/context.hpp"

namespace fluxion::vulkan {

// "" when `ctx` runs `op` on `t`, else why not, naming the device and the missing type or feature.
std::string unsupported(const Context& ctx, backend::Op op, DType t);
// Throws fluxion::DTypeError "<kernel>: <reason>" when unsupported(ctx, op, t) is not empty.
void require(const Context& ctx, backend::Op op, DType t, const char* kernel);

}  // namespace fluxion::vulkan
