// pool_params.glsl — backend::Pool2dShape as the parameter block of the pooling shaders, with the
// op (max 0, mean 1), the buffers' element offsets and, for the gradient, the activation whose
// gradient follows it (a backend::Unary, or -1).
layout(std430, binding = 0) readonly buffer Params {
    int N, C, H, W, OH, OW;
    int KH, KW, stride_h, stride_w, pad_h, pad_w;
    int op;
    int off0, off1, off2, off3;
    int act;
};

// A mean's divisor: the window's cells inside the padded input (PyTorch's count_include_pad).
int mean_divisor(int oy, int ox) {
    const int y0 = oy * stride_h - pad_h, x0 = ox * stride_w - pad_w;
    const int rows = min(y0 + KH, H + pad_h) - y0, cols = min(x0 + KW, W + pad_w) - x0;
    return max(rows * cols, 1);
}
