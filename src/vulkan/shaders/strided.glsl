// strided.glsl — element offsets in up to three strided views sharing one shape (copy_strided,
// binary, where). The host merges contiguous dimensions and drops size-1 ones first.
#define MAX_DIMS 8
// The offset of row-major element `linear` in view k of a parameter block with `ndim`, `shape`
// and `strides[k * MAX_DIMS + d]`.
#define STRIDED_OFFSET(out, linear, k)                         \
    {                                                          \
        int rest_ = (linear);                                  \
        out = 0;                                               \
        for (int d_ = ndim - 1; d_ >= 0; --d_) {               \
            const int i_ = rest_ % shape[d_];                  \
            rest_ /= shape[d_];                                \
            out += i_ * strides[(k) * MAX_DIMS + d_];          \
        }                                                      \
    }
