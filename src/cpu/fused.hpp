// fused.hpp — the CPU's fused entries of the backend table (core/backend.hpp, "fused kernels"),
// which fx::compile's fusion calls in place of runs of recorded calls. f32 and f64 take one pass:
// the chain block by block in the L1 cache, the convolution with its bias and relu in the direct
// kernels' registers, a 2×2 max pool's gradient with relu's mask, every parameter of an optimiser
// rule in one parallel region. f16 and bf16 take the same one pass where those kernels read and
// write 16-bit cells (the direct convolutions, the 2×2 max pool), rounding each step's result as the
// calls would; elsewhere they run the calls they stand for one after another, in place on the
// output, so that nothing in between is allocated: the same bits either way.
#pragma once
#include <cstddef>

#include "cpu/kernels.hpp"

namespace fluxion::backend::cpu {

void elementwise_chain(int device, DType t, int64_t n, const ElementwiseStep* steps, std::size_t count,
                       void* const* ptrs);
void conv2d_epilogue(int device, DType t, const Conv2dShape* s, const void* x, const void* w, const void* bias,
                     const ConvEpilogue* e, void* y);
void pool2d_backward_activation(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                                const void* gy, Unary act, void* gx);
void optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const int64_t* n,
                     const OptimiserStep* const* hp, void* const* ptrs);

}  // namespace fluxion::backend::cpu
