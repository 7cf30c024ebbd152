// The CPU table's entries for the kernels that cannot compute f16 and bf16 in their own loops
// (products on some CPUs, convolutions, pools other than 2×2 max ones, softmax, index_add, the
// optimiser step): the operands are widened to f32, the f32 kernel runs (so sums, dot products and
// convolutions accumulate in f32) and the results are rounded back once, to nearest even. Every
// other type goes straight to its kernel.
// The elementwise kernels and the reductions compute the 16-bit types themselves, in registers
// (half.hpp's Compute), and are not here: a whole-tensor f32 copy of every operand and result
// tripled the memory traffic of the ops that are all memory traffic.
//
// bf16 convolutions of the few-channel shapes the direct kernels take go first, on a CPU with AMX,
// to fluxion's own AMX kernels (conv_amx.hpp): f32 sums in another order, one rounding.
//
// f16 and bf16 matrix products go to gemm_half.cpp where it is built and preferred (AVX2 without
// AVX-512): it converts the operands while packing them, without f32 copies.
//
// bf16 matrix products and convolutions go first to oneDNN's native bf16 kernels where they are
// faster than f32 ones on this CPU (onednn_bf16_preferred(); matmul_onednn.cpp, conv_onednn.cpp):
// the same f32 accumulation and single rounding, without the widened copies. oneDNN 2.6 declined
// f16 matmuls and convolutions on the AVX-512 BF16 CPU (Zen 4, no AVX-512 FP16) this was written
// on, so f16 products are never theirs.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "cpu/conv_amx.hpp"
#include "cpu/conv_direct.hpp"
#include "cpu/conv_onednn.hpp"
#include "cpu/gemm_half.hpp"
#include "cpu/half.hpp"
#include "cpu/kernels.hpp"
#include "cpu/matmul_onednn.hpp"
#include "cpu/onednn.hpp"
#include "cpu/parallel.hpp"
#include "cpu/pool_max2x2.hpp"

namespace fluxion::backend::cpu::widen {
namespace {

bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; }

// The f32 copies of the calls in progress on this thread, innermost last. Each level keeps its
// buffer for the next call of its depth (up to kKeptScratch bytes), so that a replayed f16/bf16
// step allocates nothing once every level has grown to its size. Not the kernels' Scratch: the f32
// kernel called in between uses that.
struct Levels {
    struct Level {
        void* data = nullptr;
        std::size_t bytes = 0;
    };
    std::vector<Level> kept;
    std::size_t depth = 0;
    ~Levels() {
        for (const Level& l : kept) free(0, l.data);
    }
};
thread_local Levels levels;

// An f32 copy of `n` elements of type `t` (or an uninitialised one when `src` is null), living as
// long as the object; narrow() rounds it back into a buffer of type `t`. Objects of one thread go
// in reverse order of their making (as C++ destroys locals and members).
class F32 {
public:
    F32(DType t, int64_t n, const void* src) : t_(t), n_(n), data_(nullptr), owned_(false) {
        if (n_ <= 0) return;
        const std::size_t bytes = std::size_t(n_) * sizeof(float);
        if (bytes > kKeptScratch) {
            data_ = static_cast<float*>(alloc(0, bytes));
            owned_ = true;
        } else {
            if (levels.kept.size() == levels.depth) levels.kept.emplace_back();
            Levels::Level& level = levels.kept[levels.depth];
            if (level.bytes < bytes) {
                void* grown = alloc(0, bytes);
                free(0, level.data);
                level = {grown, bytes};
            }
            data_ = static_cast<float*>(level.data);
        }
        if (src) {
            try {
                cast(0, t_, DType::f32, n_, src, data_);
            } catch (...) {
                if (owned_) free(0, data_);
                throw;
            }
        }
        if (!owned_) ++levels.depth;  // the level is taken once nothing can throw any more
    }
    ~F32() {
        if (owned_) free(0, data_);
        else if (data_) --levels.depth;
    }
    F32(const F32&) = delete;
    F32& operator=(const F32&) = delete;
    float* data() const { return data_; }
    void narrow(void* dst) const {
        if (n_ > 0) cast(0, DType::f32, t_, n_, data_, dst);
    }

private:
    DType t_;
    int64_t n_;
    float* data_;
    bool owned_;
};

// Elements of a row-major matrix batch reached by op(X) of `rows` × `cols` with leading dimension
// `ld`, `batch` matrices `stride` apart (a stride of 0 repeats one matrix).
int64_t matrix_reach(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch) {
    if (rows == 0 || cols == 0 || batch == 0) return 0;
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

}  // namespace

void index_add(int device, DType t, int64_t outer, int64_t n_dst, int64_t inner, const void* src, const int64_t* idx,
               int64_t n_idx, void* dst) {
    if (!is_half(t)) return cpu::index_add(device, t, outer, n_dst, inner, src, idx, n_idx, dst);
    F32 s(t, outer * n_idx * inner, src), d(t, outer * n_dst * inner, dst);
    cpu::index_add(device, DType::f32, outer, n_dst, inner, s.data(), idx, n_idx, d.data());
    d.narrow(dst);
}

void gemm(int device, DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
          int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, double beta, void* c,
          int64_t ldc, int64_t stride_c, int64_t batch) {
    if (!is_half(t))
        return cpu::gemm(device, t, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                         stride_c, batch);
    if (t == DType::bf16 && onednn_bf16_preferred() &&
        onednn_gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                         batch))
        return;
    if (batch > 0 && gemm_half_preferred()) {
        check_gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc);
        const std::size_t bytes = t == DType::f16 ? sizeof(Half) : sizeof(BFloat16);
        const auto* pa = static_cast<const unsigned char*>(a);
        const auto* pb = static_cast<const unsigned char*>(b);
        auto* pc = static_cast<unsigned char*>(c);
        const auto one = [&](int64_t i) {
            gemm_half(t, trans_a, trans_b, m, n, k, float(alpha), pa + i * stride_a * bytes, lda,
                      pb + i * stride_b * bytes, ldb, float(beta), pc + i * stride_c * bytes, ldc);
        };
        if (const int64_t team = gemm_batch_team(m, n, k, ldc, stride_c, batch); team > 1)
            parallel_for(batch, team, [&](int64_t first, int64_t last) {
                for (int64_t i = first; i < last; ++i) one(i);
            });
        else
            for (int64_t i = 0; i < batch; ++i) one(i);
        return;
    }
    F32 wa(t, matrix_reach(trans_a ? k : m, trans_a ? m : k, lda, stride_a, batch), a);
    F32 wb(t, matrix_reach(trans_b ? n : k, trans_b ? k : n, ldb, stride_b, batch), b);
    // C is read when beta is not zero, and where rows of C between the m × n blocks must keep their
    // values through the narrowing of the whole reach.
    const bool packed_c = ldc == n && (batch == 1 || stride_c == m * n);
    F32 wc(t, matrix_reach(m, n, ldc, stride_c, batch), beta != 0 || !packed_c ? c : nullptr);
    cpu::gemm(device, DType::f32, trans_a, trans_b, m, n, k, alpha, wa.data(), lda, stride_a, wb.data(), ldb, stride_b,
              beta, wc.data(), ldc, stride_c, batch);
    wc.narrow(c);
}

