#version 450
// optimiser_step: one fused step of a rule over n parameters. S0 = param, S1 = grad, S2 = state1,
// S3 = state2, S4 = state3 (bound to param when unused).
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n, rule;
    int off0, off1, off2, off3, off4;
    C_T eta, rho, beta1, beta2, epsilon, lower, upper, c1, c2, shrink, k1, k2;
};
#define S1_QUAL readonly
#include "slots.glsl"

#define T C_T
#define fx_sqrt sqrt
#define fx_abs abs

// The rules' formulas are the op registry's (core/elementwise_formulas.def, FX_OPTIMISER).
void main() {
    FOR_EACH(i, n) {
        const C_T g = LOAD1(off1 + i);
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
            STORE0(off0 + i, new_p);                            \
        }
#include "elementwise_formulas.def"
    }
}
