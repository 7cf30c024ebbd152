#version 450
// copy_strided: S1[off1 + dst view(i)] = S0[off0 + src view(i)] over the shared shape.
#include "common.glsl"
#include "strided.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int ndim;
    int off0;
    int off1;
    int shape[MAX_DIMS];
    int strides[2 * MAX_DIMS];
};
#define S0_QUAL readonly
#include "slots.glsl"

void main() {
    FOR_EACH(i, n) {
        int a, b;
        STRIDED_OFFSET(a, i, 0);
        STRIDED_OFFSET(b, i, 1);
        STORE1(off1 + b, LOAD0(off0 + a));
    }
}
