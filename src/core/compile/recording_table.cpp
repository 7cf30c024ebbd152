// recording_table.cpp — the CPU table seen through a trace: every kernel runs at once and is kept
// with its arguments bound by value (views, shapes, hyper-parameters copied out of the caller's
// stack), its pointers left to the plan. Devices, memory and synchronisation pass straight through.
#include <array>
#include <cstring>
#include <vector>

#include "core/compile/recorder.hpp"

namespace fluxion::detail {
namespace {

using namespace backend;
using I = std::int64_t;

const Backend& cpu() { return cpu_backend(); }
Recorder& rec() { return *active_recorder(); }

void fill(int d, DType t, I n, void* dst, double v) {
    cpu().fill(d, t, n, dst, v);
    rec().record({dst}, [d, t, n, v](void* const* p) { cpu().fill(d, t, n, p[0], v); });
}

void copy_strided(int d, DType t, const Strided* sv, const void* src, const I* dst_strides, void* dst) {
    cpu().copy_strided(d, t, sv, src, dst_strides, dst);
    std::array<I, kMaxDims> ds{};
    std::copy_n(dst_strides, sv->ndim, ds.begin());
    rec().record({src, dst}, [d, t, v = *sv, ds](void* const* p) { cpu().copy_strided(d, t, &v, p[0], ds.data(), p[1]); });
}

void cast(int d, DType from, DType to, I n, const void* src, void* dst) {
    cpu().cast(d, from, to, n, src, dst);
    rec().record({src, dst}, [d, from, to, n](void* const* p) { cpu().cast(d, from, to, n, p[0], p[1]); });
}

void index_select(int d, DType t, I outer, I n_src, I inner, const void* src, const I* idx, I n_idx, void* dst) {
    cpu().index_select(d, t, outer, n_src, inner, src, idx, n_idx, dst);
    rec().record({src, idx, dst}, [=](void* const* p) {
        cpu().index_select(d, t, outer, n_src, inner, p[0], static_cast<const I*>(p[1]), n_idx, p[2]);
    });
}

void index_add(int d, DType t, I outer, I n_dst, I inner, const void* src, const I* idx, I n_idx, void* dst) {
    cpu().index_add(d, t, outer, n_dst, inner, src, idx, n_idx, dst);
    rec().record({src, idx, dst}, [=](void* const* p) {
        cpu().index_add(d, t, outer, n_dst, inner, p[0], static_cast<const I*>(p[1]), n_idx, p[2]);
    });
}

void unary(int d, Unary op, DType t, I n, const void* x, void* y, double a, double b) {
    cpu().unary(d, op, t, n, x, y, a, b);
    rec().record({x, y}, [=](void* const* p) { cpu().unary(d, op, t, n, p[0], p[1], a, b); });
}

void unary_backward(int d, Unary op, DType t, I n, const void* x, const void* y, const void* gy, void* gx, double a,
                    double b) {
    cpu().unary_backward(d, op, t, n, x, y, gy, gx, a, b);
    rec().record({x, y, gy, gx}, [=](void* const* p) { cpu().unary_backward(d, op, t, n, p[0], p[1], p[2], p[3], a, b); });
}

void binary(int d, Binary op, DType t, const Strided* av, const void* a, const Strided* bv, const void* b, void* out) {
    cpu().binary(d, op, t, av, a, bv, b, out);
    rec().record({a, b, out}, [d, op, t, va = *av, vb = *bv](void* const* p) {
        cpu().binary(d, op, t, &va, p[0], &vb, p[1], p[2]);
    });
}

void where(int d, DType t, const Strided* cv, const void* c, const Strided* av, const void* a, const Strided* bv,
           const void* b, void* out) {
    cpu().where(d, t, cv, c, av, a, bv, b, out);
    rec().record({c, a, b, out}, [d, t, vc = *cv, va = *av, vb = *bv](void* const* p) {
        cpu().where(d, t, &vc, p[0], &va, p[1], &vb, p[2], p[3]);
    });
}

void reduce(int d, Reduce op, DType t, I outer, I n, I inner, const void* src, void* dst) {
    cpu().reduce(d, op, t, outer, n, inner, src, dst);
    rec().record({src, dst}, [=](void* const* p) { cpu().reduce(d, op, t, outer, n, inner, p[0], p[1]); });
}

void gemm(int d, DType t, bool ta, bool tb, I m, I n, I k, double alpha, const void* a, I lda, I sa, const void* b, I ldb,
          I sb, double beta, void* c, I ldc, I sc, I batch) {
    cpu().gemm(d, t, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
    rec().record({a, b, c}, [=](void* const* p) {
        cpu().gemm(d, t, ta, tb, m, n, k, alpha, p[0], lda, sa, p[1], ldb, sb, beta, p[2], ldc, sc, batch);
    });
}

void conv2d(int d, DType t, const Conv2dShape* s, const void* x, const void* w, void* y) {
    cpu().conv2d(d, t, s, x, w, y);
    rec().record({x, w, y}, [d, t, sh = *s](void* const* p) { cpu().conv2d(d, t, &sh, p[0], p[1], p[2]); });
}

void conv2d_backward_input(int d, DType t, const Conv2dShape* s, const void* gy, const void* w, void* gx) {
    cpu().conv2d_backward_input(d, t, s, gy, w, gx);
    rec().record({gy, w, gx}, [d, t, sh = *s](void* const* p) { cpu().conv2d_backward_input(d, t, &sh, p[0], p[1], p[2]); });
}

void conv2d_backward_weight(int d, DType t, const Conv2dShape* s, const void* x, const void* gy, void* gw) {
    cpu().conv2d_backward_weight(d, t, s, x, gy, gw);
    rec().record({x, gy, gw}, [d, t, sh = *s](void* const* p) { cpu().conv2d_backward_weight(d, t, &sh, p[0], p[1], p[2]); });
}

void pool2d(int d, Pool op, DType t, const Pool2dShape* s, const void* x, void* y) {
    cpu().pool2d(d, op, t, s, x, y);
    rec().record({x, y}, [d, op, t, sh = *s](void* const* p) { cpu().pool2d(d, op, t, &sh, p[0], p[1]); });
}

void pool2d_backward(int d, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y, const void* gy,
                     void* gx) {
    cpu().pool2d_backward(d, op, t, s, x, y, gy, gx);
    rec().record({x, y, gy, gx}, [d, op, t, sh = *s](void* const* p) {
        cpu().pool2d_backward(d, op, t, &sh, p[0], p[1], p[2], p[3]);
    });
}

void softmax(int d, bool log, DType t, I outer, I n, I inner, const void* x, void* y) {
    cpu().softmax(d, log, t, outer, n, inner, x, y);
    rec().record({x, y}, [=](void* const* p) { cpu().softmax(d, log, t, outer, n, inner, p[0], p[1]); });
}

void softmax_backward(int d, bool log, DType t, I outer, I n, I inner, const void* y, const void* gy, void* gx) {
    cpu().softmax_backward(d, log, t, outer, n, inner, y, gy, gx);
    rec().record({y, gy, gx}, [=](void* const* p) { cpu().softmax_backward(d, log, t, outer, n, inner, p[0], p[1], p[2]); });
}

// The hyper-parameters live in the recorder (then the plan): a replay sets the step count first.
void optimiser_step(int d, Optimiser rule, DType t, I n, void* param, const void* grad, void* s1, void* s2,
                    const OptimiserStep* hp) {
    cpu().optimiser_step(d, rule, t, n, param, grad, s1, s2, hp);
    const OptimiserStep* kept = rec().keep(*hp);
    rec().record({param, grad, s1, s2}, [=](void* const* p) {
        cpu().optimiser_step(d, rule, t, n, p[0], p[1], p[2], p[3], kept);
    });
}

// On the CPU these copies are memcpy; a source outside every tensor is host data, kept as a constant.
void copy_from_host(int d, void* dst, const void* src, std::size_t bytes) {
    cpu().copy_from_host(d, dst, src, bytes);
    if (rec().resolve(src).kind == BufferRef::Kind::fixed) {
        std::vector<char> data(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
        rec().record({dst}, [d, data = std::move(data)](void* const* p) {
            cpu().copy_from_host(d, p[0], data.data(), data.size());
        });
    } else {
        rec().record({dst, src}, [d, bytes](void* const* p) { cpu().copy_from_host(d, p[0], p[1], bytes); });
    }
}

void copy_to_host(int d, void* dst, const void* src, std::size_t bytes) {
    cpu().copy_to_host(d, dst, src, bytes);
    rec().record({dst, src}, [d, bytes](void* const* p) { cpu().copy_to_host(d, p[0], p[1], bytes); });
}

void copy_device(int dd, void* dst, int sd, const void* src, std::size_t bytes) {
    cpu().copy_device(dd, dst, sd, src, bytes);
    rec().record({dst, src}, [dd, sd, bytes](void* const* p) { cpu().copy_device(dd, p[0], sd, p[1], bytes); });
}

// Entries not replaced here pass through unrecorded: a kernel added to the table must be added here
// too, or compiled steps would silently skip it.
// (ABI 2 added priority, device_properties and supports: none of them is a kernel.)
static_assert(sizeof(Backend) == 32 * sizeof(void*), "the backend table changed: record its new kernels here");

Backend make_table() {
    Backend b = cpu();
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
    b.optimiser_step = optimiser_step;
    b.copy_from_host = copy_from_host;
    b.copy_to_host = copy_to_host;
    b.copy_device = copy_device;
    return b;
}

}  // namespace

const Backend& recording_table() {
    static const Backend table = make_table();
    return table;
}

}  // namespace fluxion::detail
