// recording_table.cpp — a backend's table seen through a trace: every kernel runs at once and is kept
// with its arguments bound by value (views, shapes, hyper-parameters copied out of the caller's
// stack), its pointers left to the plan. Devices, memory and synchronisation pass straight through.
// There is one table per space (the host's, the device's), so that each knows the real table it
// records and where its pointers lie.
#include <array>
#include <cstring>
#include <vector>

#include "core/compile/recorder.hpp"
#include "core/tensor_impl.hpp"

namespace fluxion::detail {
namespace {

using namespace backend;
using I = std::int64_t;

Recorder& rec() { return *active_recorder(); }

template <int S> struct Recording {
    static const Backend* real() { return t_recorded_table[S]; }

    static void fill(int d, DType t, I n, void* dst, double v) {
        real()->fill(d, t, n, dst, v);
        rec().record(S, {dst}, [R = real(), d, t, n, v](void* const* p) { R->fill(d, t, n, p[0], v); });
    }

    static void copy_strided(int d, DType t, const Strided* sv, const void* src, const I* dst_strides, void* dst) {
        real()->copy_strided(d, t, sv, src, dst_strides, dst);
        std::array<I, kMaxDims> ds{};
        std::copy_n(dst_strides, sv->ndim, ds.begin());
        rec().record(S, {src, dst}, [R = real(), d, t, v = *sv, ds](void* const* p) {
            R->copy_strided(d, t, &v, p[0], ds.data(), p[1]);
        });
    }

    static void cast(int d, DType from, DType to, I n, const void* src, void* dst) {
        real()->cast(d, from, to, n, src, dst);
        rec().record(S, {src, dst},
                     [R = real(), d, from, to, n](void* const* p) { R->cast(d, from, to, n, p[0], p[1]); });
    }

    static void index_select(int d, DType t, I outer, I n_src, I inner, const void* src, const I* idx, I n_idx,
                             void* dst) {
        real()->index_select(d, t, outer, n_src, inner, src, idx, n_idx, dst);
        rec().record(S, {src, idx, dst}, [R = real(), d, t, outer, n_src, inner, n_idx](void* const* p) {
            R->index_select(d, t, outer, n_src, inner, p[0], static_cast<const I*>(p[1]), n_idx, p[2]);
        });
    }

    static void index_add(int d, DType t, I outer, I n_dst, I inner, const void* src, const I* idx, I n_idx,
                          void* dst) {
        real()->index_add(d, t, outer, n_dst, inner, src, idx, n_idx, dst);
        rec().record(S, {src, idx, dst}, [R = real(), d, t, outer, n_dst, inner, n_idx](void* const* p) {
            R->index_add(d, t, outer, n_dst, inner, p[0], static_cast<const I*>(p[1]), n_idx, p[2]);
        });
    }

    static void unary(int d, Unary op, DType t, I n, const void* x, void* y, double a, double b) {
        real()->unary(d, op, t, n, x, y, a, b);
        rec().record(
            S, {x, y}, [R = real(), d, op, t, n, a, b](void* const* p) { R->unary(d, op, t, n, p[0], p[1], a, b); },
            UnaryCall{op, t, n, a, b}, d);
    }

    static void unary_backward(int d, Unary op, DType t, I n, const void* x, const void* y, const void* gy, void* gx,
                               double a, double b) {
        real()->unary_backward(d, op, t, n, x, y, gy, gx, a, b);
        rec().record(
            S, {x, y, gy, gx},
            [R = real(), d, op, t, n, a, b](void* const* p) {
                R->unary_backward(d, op, t, n, p[0], p[1], p[2], p[3], a, b);
            },
            UnaryBackwardCall{op, t, n, a, b}, d);
    }

    static void binary(int d, Binary op, DType t, const Strided* av, const void* a, const Strided* bv, const void* b,
                       void* out) {
        real()->binary(d, op, t, av, a, bv, b, out);
        rec().record(
            S, {a, b, out},
            [R = real(), d, op, t, va = *av, vb = *bv](void* const* p) {
                R->binary(d, op, t, &va, p[0], &vb, p[1], p[2]);
            },
            BinaryCall{op, t, *av, *bv}, d);
    }

    static void where(int d, DType t, const Strided* cv, const void* c, const Strided* av, const void* a,
                      const Strided* bv, const void* b, void* out) {
        real()->where(d, t, cv, c, av, a, bv, b, out);
        rec().record(S, {c, a, b, out}, [R = real(), d, t, vc = *cv, va = *av, vb = *bv](void* const* p) {
            R->where(d, t, &vc, p[0], &va, p[1], &vb, p[2], p[3]);
        });
    }

    static void reduce(int d, Reduce op, DType t, I outer, I n, I inner, const void* src, void* dst) {
        real()->reduce(d, op, t, outer, n, inner, src, dst);
        rec().record(S, {src, dst}, [R = real(), d, op, t, outer, n, inner](void* const* p) {
            R->reduce(d, op, t, outer, n, inner, p[0], p[1]);
        });
    }

    static void gemm(int d, DType t, bool ta, bool tb, I m, I n, I k, double alpha, const void* a, I lda, I sa,
                     const void* b, I ldb, I sb, double beta, void* c, I ldc, I sc, I batch) {
        real()->gemm(d, t, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
        rec().record(
            S, {a, b, c},
            [=, R = real()](void* const* p) {
                R->gemm(d, t, ta, tb, m, n, k, alpha, p[0], lda, sa, p[1], ldb, sb, beta, p[2], ldc, sc, batch);
            },
            GemmCall{t, m, n, ldc, batch}, d);
    }

    static void conv2d(int d, DType t, const Conv2dShape* s, const void* x, const void* w, void* y) {
        real()->conv2d(d, t, s, x, w, y);
        rec().record(
            S, {x, w, y}, [R = real(), d, t, sh = *s](void* const* p) { R->conv2d(d, t, &sh, p[0], p[1], p[2]); },
            Conv2dCall{t, *s}, d);
    }

    static void conv2d_backward_input(int d, DType t, const Conv2dShape* s, const void* gy, const void* w, void* gx) {
        real()->conv2d_backward_input(d, t, s, gy, w, gx);
        rec().record(S, {gy, w, gx}, [R = real(), d, t, sh = *s](void* const* p) {
            R->conv2d_backward_input(d, t, &sh, p[0], p[1], p[2]);
        });
    }

    static void conv2d_backward_weight(int d, DType t, const Conv2dShape* s, const void* x, const void* gy, void* gw) {
        real()->conv2d_backward_weight(d, t, s, x, gy, gw);
        rec().record(S, {x, gy, gw}, [R = real(), d, t, sh = *s](void* const* p) {
            R->conv2d_backward_weight(d, t, &sh, p[0], p[1], p[2]);
        });
    }

    static void pool2d(int d, Pool op, DType t, const Pool2dShape* s, const void* x, void* y) {
        real()->pool2d(d, op, t, s, x, y);
        rec().record(S, {x, y},
                     [R = real(), d, op, t, sh = *s](void* const* p) { R->pool2d(d, op, t, &sh, p[0], p[1]); });
    }

    static void pool2d_backward(int d, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                                const void* gy, void* gx) {
        real()->pool2d_backward(d, op, t, s, x, y, gy, gx);
        rec().record(
            S, {x, y, gy, gx},
            [R = real(), d, op, t, sh = *s](void* const* p) {
                R->pool2d_backward(d, op, t, &sh, p[0], p[1], p[2], p[3]);
            },
            PoolBackwardCall{op, t, *s}, d);
    }

    static void softmax(int d, bool log, DType t, I outer, I n, I inner, const void* x, void* y) {
        real()->softmax(d, log, t, outer, n, inner, x, y);
        rec().record(S, {x, y}, [R = real(), d, log, t, outer, n, inner](void* const* p) {
            R->softmax(d, log, t, outer, n, inner, p[0], p[1]);
        });
    }

    static void softmax_backward(int d, bool log, DType t, I outer, I n, I inner, const void* y, const void* gy,
                                 void* gx) {
        real()->softmax_backward(d, log, t, outer, n, inner, y, gy, gx);
        rec().record(S, {y, gy, gx}, [R = real(), d, log, t, outer, n, inner](void* const* p) {
            R->softmax_backward(d, log, t, outer, n, inner, p[0], p[1], p[2]);
        });
    }

    static void lstm_cell(int d, DType t, I n, I h, void* gates, I ld_gates, const void* c_prev, void* c, void* h_out,
                          I ld_h) {
        real()->lstm_cell(d, t, n, h, gates, ld_gates, c_prev, c, h_out, ld_h);
        rec().record(S, {gates, c_prev, c, h_out}, [R = real(), d, t, n, h, ld_gates, ld_h](void* const* p) {
            R->lstm_cell(d, t, n, h, p[0], ld_gates, p[1], p[2], p[3], ld_h);
        });
    }

    static void lstm_cell_backward(int d, DType t, I n, I h, const void* gates, I ld_gates, const void* c_prev,
                                   const void* c, const void* gh, I ld_gh, const void* gh_next, void* gc,
                                   void* dgates) {
        real()->lstm_cell_backward(d, t, n, h, gates, ld_gates, c_prev, c, gh, ld_gh, gh_next, gc, dgates);
        // A null gh_next is recorded as a fixed null address and replayed as null.
        rec().record(S, {gates, c_prev, c, gh, gh_next, gc, dgates},
                     [R = real(), d, t, n, h, ld_gates, ld_gh](void* const* p) {
                         R->lstm_cell_backward(d, t, n, h, p[0], ld_gates, p[1], p[2], p[3], ld_gh, p[4], p[5],
                                               p[6]);
                     });
    }

    static void batch_norm(int d, DType t, I outer, I c, I inner, const void* x, const void* w, const void* b,
                           double eps, bool relu, void* y, void* mean, void* var, void* rstd) {
        real()->batch_norm(d, t, outer, c, inner, x, w, b, eps, relu, y, mean, var, rstd);
        // Null weight and bias (no affine step) are recorded as fixed null addresses, replayed as null.
        rec().record(S, {x, w, b, y, mean, var, rstd}, [R = real(), d, t, outer, c, inner, eps, relu](void* const* p) {
            R->batch_norm(d, t, outer, c, inner, p[0], p[1], p[2], eps, relu, p[3], p[4], p[5], p[6]);
        });
    }

    static void batch_norm_backward(int d, DType t, I outer, I c, I inner, const void* x, const void* y, const void* gy,
                                    const void* mean, const void* rstd, const void* w, void* gx, void* gw, void* gb) {
        real()->batch_norm_backward(d, t, outer, c, inner, x, y, gy, mean, rstd, w, gx, gw, gb);
        rec().record(S, {x, y, gy, mean, rstd, w, gx, gw, gb}, [R = real(), d, t, outer, c, inner](void* const* p) {
            R->batch_norm_backward(d, t, outer, c, inner, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]);
        });
    }

    // The hyper-parameters live in the recorder (then the plan): a replay sets the step count first.
    static void optimiser_step(int d, Optimiser rule, DType t, I n, void* param, const void* grad, void* s1, void* s2,
                               void* s3, const OptimiserStep* hp) {
        real()->optimiser_step(d, rule, t, n, param, grad, s1, s2, s3, hp);
        const OptimiserStep* kept = rec().keep(*hp);
        rec().record(
            S, {param, grad, s1, s2, s3},
            [R = real(), d, rule, t, n, kept](void* const* p) {
                R->optimiser_step(d, rule, t, n, p[0], p[1], p[2], p[3], p[4], kept);
            },
            OptimiserCall{rule, t, n, kept}, d);
    }

    // Mixed precision's multi-tensor kernels, opaque to fusion; each tensor's hyper-parameters are
    // kept, in order, as optimiser_step's are, so that replays advance every step count.
    static void nonfinite_check(int d, DType t, std::size_t count, const I* n, const void* const* ptrs, double divisor,
                                void* flag) {
        real()->nonfinite_check(d, t, count, n, ptrs, divisor, flag);
        std::vector<const void*> args(ptrs, ptrs + count);
        args.push_back(flag);
        rec().record(
            S, args,
            [R = real(), d, t, sizes = std::vector<I>(n, n + count), divisor](void* const* p) {
                R->nonfinite_check(d, t, sizes.size(), sizes.data(), p, divisor, p[sizes.size()]);
            },
            {}, d);
    }

    static void mixed_optimiser_steps(int d, Optimiser rule, DType t, std::size_t count, const I* n,
                                      const OptimiserStep* const* hp, double divisor, void* const* ptrs) {
        real()->mixed_optimiser_steps(d, rule, t, count, n, hp, divisor, ptrs);
        std::vector<const OptimiserStep*> kept;
        for (std::size_t i = 0; i < count; ++i) kept.push_back(rec().keep(*hp[i]));
        rec().record(
            S, std::vector<const void*>(ptrs, ptrs + 6 * count),
            [R = real(), d, rule, t, sizes = std::vector<I>(n, n + count), kept, divisor](void* const* p) {
                R->mixed_optimiser_steps(d, rule, t, sizes.size(), sizes.data(), kept.data(), divisor, p);
            },
            {}, d);
    }

    // A host source outside every tensor is data the step made on the host (a constant): kept as is.
    static void copy_from_host(int d, void* dst, const void* src, std::size_t bytes) {
        real()->copy_from_host(d, dst, src, bytes);
        if (rec().resolve(kHost, src).kind == BufferRef::Kind::fixed) {
            std::vector<char> data(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
            rec().record(S, {dst}, [R = real(), d, data = std::move(data)](void* const* p) {
                R->copy_from_host(d, p[0], data.data(), data.size());
            });
        } else {
            rec().record(S, {{dst, S}, {src, kHost}},
                         [R = real(), d, bytes](void* const* p) { R->copy_from_host(d, p[0], p[1], bytes); });
        }
    }

    // A host destination outside every tensor is a value read on the host (item(), a loss printed):
    // what the host did with it is fixed by the trace, so a replay does not write there again (the
    // memory, often a stack variable, is gone by then).
    static void copy_to_host(int d, void* dst, const void* src, std::size_t bytes) {
        real()->copy_to_host(d, dst, src, bytes);
        if (rec().resolve(kHost, dst).kind == BufferRef::Kind::fixed) return;
        rec().record(
            S, {{dst, kHost}, {src, S}},
            [R = real(), d, bytes](void* const* p) { R->copy_to_host(d, p[0], p[1], bytes); }, true);
    }

    static void copy_device(int dd, void* dst, int sd, const void* src, std::size_t bytes) {
        real()->copy_device(dd, dst, sd, src, bytes);
        rec().record(S, {dst, src},
                     [R = real(), dd, sd, bytes](void* const* p) { R->copy_device(dd, p[0], sd, p[1], bytes); });
    }

    static Backend table(const Backend& r) {
        Backend b = r;
        b.fill = fill;
        b.copy_strided = copy_strided;
        b.cast = cast;
        b.index_select = index_select;
        b.index_add = index_add;
        b.unary = unary;
        b.unary_backward = unary_backward;
        b.binary = binary;
        b.where = where;
        b.reduce = reduce;
        b.gemm = gemm;
        b.conv2d = conv2d;
        b.conv2d_backward_input = conv2d_backward_input;
        b.conv2d_backward_weight = conv2d_backward_weight;
        b.pool2d = pool2d;
        b.pool2d_backward = pool2d_backward;
        b.softmax = softmax;
        b.softmax_backward = softmax_backward;
        if (r.lstm_cell) b.lstm_cell = lstm_cell;
        if (r.lstm_cell_backward) b.lstm_cell_backward = lstm_cell_backward;
        b.optimiser_step = optimiser_step;
        if (r.nonfinite_check) b.nonfinite_check = nonfinite_check;
        if (r.mixed_optimiser_steps) b.mixed_optimiser_steps = mixed_optimiser_steps;
        if (r.batch_norm) b.batch_norm = batch_norm;
        if (r.batch_norm_backward) b.batch_norm_backward = batch_norm_backward;
        b.copy_from_host = copy_from_host;
        b.copy_to_host = copy_to_host;
        b.copy_device = copy_device;
        return b;
    }
};

// Entries not replaced here pass through unrecorded: a kernel added to the table must be added here
// too, or compiled steps would silently skip it.
// (ABI 2 added priority, device_properties and supports, ABI 3 the capture entries: none of them
// is a kernel; ABI 4 the LSTM cell's two kernels, recorded above; ABI 6 the fused kernels, which
// only the fusion of a recording calls, at replay; ABI 7 mixed precision's two and ABI 8 BatchNorm's
// two, recorded above.)
static_assert(sizeof(Backend) == 46 * sizeof(void*), "the backend table changed: record its new kernels here");

}  // namespace

Backend recording_table(int space, const Backend& real) {
    return space == kHost ? Recording<kHost>::table(real) : Recording<kDevice>::table(real);
}

}  // namespace fluxion::detail
