// kernels.hpp — the CPU backend's functions, one per entry of the Backend table (see
// core/backend.hpp for what each computes), and the few helpers the kernel files share.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/backend.hpp"

namespace fluxion::backend::cpu {

using std::int64_t;

// Loops over fewer elements than this stay on one thread: forking costs more than it saves.
inline constexpr int64_t kParallelMin = 1 << 15;

// Threads for OpenMP regions and OpenBLAS: FLUXION_NUM_THREADS, else the hardware threads.
// The first call configures both libraries.
int threads();

// Working memory for one kernel call (64-byte aligned). Requests up to kKeptScratch bytes reuse a
// per-thread buffer that grows on demand, so hot kernels do not allocate; larger ones get their
// own allocation, returned when the Scratch goes, so one huge call does not pin memory for good.
// One Scratch per thread at a time.
inline constexpr std::size_t kKeptScratch = std::size_t(64) << 20;

class Scratch {
public:
    explicit Scratch(std::size_t bytes);
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    template <class T>
    T* as() const {
        return static_cast<T*>(data_);
    }

private:
    void* data_;
    bool owned_;
};

// The outputs o in [begin, end) of a row whose input index o * stride + offset lies in [0, size):
// the part of a convolution's or a pool's output row that needs no clipping test.
struct Span {
    int64_t begin, end;
};
inline Span inside(int64_t offset, int64_t stride, int64_t size, int64_t count) {
    const int64_t begin = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    const int64_t end = size - 1 - offset >= 0 ? (size - 1 - offset) / stride + 1 : 0;
    return {std::min(begin, count), std::clamp(end, std::min(begin, count), count)};
}

// Which library runs f32 products (f64 always runs in OpenBLAS): by size, oneDNN's sgemm for the
// larger ones, where this build has oneDNN; FLUXION_SGEMM=openblas|onednn names one (gemm.cpp).
enum class SgemmChoice { openblas, onednn, by_size };
SgemmChoice sgemm_choice();

// True where an f32 product of m×n×k, B read with rows ldb apart, runs in oneDNN's sgemm rather than
// OpenBLAS: as sgemm_choice() says, and by size, except where oneDNN's AVX2 kernel reads B in place at
// a 4K-aliased stride (gemm.cpp).
bool sgemm_in_onednn(bool trans_b, int64_t m, int64_t n, int64_t k, int64_t ldb);

// The multiply-adds from which f32 products go to oneDNN's sgemm when sgemm_choice() is by_size:
// 2^18 where oneDNN runs AVX-512 kernels, 2^14 elsewhere (gemm.cpp says why).
double sgemm_onednn_min_macs();

// Products of fewer FLOPs than this run on one thread (gemm.cpp says why it depends on
// OMP_WAIT_POLICY).
double gemm_split_min();

// The threads a batch of m×n×k products is split between by products (attention's per-head scores):
// more than one only where each product is small and their results, stride_c apart with rows ldc apart,
// do not overlap (one after another, or side by side in the rows). Otherwise the products run one by one.
int64_t gemm_batch_team(int64_t m, int64_t n, int64_t k, int64_t ldc, int64_t stride_c, int64_t batch);

// Throws ValueError for sizes or leading dimensions that no product accepts (the same for every type).
void check_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc);

// Row-major C = alpha op(A) op(B) + beta C through OpenBLAS or oneDNN, for float and double.
template <class T>
void blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// ---- devices and memory (backend.cpp) ----
bool functional(char* why, std::size_t why_size);
int device_count();
void device_properties(int device, DeviceProperties* out);
void synchronize(int device);
// ---- supports.cpp ----
bool supports(int device, Op op, DType t, char* why, std::size_t why_size);
void* alloc(int device, std::size_t bytes);
void free(int device, void* ptr);
// ---- allocator.cpp: tensor memory handed out (size classes, cached blocks not counted) ----
std::size_t host_bytes_in_use();
std::size_t host_peak_bytes();  // the most in use since the last reset_host_peak()
void reset_host_peak();
void copy_from_host(int device, void* dst, const void* src, std::size_t bytes);
void copy_to_host(int device, void* dst, const void* src, std::size_t bytes);
void copy_device(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes);

// ---- layout.cpp ----
void fill(int device, DType t, int64_t n, void* dst, double value);
void copy_strided(int device, DType t, const Strided* src_view, const void* src, const int64_t* dst_strides,
                  void* dst);
void cast(int device, DType from, DType to, int64_t n, const void* src, void* dst);
void index_select(int device, DType t, int64_t outer, int64_t n_src, int64_t inner, const void* src,
                  const int64_t* idx, int64_t n_idx, void* dst);
void index_add(int device, DType t, int64_t outer, int64_t n_dst, int64_t inner, const void* src,
               const int64_t* idx, int64_t n_idx, void* dst);

// ---- unary.cpp ----
// Ops of a few instructions per element. The others (exp, tanh, ...) cost about 16 of them, so they
// take threads from a sixteenth of the size (unary.cpp, and the fused chains of fused.cpp).
constexpr bool unary_is_cheap(Unary op) {
    return op == Unary::neg || op == Unary::abs || op == Unary::square || op == Unary::relu ||
           op == Unary::leakyrelu || op == Unary::clamp || op == Unary::sign || op == Unary::recip;
}
inline constexpr int64_t kCostlyOp = 16;

