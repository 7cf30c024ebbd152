#version 450
// optimiser_step: one fused step of a rule over n parameters. S0 = param, S1 = grad, S2 = state1,
// S3 = state2, S4 = state3 (bound to param when unused). MIXED (mixed precision's step): f32
// parameters and state, 16-bit gradients divided by `divisor` unless it is 1, and each updated
// parameter rounded into S5, the compute copy.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n, rule;
    int off0, off1, off2, off3, off4;
#if MIXED
    int off5;
#endif
    C_T eta, rho, beta1, beta2, epsilon, lower, upper, c1, c2, shrink, k1, k2;
#if MIXED
    C_T divisor;
#endif
};
#define S1_QUAL readonly
#include "slots.glsl"

#define T C_T
#define fx_sqrt sqrt
#define fx_abs abs

#if MIXED
#define STORE_COPY(i, v) STORE5(i, v)
#else
#define STORE_COPY(i, v)
#endif

// The rules' formulas are the op registry's (core/elementwise_formulas.def, FX_OPTIMISER).
void main() {
    FOR_EACH(i, n) {
#if MIXED
        C_T g = LOAD1(off1 + i);
        if (divisor != C_T(1)) g = g / divisor;
#else
        const C_T g = LOAD1(off1 + i);
#endif
        const C_T p = LOAD0(off0 + i);
#define FX_OPTIMISER(name, code, states, new_m, new_v, new_w, new_p) \
        if (rule == code) {                                     \
            const C_T m0 = (states) >= 1 ? LOAD2(off2 + i) : C_T(0); \
            const C_T v0 = (states) >= 2 ? LOAD3(off3 + i) : C_T(0); \
            const C_T w0 = (states) >= 3 ? LOAD4(off4 + i) : C_T(0); \
            const C_T m = new_m;                                \
            const C_T v = new_v;                                \
            const C_T w = new_w;                                \
            if ((states) >= 1) STORE2(off2 + i, m);             \
            if ((states) >= 2) STORE3(off3 + i, v);             \
            if ((states) >= 3) STORE4(off4 + i, w);             \
            const C_T p1 = new_p;                               \
            STORE0(off0 + i, p1);                               \
            STORE_COPY(off5 + i, p1);                           \
        }
#include "elementwise_formulas.def"
    }
}
