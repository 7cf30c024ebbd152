#version 450
// One LSTM step's gate arithmetic (core/backend.hpp's lstm_cell and, with BACKWARD,
// lstm_cell_backward): one invocation per (row, unit) in a grid-stride loop, every value read once,
// as src/cpu/recurrent.cpp and src/cuda/recurrent.cu. sigmoid and tanh are the op registry's, as
// the unary kernels compute them. Without it a step is about ten dispatches forward and twenty back.
//   forward:  S0 gates {n, 4h} at row stride ld_gates (i, f, g, o), replaced by their activations;
//             S1 c_prev, S2 c {n, h}; S3 h_out at row stride ld_h.
//   backward: S0 gates (the activations), S1 c_prev, S2 c, S3 gh at row stride ld_gh, S4 gh_next
//             {n, h} (when has_next), S5 gc (the gradient of c, replaced by that of c_prev), S6
//             dgates at row stride ld_gates. dgates may be gates itself: an invocation reads its
//             unit's four gates before it writes their gradients, and no other reads them.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n, h, ld_gates, ld_h, ld_gh, has_next;
    int off0, off1, off2, off3, off4, off5, off6;
};
#define S1_QUAL readonly
#if BACKWARD
#define S2_QUAL readonly
#define S3_QUAL readonly
#define S4_QUAL readonly
#endif
#include "slots.glsl"
#include "math.glsl"
#include "unary_ops.glsl"

void main() {
    FOR_EACH(k, n * h) {
        const int r = k / h, j = k - r * h, row = off0 + r * ld_gates + j;
#if BACKWARD
        const C_T i = LOAD0(row), f = LOAD0(row + h), g = LOAD0(row + 2 * h), o = LOAD0(row + 3 * h);
        const C_T gh = LOAD3(off3 + r * ld_gh + j);
        const C_T dh = has_next != 0 ? gh + LOAD4(off4 + k) : gh;
        const C_T tc = fx_tanh(LOAD2(off2 + k));
        const C_T dc = LOAD5(off5 + k) + dh * o * (C_T(1) - tc * tc);
        const C_T cp = LOAD1(off1 + k);
        const int d = off6 + r * ld_gates + j;
        STORE6(d, dc * g * i * (C_T(1) - i));
        STORE6(d + h, dc * cp * f * (C_T(1) - f));
        STORE6(d + 2 * h, dc * i * (C_T(1) - g * g));
        STORE6(d + 3 * h, dh * tc * o * (C_T(1) - o));
        STORE5(off5 + k, dc * f);
#else
        const C_T i = fx_sigmoid(LOAD0(row)), f = fx_sigmoid(LOAD0(row + h)), g = fx_tanh(LOAD0(row + 2 * h)),
                  o = fx_sigmoid(LOAD0(row + 3 * h));
        const C_T c = f * LOAD1(off1 + k) + i * g;
        STORE0(row, i);
        STORE0(row + h, f);
        STORE0(row + 2 * h, g);
        STORE0(row + 3 * h, o);
        STORE2(off2 + k, c);
        STORE3(off3 + r * ld_h + j, o * fx_tanh(c));
#endif
    }
}
