// dtype.hpp — element sizes and names of fluxion's dtypes, for the Vulkan plugin's kernels and
// messages (the plugin is self-contained: it does not link libfluxion).
#pragma once
#include <cstddef>

#include "fluxion/dtype.hpp"

namespace fluxion::vulkan {

std::size_t element_size(DType t);
const char* dtype_name(DType t);

}  // namespace fluxion::vulkan
