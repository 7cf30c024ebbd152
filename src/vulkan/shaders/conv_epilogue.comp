#version 450
// conv_epilogue: what follows a convolution, in place on its output S1 {N, K, plane}: with `bias`,
// S1 += S0[channel] (rounded as binary's add would store it), then with `act` >= 0 the unary op
// `act` (parameters a, b).
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n, plane, channels;
    int bias, act;
    int off0, off1;
    C_T a;
    C_T b;
};
#define S0_QUAL readonly
#include "slots.glsl"
#include "math.glsl"
#include "unary_ops.glsl"

void main() {
    FOR_EACH(i, n) {
        C_T v = C_T(LOAD1(off1 + i));
        if (bias != 0) v = AS_STORED1(v + C_T(LOAD0(off0 + (i / plane) % channels)));
        if (act >= 0) v = unary_value(act, v, a, b);
        STORE1(off1 + i, v);
    }
}
