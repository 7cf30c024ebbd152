#version 450
// softmax / log-softmax along the middle axis of {outer, n, inner}: one invocation per row (o, i).
//   softmax: y = exp(x - m) / s; log-softmax: y = x - m - log(s); m = max(x), s = sum(exp(x - m)).
// BACKWARD: S0 = y, S1 = gy, S2 = gx; softmax gx = y (gy - sum(gy y)), log gx = gy - exp(y) sum(gy).
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int outer, n, inner, log_;
    int off0, off1, off2;
};
#define S0_QUAL readonly
#if BACKWARD
#define S1_QUAL readonly
#endif
#include "slots.glsl"
#include "math.glsl"

void main() {
    FOR_EACH(row, outer * inner) {
        const int base = (row / inner) * n * inner + row % inner;
#if BACKWARD
        C_T total = C_T(0);
        for (int j = 0; j < n; ++j) {
            const int at = base + j * inner;
            total += log_ != 0 ? LOAD1(off1 + at) : LOAD1(off1 + at) * LOAD0(off0 + at);
        }
        for (int j = 0; j < n; ++j) {
            const int at = base + j * inner;
            const C_T y = LOAD0(off0 + at), gy = LOAD1(off1 + at);
            STORE2(off2 + at, log_ != 0 ? gy - t_exp(y) * total : y * (gy - total));
        }
#else
        C_T m = LOAD0(off0 + base);
        for (int j = 1; j < n; ++j) m = max(m, LOAD0(off0 + base + j * inner));
        C_T s = C_T(0);
        for (int j = 0; j < n; ++j) s += t_exp(LOAD0(off0 + base + j * inner) - m);
        const C_T shift = m + t_log(s);
        for (int j = 0; j < n; ++j) {
            const int at = base + j * inner;
            const C_T x = LOAD0(off0 + at);
            STORE1(off1 + at, log_ != 0 ? x - shift : t_exp(x - m) / s);
        }
#endif
    }
}
