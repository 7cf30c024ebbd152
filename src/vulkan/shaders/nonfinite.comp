#version 450
// nonfinite_check: S1[off1], one f32 the host cleared to 0, becomes NaN where an element of
// S0[off0, off0 + n), divided by `divisor` in the compute type unless it is 1, is not finite. Every
// invocation that finds one writes the same value.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int off0;
    int off1;
    C_T divisor;
};
#define S0_QUAL readonly
#include "slots.glsl"

void main() {
    FOR_EACH(i, n) {
        C_T v = C_T(LOAD0(off0 + i));
        if (divisor != C_T(1)) v = v / divisor;
        if (isnan(v) || isinf(v)) STORE1(off1, uintBitsToFloat(0x7fc00000u));
    }
}
