#version 450
// cast: S1[i] = S0[i] converted (to bool: != 0; to u8: the low byte of the integer value).
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int off0;
    int off1;
};
#define S0_QUAL readonly
#include "slots.glsl"

void main() {
    FOR_EACH(i, n) {
#if S1_BOOL
        STORE1(off1 + i, LOAD0(off0 + i) != S0_T(0) ? 1u : 0u);
#elif S1_BYTE
        STORE1(off1 + i, uint(int(LOAD0(off0 + i))) & 0xffu);
#else
        STORE1(off1 + i, LOAD0(off0 + i));
#endif
    }
}
