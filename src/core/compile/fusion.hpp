// fusion.hpp — merging a recording's calls before its plan is made (docs/ARCHITECTURE.md,
// "Compiled steps"). The core decides what may fuse; the calls' own table runs the fused call, where
// it has the entry (core/backend.hpp, "fused kernels": the CPU, Vulkan and CUDA have each). A replay
// then runs, as one call each:
//  - consecutive optimiser steps of one rule and element type: one multi-tensor step
//    (optimiser_steps);
//  - a convolution followed by the broadcast add of a bias and/or an activation of its result, each
//    intermediate used by no other call: the convolution with its epilogue (conv2d_epilogue), the
//    intermediates gone from the arena;
//  - a pool's gradient followed by the gradient of the activation whose output the pool read (relu,
//    sigmoid, tanh), where no other call reads the pool's gradient: pool2d_backward_activation, the
//    full-size intermediate gone;
//  - a matrix product followed by an activation of its result: the two kernels in one call, and when
//    no other call reads the product, the activation runs in place on the buffer it writes;
//  - elementwise calls (unary ops, and binary arithmetic with a second operand of the same size or
//    one broadcast value) each reading the result of the one before, an intermediate no other call
//    reads: one call that takes the data through every op (elementwise_chain).
// relu's gradient is first made to read the relu's output rather than its input (the same test,
// y > 0 where x > 0), so that in training too the input of a relu is an intermediate.
// Fused calls compute what the calls they replace computed. Only floating-point calls are fused
// (f32, f64, f16, bf16); integer calls are replayed as recorded.
#pragma once
#include <cstddef>

#include "core/compile/recorder.hpp"

namespace fluxion::detail {

// Rewrites rec.calls and rec.refs, and the traced buffers' lifetimes, fusing no group across
// `boundary` (the first call of phase 1, or any index past the end). `output` is the traced buffer
// the step returns, which stays. Returns the boundary's index among the fused calls.
std::size_t fuse(Recorder& rec, std::size_t boundary, std::size_t output);

// Whether FLUXION_FUSE=0 turns fusion off for every compiled step (to compare timings).
bool fusion_disabled_by_environment();

}  // namespace fluxion::detail
