// fused.hpp — kernels that do the work of several table entries in one call, for fx::compile's
// fused replays (src/core/compile/fusion.cpp). Each computes what the calls it stands for compute,
// element for element, for f32 and f64 (fusion leaves the calls of other types alone). They are not
// entries of the backend table: only replays of the CPU's calls reach them.
#pragma once
#include <cstddef>

#include "cpu/kernels.hpp"

namespace fluxion::backend::cpu {

// optimiser_step on `count` tensors as one loop over all their elements, shared among the threads
// (one parallel region instead of one per tensor, as PyTorch's foreach/fused optimisers): tensor i
// has n[i] elements, hyper-parameters *hp[i] and the buffers ptrs[5i .. 5i + 4] (parameter,
// gradient, state1, state2, state3; null states where the rule needs none). Bit for bit what `count` calls
// of optimiser_step compute.
void optimiser_steps(Optimiser rule, DType t, std::size_t count, const int64_t* n, const OptimiserStep* const* hp,
                     void* const* ptrs);

// What follows a convolution in the same call: y += bias (one value per output channel, as the
// broadcast add of a Conv layer's bias), then y = op(y) (unary's op with its parameters a and b).
struct ConvEpilogue {
    bool bias = false;
    bool activation = false;
    Unary op = Unary::relu;
    double a = 0, b = 0;
};

// conv2d into y, then the epilogue on y while it is fresh, with the bits of the eager calls. Where
// a direct kernel (conv_direct.hpp) runs the convolution, the bias and a relu are its own (applied
// in registers: the output is written once); where oneDNN does, the bias is (its bias argument);
// every other activation, and everything on the im2col path, runs as unary in place on y.
void conv2d_epilogue(DType t, const Conv2dShape& s, const void* x, const void* w, const void* bias,
                     const ConvEpilogue& e, void* y);

// One step of an elementwise chain: unary's op (with a and b), or binary's arithmetic op between the
// chain's value and another operand (n elements, or one broadcast), the value on the left or right.
struct ElementwiseStep {
    bool binary = false;
    Unary unary_op = Unary::neg;
    double a = 0, b = 0;
    Binary binary_op = Binary::add;
    bool value_first = true;  // value op other, else other op value
    bool other_scalar = false;
};

// y = the `count` steps applied in turn to the n elements of x, as the unary and binary calls they
// stand for would compute them, without the intermediates: block by block, each block in the L1
// cache through every step, blocks shared among the threads. ptrs: x, each binary step's other
// operand in order, y (which may not be an operand of a step).
void elementwise_chain(DType t, int64_t n, const ElementwiseStep* steps, std::size_t count, void* const* ptrs);

}  // namespace fluxion::backend::cpu