// The direct kernels read and write 16-bit cells themselves (conv_direct.hpp): where they take a
// pass that is not oneDNN's, they run it without the f32 copies, with the same bits; on bf16 with
// AMX, the AMX kernel runs it, with the bias and relu as the eager calls give them.
bool direct_conv2d(DType t, const Conv2dShape* s, const void* x, const void* w, const void* bias, bool relu, void* y) {
    if (t == DType::bf16 && bf16_conv_in_onednn(ConvPass::forward, *s)) return false;
    if (t == DType::bf16 && amx_conv2d(ConvPass::forward, *s, x, w, y, bias, relu)) return true;
    return cpu::direct_conv2d(t, ConvPass::forward, *s, x, w, y, bias, relu);
}

void conv2d(int device, DType t, const Conv2dShape* s, const void* x, const void* w, void* y) {
    if (!is_half(t)) return cpu::conv2d(device, t, s, x, w, y);
    if (t == DType::bf16 && bf16_conv_in_onednn(ConvPass::forward, *s) &&
        onednn_conv2d_bf16(ConvPass::forward, *s, x, w, y))
        return;
    if (t == DType::bf16 && amx_conv2d(ConvPass::forward, *s, x, w, y)) return;
    if (cpu::direct_conv2d(t, ConvPass::forward, *s, x, w, y)) return;
    F32 wx(t, s->n * s->c * s->h * s->w, x), ww(t, s->k * (s->c / s->groups) * s->r * s->s, w);
    F32 wy(t, s->n * s->k * s->oh * s->ow, nullptr);
    cpu::conv2d(device, DType::f32, s, wx.data(), ww.data(), wy.data());
    wy.narrow(y);
}

void conv2d_backward_input(int device, DType t, const Conv2dShape* s, const void* gy, const void* w, void* gx) {
    if (!is_half(t)) return cpu::conv2d_backward_input(device, t, s, gy, w, gx);
    if (t == DType::bf16 && bf16_conv_in_onednn(ConvPass::backward_input, *s) &&
        onednn_conv2d_bf16(ConvPass::backward_input, *s, gy, w, gx))
        return;
    if (t == DType::bf16 && amx_conv2d(ConvPass::backward_input, *s, gy, w, gx)) return;
    if (cpu::direct_conv2d(t, ConvPass::backward_input, *s, gy, w, gx)) return;
    F32 wgy(t, s->n * s->k * s->oh * s->ow, gy), ww(t, s->k * (s->c / s->groups) * s->r * s->s, w);
    F32 wgx(t, s->n * s->c * s->h * s->w, nullptr);
    cpu::conv2d_backward_input(device, DType::f32, s, wgy.data(), ww.data(), wgx.data());
    wgx.narrow(gx);
}

