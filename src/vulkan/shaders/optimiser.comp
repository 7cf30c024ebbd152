#version 450
// optimiser_step: one fused step of a rule over n parameters (the CPU backend's optimiser.cpp has
// the rules). S0 = param, S1 = grad, S2 = state1, S3 = state2 (bound to param when unused).
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n, rule;
    int off0, off1, off2, off3;
    C_T eta, rho, beta1, beta2, epsilon, correction1, correction2, shrink;
};
#define S1_QUAL readonly
#include "slots.glsl"

void main() {
    FOR_EACH(i, n) {
        const C_T g = LOAD1(off1 + i);
        C_T p = LOAD0(off0 + i);
        if (rule == 0) {
            p -= eta * g;
        } else if (rule <= 2) {  // momentum, nesterov
            const C_T v = rho * LOAD2(off2 + i) + g;
            STORE2(off2 + i, v);
            p -= rule == 1 ? eta * v : eta * (g + rho * v);
        } else if (rule == 3) {  // rmsprop
            const C_T s = rho * LOAD2(off2 + i) + (C_T(1) - rho) * g * g;
            STORE2(off2 + i, s);
            p -= eta * g / (sqrt(s) + epsilon);
        } else {  // adam, adamw
            const C_T m = beta1 * LOAD2(off2 + i) + (C_T(1) - beta1) * g;
            const C_T v = beta2 * LOAD3(off3 + i) + (C_T(1) - beta2) * g * g;
            STORE2(off2 + i, m);
            STORE3(off3 + i, v);
            p = p * shrink - eta * (m / correction1) / (sqrt(v / correction2) + epsilon);
        }
        STORE0(off0 + i, p);
    }
}
