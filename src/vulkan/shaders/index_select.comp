#version 450
// index_select: S2[o, j, i] = S0[o, S1[j], i] for src {outer, n_src, inner}, S1 the i64 indices
// (checked on the host), dst {outer, n_idx, inner}.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int total;
    int n_src;
    int inner;
    int n_idx;
    int off0;
    int off1;
    int off2;
};
#define S0_QUAL readonly
#define S1_QUAL readonly
#include "slots.glsl"

void main() {
    FOR_EACH(k, total) {
        const int i = k % inner, j = (k / inner) % n_idx, o = k / (inner * n_idx);
        const int from = int(LOAD1(off1 + j));
        STORE2(off2 + k, LOAD0(off0 + (o * n_src + from) * inner + i));
    }
}
