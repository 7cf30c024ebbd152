#version 450
// index_add: S2[o, d, i] += sum of S0[o, j, i] over the j with S1[j] == d, in increasing j (the
// CPU's order, and no atomics): one invocation per destination element.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int total;  // outer * n_dst * inner
    int n_dst;
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
        const int i = k % inner, d = (k / inner) % n_dst, o = k / (inner * n_dst);
        C_T acc = C_T(LOAD2(off2 + k));
        for (int j = 0; j < n_idx; ++j)
            if (int(LOAD1(off1 + j)) == d) acc += C_T(LOAD0(off0 + (o * n_idx + j) * inner + i));
        STORE2(off2 + k, acc);
    }
}
