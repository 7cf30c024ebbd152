// dtype.hpp — the CUDA plugin's message for an element type a kernel lacks (sizes and names are
// fluxion::itemsize and fluxion::name, inline in fluxion/dtype.hpp).
#pragma once

#include "fluxion/dtype.hpp"

namespace fluxion::cuda {

// Throws fluxion::DTypeError: "<op> on CUDA does not support f16 (supported: f32, f64)".
[[noreturn]] void throw_unsupported(const char* op, DType t, const char* supported);

}  // namespace fluxion::cuda
