// gemm_candidates — the f32 matrix-product libraries fluxion could call, timed on the shapes it
// calls (issue 29: choose the CPU's products by measurement, not by a model-number table).
//
//   gemm_candidates LIBRARY       LIBRARY: openblas (the Debian OpenBLAS, its kernel as
//                                 OPENBLAS_CORETYPE says), blis (Debian's BLIS, which picks its
//                                 kernel from the CPU's features) or onednn (dnnl_sgemm)
//
// Prints one JSON line per shape: the library, the shape, and GFLOP/s by wall time and by the
// process's CPU time over the threads (the second holds on a machine shared with other work).
// bench/gemm_candidates.py runs it for every candidate and thread count and prints the table.
// Each library is opened with dlopen, so that one program times them all without linking any.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <random>
#include <string>

namespace {

// Row-major C = A·B with A m×k (or k×m, transposed) and B k×n (or n×k), as fluxion calls them.
struct Shape {
    const char* use;
    bool ta, tb;
    int m, n, k;
    int batch;  // products of this shape per call (attention's heads)
};

// The products of bench_models' steps: forward, then the two gradients of each.
const Shape kShapes[] = {
    {"mlp x·W1ᵀ", false, true, 128, 200, 100, 1},
    {"mlp gW1 = gyᵀ·x", true, false, 200, 100, 128, 1},
    {"lstm input projection", false, true, 1792, 512, 28, 1},
    {"lstm h·W_hhᵀ (a step)", false, true, 64, 512, 128, 1},
    {"lstm gh = g·W_hh (a step)", false, false, 64, 128, 512, 1},
    {"attention q·kᵀ (256 heads)", false, true, 49, 49, 16, 256},
    {"attention p·v (256 heads)", false, false, 49, 16, 49, 256},
    {"encoder x·Wᵀ (feed-forward)", false, true, 3136, 128, 64, 1},
    {"wide x·W1ᵀ", false, true, 256, 1024, 784, 1},
    {"wide h·W2ᵀ", false, true, 256, 1024, 1024, 1},
    {"wide gW2 = gyᵀ·h", true, false, 1024, 1024, 256, 1},
    {"wide gh = gy·W2", false, false, 256, 1024, 1024, 1},
    {"wide gW1 = gyᵀ·x", true, false, 1024, 784, 256, 1},
    {"square 2048", false, false, 2048, 2048, 2048, 1},
};

using CblasSgemm = void (*)(int order, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c, int ldc);
using DnnlSgemm = int (*)(char ta, char tb, long m, long n, long k, float alpha, const float* a, long lda,
                          const float* b, long ldb, float beta, float* c, long ldc);

struct Library {
    CblasSgemm cblas = nullptr;
    DnnlSgemm dnnl = nullptr;
    void gemm(const Shape& s, const float* a, const float* b, float* c) const {
        const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
        if (cblas)
            cblas(101 /* row major */, s.ta ? 112 : 111, s.tb ? 112 : 111, s.m, s.n, s.k, 1.0f, a, lda, b, ldb, 0.0f, c,
                  s.n);
        else dnnl(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a, lda, b, ldb, 0.0f, c, s.n);
    }
};

Library open(const std::string& name) {
    const char* path = name == "openblas" ? "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0"
                       : name == "blis"   ? "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4"
                       : name == "onednn" ? "libdnnl.so.2"
                                          : nullptr;
    if (!path) {
        std::fprintf(stderr, "gemm_candidates: unknown library '%s' (openblas, blis or onednn)\n", name.c_str());
        std::exit(2);
    }
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        std::fprintf(stderr, "gemm_candidates: %s is not installed here (%s)\n", name.c_str(), dlerror());
        std::exit(3);
    }
    Library lib;
    if (name == "onednn") lib.dnnl = reinterpret_cast<DnnlSgemm>(dlsym(h, "dnnl_sgemm"));
    else lib.cblas = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
    if (!lib.cblas && !lib.dnnl) {
        std::fprintf(stderr, "gemm_candidates: %s has no sgemm entry\n", path);
        std::exit(3);
    }
    return lib;
}

double seconds(clockid_t clock) {
    timespec t{};
    clock_gettime(clock, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

// Operands 64-byte aligned, as fluxion's allocator places every tensor: oneDNN's sgemm takes
// another path for a B that is not (on Zen 3, 256×1024×1024 ran at 144 GFLOP/s with B 16 bytes off
// a cache line and at 70 on one), so std::vector's 16-byte alignment timed a product fluxion never runs.
class Buffer {
public:
    explicit Buffer(std::size_t n)
        : data_(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64))) {
        if (!data_) throw std::bad_alloc();
    }
    ~Buffer() { std::free(data_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    float& operator[](std::size_t i) { return data_[i]; }

private:
    float* data_;
};

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: gemm_candidates openblas|blis|onednn\n");
        return 2;
    }
    const Library lib = open(argv[1]);
    const char* threads = std::getenv("OMP_NUM_THREADS");
    std::mt19937 rng(0);
    std::uniform_real_distribution<float> u(-1, 1);
    for (const Shape& s : kShapes) {
        const std::size_t na = std::size_t(s.m) * s.k, nb = std::size_t(s.k) * s.n, nc = std::size_t(s.m) * s.n;
        Buffer a(na * s.batch), b(nb * s.batch), c(nc * s.batch);
        for (std::size_t i = 0; i < na * s.batch; ++i) a[i] = u(rng);
        for (std::size_t i = 0; i < nb * s.batch; ++i) b[i] = u(rng);
        const auto call = [&] {
            for (int i = 0; i < s.batch; ++i) lib.gemm(s, &a[na * i], &b[nb * i], &c[nc * i]);
        };
        const double flops = 2.0 * s.m * s.n * s.k * s.batch;
        // Calls per batch so that a batch takes about 50 ms; the best of 7 batches.
        call();
        const double t0 = seconds(CLOCK_MONOTONIC);
        call();
        const double once = std::max(seconds(CLOCK_MONOTONIC) - t0, 1e-7);
        const int reps = std::max(1, int(0.05 / once));
        double best_wall = 1e30, best_cpu = 1e30;
        for (int batch = 0; batch < 7; ++batch) {
            const double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
            for (int r = 0; r < reps; ++r) call();
            best_wall = std::min(best_wall, (seconds(CLOCK_MONOTONIC) - w0) / reps);
            best_cpu = std::min(best_cpu, (seconds(CLOCK_PROCESS_CPUTIME_ID) - c0) / reps);
        }
        const int t = threads ? std::atoi(threads) : 1;
        std::printf(
            "{\"library\": \"%s\", \"threads\": %d, \"use\": \"%s\", \"shape\": \"%s%dx%dx%d%s\", "
            "\"wall_gflops\": %.1f, \"cpu_gflops\": %.1f}\n",
            argv[1], t, s.use, s.batch > 1 ? (std::to_string(s.batch) + " × ").c_str() : "", s.m, s.n, s.k,
            s.ta ? " Aᵀ" : (s.tb ? " Bᵀ" : ""), flops / best_wall * 1e-9, flops / (best_cpu / t) * 1e-9);
        std::fflush(stdout);
    }
}
