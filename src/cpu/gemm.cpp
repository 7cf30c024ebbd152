// Matrix products through OpenBLAS (opened by openblas.cpp, with a kernel for this CPU) and, for
// the larger f32 ones, oneDNN's sgemm (sgemm_choice below). A batch of small products is split
// between threads by products, a larger one is a loop of single products. A small product is split
// by rows of C (or columns, for one row) between fluxion's threads, each slice one single-threaded
// library call (both run single-threaded inside an OpenMP region): OpenBLAS's own threading shares
// packed panels between threads through flags they wait on, whose cost outweighs the work of
// products of a few MFLOP (the Dense layers of an MLP at batch 128).
#include <cblas.h>
#include <strings.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/onednn.hpp"
#include "cpu/openblas.hpp"
#include "cpu/parallel.hpp"

#if FLUXION_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace fluxion::backend::cpu {

// Which library runs an f32 product where this build has both (BENCHMARKS.md, "Kernel choices"):
// oneDNN's sgemm from kOnednnMinMacs multiply-adds on, where it was measured faster on the shapes
// fluxion calls (its small-matrix path packs nothing); OpenBLAS below, and for f64. Where oneDNN
// runs AVX-512 kernels OpenBLAS has small-matrix kernels too (SkylakeX's, which neither pack nor
// zero C first) and kept the lead on attention's per-head products. Its AVX2 kernels (Zen, Haswell)
// have none: they pack both operands and zero C in a pass of its own, and oneDNN was faster from
// about 2^14 multiply-adds (AMD EPYC Zen 3: attention's products 1.2-2.1×, the MLP's
// matrix-vector ones 3-4×), so there the threshold is kOnednnMinMacsAvx2. FLUXION_SGEMM=openblas
// or onednn puts every f32 product in one of them.
constexpr double kOnednnMinMacs = double(1 << 18);
constexpr double kOnednnMinMacsAvx2 = double(1 << 14);

double sgemm_onednn_min_macs() { return onednn_avx512() ? kOnednnMinMacs : kOnednnMinMacsAvx2; }

SgemmChoice sgemm_choice() {
    static const SgemmChoice choice = [] {
        const char* chosen = std::getenv("FLUXION_SGEMM");
        if (!chosen || !*chosen) return FLUXION_HAVE_ONEDNN ? SgemmChoice::by_size : SgemmChoice::openblas;
        if (strcasecmp(chosen, "openblas") == 0) return SgemmChoice::openblas;
        if (strcasecmp(chosen, "onednn") != 0)
            throw ValueError(std::string("FLUXION_SGEMM=") + chosen + " names no library: openblas or onednn");
        if (!FLUXION_HAVE_ONEDNN) throw ValueError("FLUXION_SGEMM=onednn: this build of fluxion has no oneDNN");
        return SgemmChoice::onednn;
    }();
    return choice;
}

// oneDNN's AVX2 sgemm multiplies products of few rows by a cache-line-aligned B (every fluxion
// tensor is) without packing B: it reads B's rows in place, and when they lie a multiple of 512
// floats (2 KiB) apart, the rows a kernel step reads fall into the same few cache sets (4K
// aliasing). Measured on an AMD EPYC Zen 3 (BENCHMARKS.md, "Kernel choices"): 256×1024×1024 with B
// untransposed ran at 55-67 GFLOP/s against OpenBLAS's 108-137, and at 134-150 in oneDNN from 384
// rows on, with B 1,000 wide, or with B 16 bytes off a cache line (then oneDNN packs it). The wide
// MLP's input gradient gy·W2 is such a product. Those go to OpenBLAS, which always packs. Not
// measured with AVX-512, whose kernels are left as they were.
constexpr int64_t kAliasedRowsMax = 256;
constexpr int64_t kAliasedStride = 512;

bool sgemm_in_onednn(bool trans_b, int64_t m, int64_t n, int64_t k, int64_t ldb) {
    switch (sgemm_choice()) {
    case SgemmChoice::openblas: return false;
    case SgemmChoice::onednn: return true;
    case SgemmChoice::by_size: break;
    }
    if (double(m) * double(n) * double(k) < sgemm_onednn_min_macs()) return false;
    const bool aliased = !trans_b && m <= kAliasedRowsMax && ldb % kAliasedStride == 0;
    return !(aliased && !onednn_avx512());
}

namespace {

void check_blas_size(int64_t value, const char* what) {
    if (value < 0 || value > INT_MAX)
        throw ValueError("gemm: " + std::string(what) + " = " + std::to_string(value) +
                         " is outside what OpenBLAS accepts (0 to 2^31 - 1); split the product into smaller ones");
}

// BLAS rejects a leading dimension shorter than a stored row; it would print and skip the product.
void check_leading(int64_t ld, int64_t row, const char* what) {
    if (ld < std::max<int64_t>(1, row))
        throw ValueError("gemm: " + std::string(what) + " = " + std::to_string(ld) + " is shorter than a row of " +
                         std::to_string(row) + " elements; pass the row stride of the stored matrix");
}

// With k = 0 the product is empty and C = beta C; BLAS would reject the degenerate leading dimensions.
template <class T> void scale_rows(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
}

// Products of fewer FLOPs than gemm_split_min() run on one thread: OpenBLAS does that itself below
// 2^19 (its m n k below 2^18), and threads would cost more than they save. With OMP_WAIT_POLICY=passive
// (README, "Threads on a busy machine") threads sleep between parallel regions and waking them
// costs tens of microseconds, so a product needs 16 times the work (2^23 FLOPs, tens of
// microseconds on one core) before it is split. Products from kSplitMax on (a millisecond and more
// of work) keep the library's own threading, which also splits the columns.
constexpr double kSplitMax = double(1 << 27);

}  // namespace

