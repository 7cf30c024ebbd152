// dtype.hpp — element sizes and names of fluxion's dtypes, for the CUDA plugin's kernels and
// messages (the plugin is self-contained: it does not link libfluxion).
#pragma once
#include <cstddef>

#include "fluxion/dtype.hpp"

namespace fluxion::cuda {

std::size_t element_size(DType t);
const char* dtype_name(DType t);

// Throws fluxion::DTypeError: "<op> on CUDA does not support f16 (supported: f32, f64)".
[[noreturn]] void throw_unsupported(const char* op, DType t, const char* supported);

}  // namespace fluxion::cuda
