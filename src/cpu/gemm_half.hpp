// gemm_half.hpp — f16 and bf16 matrix products that convert their operands to f32 while packing
// them, for CPUs whose libraries have no 16-bit kernel faster than their f32 one.
#pragma once
#include <cstdint>

#include "core/backend.hpp"

namespace fluxion::backend::cpu {

// Row-major C = alpha op(A) op(B) + beta C with A, B and C all of type t (f16 or bf16), summed in
// f32 and rounded once into C, as the widened f32 product would be, without f32 copies of A and B.
// Returns false, having done nothing, where this build has no such kernel (it needs AVX2 with FMA)
// or t is another type: the caller then widens.
// True where this build has the kernel (AVX2 with FMA and F16C) and the CPU no AVX-512, whose f32
// kernels are twice as wide; FLUXION_HALF_GEMM=packed or widen chooses either way (to compare).
bool gemm_half_preferred();

bool gemm_half(DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
               int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc);

}  // namespace fluxion::backend::cpu