void conv2d_backward_weight(int device, DType t, const Conv2dShape* s, const void* x, const void* gy, void* gw) {
    if (!is_half(t)) return cpu::conv2d_backward_weight(device, t, s, x, gy, gw);
    if (t == DType::bf16 && bf16_conv_in_onednn(ConvPass::backward_weight, *s) &&
        onednn_conv2d_bf16(ConvPass::backward_weight, *s, x, gy, gw))
        return;
    if (t == DType::bf16 && amx_conv2d(ConvPass::backward_weight, *s, x, gy, gw)) return;
    if (cpu::direct_conv2d(t, ConvPass::backward_weight, *s, x, gy, gw)) return;
    F32 wx(t, s->n * s->c * s->h * s->w, x), wgy(t, s->n * s->k * s->oh * s->ow, gy);
    F32 wgw(t, s->k * (s->c / s->groups) * s->r * s->s, nullptr);
    cpu::conv2d_backward_weight(device, DType::f32, s, wx.data(), wgy.data(), wgw.data());
    wgw.narrow(gw);
}

void pool2d(int device, Pool op, DType t, const Pool2dShape* s, const void* x, void* y) {
    if (!is_half(t)) return cpu::pool2d(device, op, t, s, x, y);
    if (op == Pool::max && max_pool_2x2_forward(t, *s, x, y)) return;  // in 16 bits, no copies
    F32 wx(t, s->n * s->c * s->h * s->w, x), wy(t, s->n * s->c * s->oh * s->ow, nullptr);
    cpu::pool2d(device, op, DType::f32, s, wx.data(), wy.data());
    wy.narrow(y);
}

// Max pooling finds each window's maximum again by comparing x with y: y holds one of the window's
// half values exactly, so the widened copies compare equal where the originals did.
void pool2d_backward(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y, const void* gy,
                     void* gx) {
    if (!is_half(t)) return cpu::pool2d_backward(device, op, t, s, x, y, gy, gx);
    if (op == Pool::max && x && y && max_pool_2x2_backward(t, *s, x, y, gy, gx, false)) return;
    const int64_t in = s->n * s->c * s->h * s->w, out = s->n * s->c * s->oh * s->ow;
    F32 wx(t, x ? in : 0, x), wy(t, y ? out : 0, y), wgy(t, out, gy), wgx(t, in, nullptr);
    cpu::pool2d_backward(device, op, DType::f32, s, wx.data(), wy.data(), wgy.data(), wgx.data());
    wgx.narrow(gx);
}

void softmax(int device, bool log, DType t, int64_t outer, int64_t n, int64_t inner, const void* x, void* y) {
    if (!is_half(t)) return cpu::softmax(device, log, t, outer, n, inner, x, y);
    F32 wx(t, outer * n * inner, x), wy(t, outer * n * inner, nullptr);
    cpu::softmax(device, log, DType::f32, outer, n, inner, wx.data(), wy.data());
    wy.narrow(y);
}

void softmax_backward(int device, bool log, DType t, int64_t outer, int64_t n, int64_t inner, const void* y,
                      const void* gy, void* gx) {
    if (!is_half(t)) return cpu::softmax_backward(device, log, t, outer, n, inner, y, gy, gx);
    const int64_t count = outer * n * inner;
    F32 wy(t, count, y), wgy(t, count, gy), wgx(t, count, nullptr);
    cpu::softmax_backward(device, log, DType::f32, outer, n, inner, wy.data(), wgy.data(), wgx.data());
    wgx.narrow(gx);
}

// Parameters and state stay in their half type (what fx::f16(model) asks for); the update itself is
// computed in f32, so it is rounded once. Steps smaller than half a unit in the last place of a
// parameter are lost, as in any pure half-precision training: keep f32 master weights for those.
void optimiser_step(int device, Optimiser rule, DType t, int64_t n, void* param, const void* grad, void* state1,
                    void* state2, void* state3, const OptimiserStep* hp) {
    if (!is_half(t)) return cpu::optimiser_step(device, rule, t, n, param, grad, state1, state2, state3, hp);
    F32 wp(t, n, param), wg(t, n, grad), ws1(t, state1 ? n : 0, state1), ws2(t, state2 ? n : 0, state2),
        ws3(t, state3 ? n : 0, state3);
    cpu::optimiser_step(device, rule, DType::f32, n, wp.data(), wg.data(), ws1.data(), ws2.data(), ws3.data(), hp);
    wp.narrow(param);
    if (state1) ws1.narrow(state1);
    if (state2) ws2.narrow(state2);
    if (state3) ws3.narrow(state3);
}

}  // namespace fluxion::backend::cpu::widen
