#version 450
// gemm: C[b] = alpha op(A[b]) op(B[b]) + beta C[b], row-major, op = transpose when set. Tiled: a
// workgroup of TX x TY invocations computes a BM x BN block of C (BM = TY * TM, BN = TX * TN),
// staging BM x BK of A and BK x BN of B in shared memory per step; each invocation accumulates a
// TM x TN set of C (rows ty + i TY, columns tx + j TX). Every tile size is a specialisation
// constant the host derives from the device's limits (gemm.cpp). Batches are the z dimension.
#include "common.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 2) const int BK = 8;
layout(constant_id = 3) const int TM = 1;
layout(constant_id = 4) const int TN = 1;
const int TX = int(gl_WorkGroupSize.x), TY = int(gl_WorkGroupSize.y);
const int BM = TY * TM, BN = TX * TN;

layout(std430, binding = 0) readonly buffer Params {
    int M, N, K;
    int lda, ldb, ldc;
    int stride_a, stride_b, stride_c;
    int batch;
    int trans_a, trans_b;
    int off0, off1, off2;
    C_T alpha;
    C_T beta;
};
#define S0_QUAL readonly
#define S1_QUAL readonly
#include "slots.glsl"

shared C_T As[BK * BM];  // As[k * BM + m]
shared C_T Bs[BK * BN];  // Bs[k * BN + n]

void main() {
    const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
    const int tid = ty * TX + tx, threads = TX * TY;
    const int m0 = int(gl_WorkGroupID.y) * BM, n0 = int(gl_WorkGroupID.x) * BN;
    for (int b = int(gl_WorkGroupID.z); b < batch; b += int(gl_NumWorkGroups.z)) {
        const int a_base = off0 + b * stride_a, b_base = off1 + b * stride_b, c_base = off2 + b * stride_c;
        C_T acc[TM * TN];
        for (int i = 0; i < TM * TN; ++i) acc[i] = C_T(0);
        for (int k0 = 0; k0 < K; k0 += BK) {
            for (int e = tid; e < BK * BM; e += threads) {
                const int k = e / BM, m = e % BM, gm = m0 + m, gk = k0 + k;
                C_T v = C_T(0);
                if (gm < M && gk < K) v = LOAD0(a_base + (trans_a != 0 ? gk * lda + gm : gm * lda + gk));
                As[e] = v;
            }
            for (int e = tid; e < BK * BN; e += threads) {
                const int k = e / BN, n = e % BN, gn = n0 + n, gk = k0 + k;
                C_T v = C_T(0);
                if (gn < N && gk < K) v = LOAD1(b_base + (trans_b != 0 ? gn * ldb + gk : gk * ldb + gn));
                Bs[e] = v;
            }
            barrier();
            for (int k = 0; k < BK; ++k) {
                C_T a_reg[TM];
                for (int i = 0; i < TM; ++i) a_reg[i] = As[k * BM + ty + i * TY];
                for (int j = 0; j < TN; ++j) {
                    const C_T b_reg = Bs[k * BN + tx + j * TX];
                    for (int i = 0; i < TM; ++i) acc[i * TN + j] += a_reg[i] * b_reg;
                }
            }
            barrier();
        }
        for (int i = 0; i < TM; ++i) {
            const int gm = m0 + ty + i * TY;
            if (gm >= M) continue;
            for (int j = 0; j < TN; ++j) {
                const int gn = n0 + tx + j * TX;
                if (gn >= N) continue;
                const int at = c_base + gm * ldc + gn;
                C_T v = alpha * acc[i * TN + j];
                if (beta != C_T(0)) v += beta * LOAD2(at);  // beta 0 ignores C, NaN included
                STORE2(at, v);
            }
        }
    }
}
