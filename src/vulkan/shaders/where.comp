#version 450
// where: S3[i] = S0[view c(i)] != 0 ? S1[view a(i)] : S2[view b(i)]; S0 is bool, S3 contiguous.
#include "common.glsl"
#include "strided.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int ndim;
    int off0;
    int off1;
    int off2;
    int off3;
    int shape[MAX_DIMS];
    int strides[4 * MAX_DIMS];
};
#define S0_QUAL readonly
#define S1_QUAL readonly
#define S2_QUAL readonly
#include "slots.glsl"

void main() {
    FOR_EACH(i, n) {
        int c, a, b;
        STRIDED_OFFSET(c, i, 0);
        STRIDED_OFFSET(a, i, 1);
        STRIDED_OFFSET(b, i, 2);
        if (LOAD0(off0 + c) != 0u) {
            STORE3(off3 + i, LOAD1(off1 + a));
        } else {
            STORE3(off3 + i, LOAD2(off2 + b));
        }
    }
}