double gemm_split_min() {
    static const double least = [] {
        const char* policy = std::getenv("OMP_WAIT_POLICY");
        const bool passive = policy && strcasecmp(policy, "passive") == 0;
        return double(1 << (passive ? 23 : 19));
    }();
    return least;
}

int64_t gemm_batch_team(int64_t m, int64_t n, int64_t k, int64_t ldc, int64_t stride_c, int64_t batch) {
    const double each = 2.0 * double(m) * double(n) * double(k);
    const bool apart = stride_c >= (m - 1) * ldc + n || (stride_c >= n && (batch - 1) * stride_c + n <= ldc);
    if (batch < 2 || each >= gemm_split_min() || !apart) return 1;
    return team_for(each * double(batch), gemm_split_min());
}

namespace {

// Sets the calling thread's OpenMP team size to one for the object's life, where `wanted`.
class OneOpenMpThread {
public:
    explicit OneOpenMpThread(bool wanted) : kept_(wanted ? omp_get_max_threads() : 0) {
        if (kept_) omp_set_num_threads(1);
    }
    ~OneOpenMpThread() {
        if (kept_) omp_set_num_threads(kept_);
    }
    OneOpenMpThread(const OneOpenMpThread&) = delete;
    OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

private:
    int kept_;
};

template <class T> void blas_gemm_split(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                                        const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
    const double flops = 2.0 * double(m) * double(n) * double(k);
    if (flops >= kSplitMax) return blas_gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    const int64_t team = team_for(flops, gemm_split_min());
    // Row i of op(A) starts at a + i lda, or at a + i when A is stored transposed; likewise column j
    // of op(B) at b + j, or b + j ldb.
    if (m >= n || m >= 16)
        parallel_for(m, team, [&](int64_t first, int64_t last) {
            blas_gemm<T>(trans_a, trans_b, last - first, n, k, alpha, a + first * (trans_a ? 1 : lda), lda, b, ldb,
                         beta, c + first * ldc, ldc);
        });
    else
        parallel_for(n, team, [&](int64_t first, int64_t last) {
            blas_gemm<T>(trans_a, trans_b, m, last - first, k, alpha, a, lda, b + first * (trans_b ? ldb : 1), ldb,
                         beta, c + first, ldc);
        });
}

}  // namespace

template <class T> void blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                                  int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) return scale_rows(m, n, beta, c, ldc);
    const auto ta = trans_a ? CblasTrans : CblasNoTrans;
    const auto tb = trans_b ? CblasTrans : CblasNoTrans;
#if FLUXION_HAVE_ONEDNN
    if constexpr (std::is_same_v<T, float>) {
        if (sgemm_in_onednn(trans_b, m, n, k, ldb)) {
            // Row-major, as cblas with CblasRowMajor; single-threaded inside fluxion's parallel regions.
            // Outside them oneDNN takes every OpenMP thread, also for a product too small to share
            // (below gemm_split_min(), which fluxion runs on one thread): there it gets one thread.
            // Otherwise the MLP's 128×1×200 product, 2.6 µs on one thread, took 4.4 µs on two.
            OneOpenMpThread alone(!omp_in_parallel() && 2.0 * double(m) * double(n) * double(k) < gemm_split_min());
            const dnnl_status_t status =
                dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
            if (status != dnnl_success)
                throw Error("gemm: oneDNN's sgemm failed with status " + std::to_string(int(status)));
            return;
        }
    }
#endif
    const openblas::Library& blas = openblas::library();
    if constexpr (std::is_same_v<T, float>)
        blas.sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
    else blas.dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

template void blas_gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                               int64_t, float, float*, int64_t);
template void blas_gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                                int64_t, double, double*, int64_t);

void check_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
    check_blas_size(m, "m");
    check_blas_size(n, "n");
    check_blas_size(k, "k");
    check_blas_size(lda, "lda");
    check_blas_size(ldb, "ldb");
    check_blas_size(ldc, "ldc");
    if (m > 0 && n > 0 && k > 0) {
        check_leading(lda, trans_a ? m : k, "lda");
        check_leading(ldb, trans_b ? k : n, "ldb");
    }
    if (m > 0 && n > 0) check_leading(ldc, n, "ldc");
}

void gemm(int device, DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
          int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, double beta, void* c,
          int64_t ldc, int64_t stride_c, int64_t batch) {
    check_gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc);
    if (t == DType::f32) sgemm_choice();  // a wrong FLUXION_SGEMM throws here, not inside a parallel region
    dispatch_float(t, "gemm", [&](auto tag) {
        using T = decltype(tag);
        const T* pa = static_cast<const T*>(a);
        const T* pb = static_cast<const T*>(b);
        T* pc = static_cast<T*>(c);
        if (const int64_t team = gemm_batch_team(m, n, k, ldc, stride_c, batch); team > 1) {
            parallel_for(batch, team, [&](int64_t first, int64_t last) {
                for (int64_t i = first; i < last; ++i)
                    blas_gemm<T>(trans_a, trans_b, m, n, k, T(alpha), pa + i * stride_a, lda, pb + i * stride_b, ldb,
                                 T(beta), pc + i * stride_c, ldc);
            });
            return;
        }
        for (int64_t i = 0; i < batch; ++i)
            blas_gemm_split<T>(trans_a, trans_b, m, n, k, T(alpha), pa + i * stride_a, lda, pb + i * stride_b, ldb,
                               T(beta), pc + i * stride_c, ldc);
    });
}

}  // namespace fluxion::backend::cpu
