#version 450
// unary_backward: S3[i] = S2[i] * op'(S0[i]) given y = S1[i] = op(S0[i]) (float types only).
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int op;
    int off0;
    int off1;
    int off2;
    int off3;
    C_T a;
    C_T b;
};
#define S0_QUAL readonly
#define S1_QUAL readonly
#define S2_QUAL readonly
#include "slots.glsl"
#include "math.glsl"
#include "unary_ops.glsl"

void main() {
    FOR_EACH(i, n) {
        STORE3(off3 + i, unary_gradient(op, LOAD0(off0 + i), LOAD1(off1 + i), LOAD2(off2 + i), a, b));
    }
}
