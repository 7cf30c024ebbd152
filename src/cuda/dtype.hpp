// dtype.hpp — the CUDA plugin's compute type of an element type, and its message for an element type
// a kernel lacks (sizes and names are fluxion::itemsize and fluxion::name, inline in fluxion/dtype.hpp).
#pragma once

#include "fluxion/dtype.hpp"

namespace fluxion::cuda {

// The type kernels compute t in: f32 for f16 and bf16, which are only stored in 16 bits
// (dtype_dispatch.cuh); t itself otherwise.
inline DType compute_type(DType t) { return t == DType::f16 || t == DType::bf16 ? DType::f32 : t; }

// Throws fluxion::DTypeError: "<op> on CUDA does not support f16 (supported: f32, f64)" (check.cpp).
[[noreturn]] void throw_unsupported(const char* op, DType t, const char* supported);

}  // namespace fluxion::cuda