void unary(int device, Unary op, DType t, int64_t n, const void* x, void* y, double a, double b);
void unary_backward(int device, Unary op, DType t, int64_t n, const void* x, const void* y, const void* gy,
                    void* gx, double a, double b);

// ---- binary.cpp ----
void binary(int device, Binary op, DType t, const Strided* a_view, const void* a, const Strided* b_view,
            const void* b, void* out);
void where(int device, DType t, const Strided* c_view, const void* c, const Strided* a_view, const void* a,
           const Strided* b_view, const void* b, void* out);

// ---- reduce.cpp ----
void reduce(int device, Reduce op, DType t, int64_t outer, int64_t n, int64_t inner, const void* src, void* dst);

// ---- gemm.cpp ----
void gemm(int device, DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, double beta,
          void* c, int64_t ldc, int64_t stride_c, int64_t batch);

// ---- conv.cpp ----
void conv2d(int device, DType t, const Conv2dShape* s, const void* x, const void* w, void* y);
void conv2d_backward_input(int device, DType t, const Conv2dShape* s, const void* gy, const void* w, void* gx);
void conv2d_backward_weight(int device, DType t, const Conv2dShape* s, const void* x, const void* gy, void* gw);

// ---- pool.cpp ----
void pool2d(int device, Pool op, DType t, const Pool2dShape* s, const void* x, void* y);
void pool2d_backward(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                     const void* gy, void* gx);

// ---- softmax.cpp ----
void softmax(int device, bool log, DType t, int64_t outer, int64_t n, int64_t inner, const void* x, void* y);
void softmax_backward(int device, bool log, DType t, int64_t outer, int64_t n, int64_t inner, const void* y,
                      const void* gy, void* gx);

// ---- recurrent.cpp (f32 and f64) ----
void lstm_cell(int device, DType t, int64_t n, int64_t h, void* gates, int64_t ld_gates, const void* c_prev, void* c,
               void* h_out, int64_t ld_h);
void lstm_cell_backward(int device, DType t, int64_t n, int64_t h, const void* gates, int64_t ld_gates,
                        const void* c_prev, const void* c, const void* gh, int64_t ld_gh, const void* gh_next,
                        void* gc, void* dgates);

// ---- batch_norm.cpp (f32 and f64) ----
void batch_norm(int device, DType t, int64_t outer, int64_t c, int64_t inner, const void* x, const void* weight,
                const void* bias, double epsilon, bool relu, void* y, void* mean, void* var, void* rstd);
void batch_norm_backward(int device, DType t, int64_t outer, int64_t c, int64_t inner, const void* x, const void* y,
                         const void* gy, const void* mean, const void* rstd, const void* weight, void* gx,
                         void* gweight, void* gbias);

// ---- optimiser.cpp ----
void optimiser_step(int device, Optimiser rule, DType t, int64_t n, void* param, const void* grad, void* state1,
                    void* state2, void* state3, const OptimiserStep* hp);
void mixed_optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const int64_t* n,
                           const OptimiserStep* const* hp, double divisor, void* const* ptrs);

// ---- nonfinite_check.cpp ----
void nonfinite_check(int device, DType t, std::size_t count, const int64_t* n, const void* const* ptrs,
                     double divisor, void* flag);

// ---- widen.cpp: the table's entries for the kernels above that take no f16 or bf16 of their own:
// the 16-bit floats run the f32 kernel on widened copies and round the results back; every other
// type goes to the kernel above. ----
namespace widen {
void index_add(int device, DType t, int64_t outer, int64_t n_dst, int64_t inner, const void* src,
               const int64_t* idx, int64_t n_idx, void* dst);
void gemm(int device, DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, double beta,
          void* c, int64_t ldc, int64_t stride_c, int64_t batch);
void conv2d(int device, DType t, const Conv2dShape* s, const void* x, const void* w, void* y);
void conv2d_backward_input(int device, DType t, const Conv2dShape* s, const void* gy, const void* w, void* gx);
void conv2d_backward_weight(int device, DType t, const Conv2dShape* s, const void* x, const void* gy, void* gw);
// conv2d of f16 or bf16 with the bias (or null) and relu of fused.cpp's epilogue, where the direct
// kernels compute the pass on 16-bit cells; false, having written nothing, elsewhere.
bool direct_conv2d(DType t, const Conv2dShape* s, const void* x, const void* w, const void* bias, bool relu, void* y);
void pool2d(int device, Pool op, DType t, const Pool2dShape* s, const void* x, void* y);
void pool2d_backward(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                     const void* gy, void* gx);
void softmax(int device, bool log, DType t, int64_t outer, int64_t n, int64_t inner, const void* x, void* y);
void softmax_backward(int device, bool log, DType t, int64_t outer, int64_t n, int64_t inner, const void* y,
                      const void* gy, void* gx);
void optimiser_step(int device, Optimiser rule, DType t, int64_t n, void* param, const void* grad, void* state1,
                    void* state2, void* state3, const OptimiserStep* hp);
}  // namespace widen

}  // namespace fluxion::backend::cpu
