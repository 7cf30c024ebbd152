#version 450
// unary: S1[i] = op(S0[i]) in the compute type C_T (backend::Unary's codes; the formulas of
// src/core/elementwise_formulas.def). Integer variants (INTEGER) take neg, abs, square and sign only.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int op;
    int off0;
    int off1;
    C_T a;
    C_T b;
};
#define S0_QUAL readonly
#include "slots.glsl"
#if !INTEGER
#include "math.glsl"
#endif
#include "unary_ops.glsl"

void main() {
    FOR_EACH(i, n) {
        const C_T x = LOAD0(off0 + i);
#if INTEGER
        STORE1(off1 + i, unary_integer(op, x));
#else
        STORE1(off1 + i, unary_value(op, x, a, b));
#endif
    }
}
