#version 450
// fill: S0[off + i] = value for i < n.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int off;
    S0_T value;  // the value as stored (bool and u8: the byte)
};
#include "slots.glsl"

void main() {
    FOR_EACH(i, n) {
        STORE0(off + i, value);
    }
}
