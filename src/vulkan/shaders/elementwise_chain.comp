#version 450
// elementwise_chain: S4[i] = the chain's steps applied in turn to S0[i] (backend::ElementwiseStep),
// each result rounded as the unfused kernel would store it. A step's `code` is a backend::Unary, or
// with flag 1 a backend::Binary between the value and another operand: S1, S2 or S3 (flags >> 4),
// element i or, with flag 4, element 0; flag 2 puts the value on the left. Up to 8 steps and 3
// other operands a dispatch (elementwise.cpp splits longer chains).
#include "common.glsl"
layout(local_size_x_id = 0) in;
struct Step {
    int code;
    int flags;
    C_T a;
    C_T b;
};
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int count;
    int off0, off1, off2, off3, off4;
    int unused;  // steps[] at 32 bytes, where its f64 variant's alignment puts it
    Step steps[8];
};
#define S0_QUAL readonly
#define S1_QUAL readonly
#define S2_QUAL readonly
#define S3_QUAL readonly
#include "slots.glsl"
#include "math.glsl"
#include "unary_ops.glsl"
#include "binary_ops.glsl"

C_T other(int slot, int i) {
    if (slot == 1) return C_T(LOAD1(off1 + i));
    if (slot == 2) return C_T(LOAD2(off2 + i));
    return C_T(LOAD3(off3 + i));
}

void main() {
    FOR_EACH(i, n) {
        C_T v = C_T(LOAD0(off0 + i));
        for (int s = 0; s < count; ++s) {
            const int flags = steps[s].flags;
            if ((flags & 1) == 0) {
                v = unary_value(steps[s].code, v, steps[s].a, steps[s].b);
            } else {
                const C_T o = other(flags >> 4, (flags & 4) != 0 ? 0 : i);
                v = (flags & 2) != 0 ? binary_value(steps[s].code, v, o) : binary_value(steps[s].code, o, v);
            }
            v = AS_STORED4(v);
        }
        STORE4(off4 + i, v);
    }
}
