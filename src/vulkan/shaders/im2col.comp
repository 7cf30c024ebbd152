#version 450
// im2col: S1 = the columns {images, C*R*S, OH*OW} of the input patches of S0 {images, C, H, W};
// cells in the padding are 0.
#include "common.glsl"
layout(local_size_x_id = 0) in;
#include "conv_params.glsl"
#define S0_QUAL readonly
#include "slots.glsl"

void main() {
    const int P = OH * OW, rows = C * R * S;
    FOR_EACH(i, images * rows * P) {
        const int p = i % P, row = (i / P) % rows, image = i / (P * rows);
        const int kw = row % S, kh = (row / S) % R, c = row / (S * R);
        const int h = (p / OW) * stride_h - pad_h + kh * dil_h, w = (p % OW) * stride_w - pad_w + kw * dil_w;
        C_T v = C_T(0);
        if (h >= 0 && h < H && w >= 0 && w < W) v = LOAD0(off0 + ((image * C + c) * H + h) * W + w);
        STORE1(off1 + i, v);
    }
}
