// fusion.hpp's patterns, found on the recorded calls' kinds and pointer references: this file
// decides what may fuse, and each call's own table does the work (the fused entries of
// core/backend.hpp), where it has them. First a pass that lets an activation after a product run in
// place where nothing else reads the product (every reference to the product then names the
// activation's output); activations whose gradient reads only their output (relu, sigmoid, tanh:
// the op registry's `reads`, core/elementwise_formulas.def) leave their input to no one already
// when traced. Then one pass replaces each group of calls by one call whose pointer arguments are
// the group's, in order, less the intermediates.
#include "core/compile/fusion.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "core/ops/unary_registry.hpp"

namespace fluxion::detail {
namespace {

using I = std::int64_t;

bool fusable_type(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }

template <class K> const K* as(const RecordedCall& c) { return std::get_if<K>(&c.kernel); }

// Whether calls a and b run on one table and device.
bool same_table(const RecordedCall& a, const RecordedCall& b) { return a.table == b.table && a.device == b.device; }

bool same_ref(const BufferRef& a, const BufferRef& b) {
    return a.kind == b.kind && a.index == b.index && a.offset == b.offset;
}

// Whether two references point into the same buffer the step made.
bool same_buffer(const BufferRef& a, const BufferRef& b) {
    return a.kind == BufferRef::Kind::traced && b.kind == BufferRef::Kind::traced && a.index == b.index;
}

// A buffer the step made, referenced at its start.
bool whole_traced(const BufferRef& r) { return r.kind == BufferRef::Kind::traced && r.offset == 0; }

// Whether `view` walks `shape` with `strides` (dimensions of size 1 may have any stride).
bool walks(const backend::Strided& view, std::initializer_list<I> shape, std::initializer_list<I> strides) {
    if (view.ndim != static_cast<int>(shape.size())) return false;
    for (int d = 0; d < view.ndim; ++d) {
        const I size = shape.begin()[d];
        if (view.shape[d] != size || (size != 1 && view.strides[d] != strides.begin()[d])) return false;
    }
    return true;
}

// The elements of a view that walks them contiguously (dimensions of size 1 at any stride), or -1.
I flat_size(const backend::Strided& view) {
    I expected = 1;
    for (int d = view.ndim - 1; d >= 0; --d) {
        if (view.shape[d] != 1 && view.strides[d] != expected) return -1;
        expected *= view.shape[d];
    }
    return expected;
}

// Whether a view repeats one element.
bool broadcast_scalar(const backend::Strided& view) {
    for (int d = 0; d < view.ndim; ++d)
        if (view.shape[d] != 1 && view.strides[d] != 0) return false;
    return true;
}

class Fusion {
public:
    Fusion(Recorder& rec, std::size_t boundary, std::size_t output) : rec_(rec), boundary_(boundary), output_(output) {}

    // Lets an activation after a matrix product run in place where nothing else reads the product.
    void redirect_products() {
        count_uses();
        const auto& calls = rec_.calls;
        for (std::size_t i = 0; i + 1 < calls.size(); ++i) {
            if (!product_then_activation(i)) continue;
            const BufferRef c = ref(i, 2), y = ref(i + 1, 1);
            if (!whole_traced(c) || !whole_traced(y) || c.index == output_ || c.index == y.index) continue;
            const auto& cb = rec_.buffers[c.index];
            const auto& yb = rec_.buffers[y.index];
            if (*uses_[c.index].rbegin() != i + 1 || *uses_[y.index].begin() != i + 1 || yb.bytes < cb.bytes ||
                yb.space != cb.space)
                continue;
            for (auto& r : rec_.refs)
                if (r.kind == BufferRef::Kind::traced && r.index == c.index) r.index = y.index;
            uses_[y.index].insert(uses_[c.index].begin(), uses_[c.index].end());
            uses_[c.index].clear();
        }
    }

    std::size_t merge() {
        count_uses();
        std::vector<RecordedCall> calls;
        std::vector<BufferRef> refs;
        std::size_t boundary = boundary_;
        const std::size_t n = rec_.calls.size();
        for (std::size_t i = 0; i < n;) {
            if (i == boundary_) boundary = calls.size();
            std::size_t next = i + 1;
            RecordedCall fused;
            std::vector<BufferRef> args;
            if (optimisers(i, next, fused, args) || convolution(i, next, fused, args) ||
                product_activation(i, next, fused, args) || pool_activation_gradient(i, next, fused, args) ||
                elementwise(i, next, fused, args)) {
                fused.first = refs.size();
                fused.count = args.size();
                fused.space = rec_.calls[i].space;
                fused.table = rec_.calls[i].table;
                fused.device = rec_.calls[i].device;
                refs.insert(refs.end(), args.begin(), args.end());
                calls.push_back(std::move(fused));
            } else {
                RecordedCall& c = rec_.calls[i];
                const std::size_t first = refs.size();
                refs.insert(refs.end(), rec_.refs.begin() + I(c.first), rec_.refs.begin() + I(c.first + c.count));
                c.first = first;
                calls.push_back(std::move(c));
            }
            i = next;
        }
        if (boundary_ >= n) boundary = boundary_ == n ? calls.size() : boundary_;
        rec_.calls = std::move(calls);
        rec_.refs = std::move(refs);
        lifetimes();
        return boundary;
    }

private:
    const BufferRef& ref(std::size_t call, std::size_t k) const { return rec_.refs[rec_.calls[call].first + k]; }

    // Whether calls a < b lie in one phase.
    bool one_phase(std::size_t a, std::size_t b) const { return (a < boundary_) == (b < boundary_); }

    // Which calls reference each traced buffer.
    void count_uses() {
        uses_.assign(rec_.buffers.size(), {});
        for (std::size_t c = 0; c < rec_.calls.size(); ++c)
            for (std::size_t k = 0; k < rec_.calls[c].count; ++k)
                if (const auto& r = ref(c, k); r.kind == BufferRef::Kind::traced) uses_[r.index].insert(c);
    }

    // Whether no call outside `calls` uses the buffer of `r`, and the step does not return it.
    bool only_used_by(const BufferRef& r, std::initializer_list<std::size_t> calls) const {
        if (!whole_traced(r) || r.index == output_) return false;
        for (std::size_t c : uses_[r.index])
            if (std::find(calls.begin(), calls.end(), c) == calls.end()) return false;
        return true;
    }

    void lifetimes() {
        for (auto& b : rec_.buffers) b.first_use = b.last_use = -1;
        for (std::size_t c = 0; c < rec_.calls.size(); ++c)
            for (std::size_t k = 0; k < rec_.calls[c].count; ++k)
                if (const auto& r = ref(c, k); r.kind == BufferRef::Kind::traced) {
                    auto& b = rec_.buffers[r.index];
                    if (b.first_use < 0) b.first_use = I(c);
                    b.last_use = I(c);
                }
    }

    // Consecutive optimiser steps of one rule and type: one multi-tensor step.
    bool optimisers(std::size_t i, std::size_t& next, RecordedCall& fused, std::vector<BufferRef>& args) const {
        const auto* first = as<OptimiserCall>(rec_.calls[i]);
        const RecordedCall& call = rec_.calls[i];
        if (!first || !fusable_type(first->t) || !call.table->optimiser_steps) return false;
        std::vector<I> sizes;
        std::vector<const backend::OptimiserStep*> hps;
        std::size_t j = i;
        for (; j < rec_.calls.size() && one_phase(i, j); ++j) {
            const auto* o = as<OptimiserCall>(rec_.calls[j]);
            if (!o || o->rule != first->rule || o->t != first->t || !same_table(call, rec_.calls[j])) break;
            sizes.push_back(o->n);
            hps.push_back(o->hp);
            for (std::size_t k = 0; k < 5; ++k) args.push_back(ref(j, k));
        }
        if (j - i < 2) {
            args.clear();
            return false;
        }
        next = j;
        fused.run = [T = call.table, d = call.device, rule = first->rule, t = first->t, sizes = std::move(sizes),
                     hps = std::move(hps)](void* const* p) {
            T->optimiser_steps(d, rule, t, sizes.size(), sizes.data(), hps.data(), p);
        };
        return true;
    }

    // A convolution, then the add of a per-channel bias to its result and/or an activation of it.
    bool convolution(std::size_t i, std::size_t& next, RecordedCall& fused, std::vector<BufferRef>& args) const {
        const auto* conv = as<Conv2dCall>(rec_.calls[i]);
        const RecordedCall& call = rec_.calls[i];
        if (!conv || !fusable_type(conv->t) || !call.table->conv2d_epilogue) return false;
        const auto& s = conv->shape;
        const I plane = s.oh * s.ow;
        backend::ConvEpilogue e;
        BufferRef out = ref(i, 2), bias{};
        std::size_t j = i + 1;
        if (j < rec_.calls.size() && one_phase(i, j)) {
            const auto* add = as<BinaryCall>(rec_.calls[j]);
            if (add && same_table(call, rec_.calls[j]) && add->op == backend::Binary::add && add->t == conv->t && same_ref(ref(j, 0), out) &&
                walks(add->a, {s.n, s.k, s.oh, s.ow}, {s.k * plane, plane, s.ow, 1}) &&
                walks(add->b, {s.n, s.k, s.oh, s.ow}, {0, 1, 0, 0}) && only_used_by(out, {i, j}) &&
                whole_traced(ref(j, 2)) && !same_buffer(ref(j, 1), out)) {  // y + y of a {1, k, 1, 1} y is no bias
                e.bias = true;
                bias = ref(j, 1);
                out = ref(j, 2);
                ++j;
            }
        }
        if (j < rec_.calls.size() && one_phase(i, j)) {
            const auto* act = as<UnaryCall>(rec_.calls[j]);
            if (act && same_table(call, rec_.calls[j]) && act->t == conv->t && act->n == s.n * s.k * plane && same_ref(ref(j, 0), out) &&
                only_used_by(out, {j - 1, j}) && whole_traced(ref(j, 1))) {
                e.activation = true;
                e.op = act->op;
                e.a = act->a;
                e.b = act->b;
                out = ref(j, 1);
                ++j;
            }
        }
        if (j == i + 1) return false;
        next = j;
        args = {ref(i, 0), ref(i, 1), bias, out};
        fused.run = [T = call.table, d = call.device, t = conv->t, s, e](void* const* p) {
            T->conv2d_epilogue(d, t, &s, p[0], p[1], p[2], &e, p[3]);
        };
        return true;
    }

    // Call i is a matrix product whose result call i + 1 passes through an activation.
    bool product_then_activation(std::size_t i) const {
        const auto* gemm = as<GemmCall>(rec_.calls[i]);
        const auto* act = as<UnaryCall>(rec_.calls[i + 1]);
        return gemm && act && same_table(rec_.calls[i], rec_.calls[i + 1]) && fusable_type(gemm->t) && act->t == gemm->t && gemm->batch == 1 && gemm->ldc == gemm->n &&
               act->n == gemm->m * gemm->n && one_phase(i, i + 1) && same_ref(ref(i, 2), ref(i + 1, 0));
    }

    // The product and its activation in one call, each kernel as recorded.
    bool product_activation(std::size_t i, std::size_t& next, RecordedCall& fused, std::vector<BufferRef>& args) {
        if (i + 1 >= rec_.calls.size() || !product_then_activation(i)) return false;
        next = i + 2;
        for (std::size_t k = 0; k < 3; ++k) args.push_back(ref(i, k));
        for (std::size_t k = 0; k < 2; ++k) args.push_back(ref(i + 1, k));
        fused.run = [gemm = std::move(rec_.calls[i].run), act = std::move(rec_.calls[i + 1].run)](void* const* p) {
            gemm(p);
            act(p + 3);
        };
        return true;
    }

    // A pool's gradient, then the gradient of an activation (relu, sigmoid, tanh: one whose gradient
    // reads only its output, core/elementwise_formulas.def) where the pool's input is that output:
    // one call (the table's pool2d_backward_activation), the full-size intermediate gone.
    bool pool_activation_gradient(std::size_t i, std::size_t& next, RecordedCall& fused,
                                  std::vector<BufferRef>& args) const {
        const auto* pool = as<PoolBackwardCall>(rec_.calls[i]);
        const RecordedCall& call = rec_.calls[i];
        if (!pool || !fusable_type(pool->t) || !call.table->pool2d_backward_activation || i + 1 >= rec_.calls.size() ||
            !one_phase(i, i + 1) || !same_table(call, rec_.calls[i + 1]))
            return false;
        const auto* act = as<UnaryBackwardCall>(rec_.calls[i + 1]);
        const BufferRef gx = ref(i, 3);
        const auto& s = pool->shape;
        if (!act || gradient_reads(act->op) != GradientReads::Y || act->a != 0 || act->b != 0 || act->t != pool->t ||
            act->n != s.n * s.c * s.h * s.w || !same_ref(ref(i + 1, 1), ref(i, 0)) || !same_ref(ref(i + 1, 2), gx) ||
            !only_used_by(gx, {i, i + 1}) || same_buffer(ref(i + 1, 3), gx))
            return false;
        next = i + 2;
        args = {ref(i, 0), ref(i, 1), ref(i, 2), ref(i + 1, 3)};
        fused.run = [T = call.table, d = call.device, op = pool->op, t = pool->t, s, a = act->op](void* const* p) {
            T->pool2d_backward_activation(d, op, t, &s, p[0], p[1], p[2], a, p[3]);
        };
        return true;
    }

    // Call j as a step of an elementwise chain of n elements of type t whose value so far is in
    // `value`; for the first call (`value` null) its operand read as the value is `input`, and t, n
    // are set. A binary step's other operand goes to `others`.
    bool chain_step(std::size_t first_call, std::size_t j, const BufferRef* value, DType& t, I& n,
                    backend::ElementwiseStep& step, BufferRef& input, std::vector<BufferRef>& others) const {
        const RecordedCall& call = rec_.calls[j];
        if (std::holds_alternative<std::monostate>(call.kernel) || !call.table->elementwise_chain ||
            (value && !same_table(rec_.calls[first_call], call)))
            return false;
        if (const auto* u = as<UnaryCall>(rec_.calls[j])) {
            if (!fusable_type(u->t) || (value && (u->t != t || u->n != n || !same_ref(ref(j, 0), *value))))
                return false;
            if (!value) t = u->t, n = u->n, input = ref(j, 0);
            step = {.binary = false, .unary_op = u->op, .a = u->a, .b = u->b};
            return true;
        }
        const auto* b = as<BinaryCall>(rec_.calls[j]);
        if (!b || b->op > backend::Binary::minimum || !fusable_type(b->t) || (value && b->t != t)) return false;
        const I count = value ? n : flat_size(b->a) >= 0 ? flat_size(b->a) : flat_size(b->b);
        if (count <= 0) return false;
        // The side that holds the value: the first operand when it can, else the second.
        for (bool first : {true, false}) {
            const backend::Strided& v = first ? b->a : b->b;
            const backend::Strided& o = first ? b->b : b->a;
            const BufferRef& vr = ref(j, first ? 0 : 1);
            const BufferRef& other = ref(j, first ? 1 : 0);
            if (flat_size(v) != count || (value && !same_ref(vr, *value))) continue;
            const bool scalar = broadcast_scalar(o);
            if (!scalar && flat_size(o) != count) continue;
            if (value && same_buffer(other, *value)) continue;  // x op x: the value is not kept
            if (!value) t = b->t, n = count, input = vr;
            step = {.binary = true, .binary_op = b->op, .value_first = first, .other_scalar = scalar};
            others.push_back(other);
            return true;
        }
        return false;
    }

    // Elementwise calls each reading the result of the one before, an intermediate no other call
    // reads: one call, block by block (cpu::elementwise_chain), the intermediates gone.
    bool elementwise(std::size_t i, std::size_t& next, RecordedCall& fused, std::vector<BufferRef>& args) const {
        DType t{};
        I n = 0;
        BufferRef input{}, value{};
        std::vector<backend::ElementwiseStep> steps(1);
        std::vector<BufferRef> others;
        if (!chain_step(i, i, nullptr, t, n, steps[0], input, others)) return false;
        value = ref(i, rec_.calls[i].count - 1);
        std::size_t j = i + 1;
        for (; j < rec_.calls.size() && one_phase(i, j) && only_used_by(value, {j - 1, j}); ++j) {
            backend::ElementwiseStep step;
            if (!chain_step(i, j, &value, t, n, step, input, others)) break;
            steps.push_back(step);
            value = ref(j, rec_.calls[j].count - 1);
        }
        // The last result is written from the first step on: no step may read it.
        while (steps.size() >= 2 && (!whole_traced(value) || *uses_[value.index].begin() != i + steps.size() - 1)) {
            if (steps.back().binary) others.pop_back();
            steps.pop_back();
            value = ref(i + steps.size() - 1, rec_.calls[i + steps.size() - 1].count - 1);
        }
        if (steps.size() < 2) return false;
        next = i + steps.size();
        args.push_back(input);
        args.insert(args.end(), others.begin(), others.end());
        args.push_back(value);
        fused.run = [T = rec_.calls[i].table, d = rec_.calls[i].device, t, n, steps = std::move(steps)](void* const* p) {
            T->elementwise_chain(d, t, n, steps.data(), steps.size(), p);
        };
        return true;
    }

    Recorder& rec_;
    std::size_t boundary_, output_;
    std::vector<std::set<std::size_t>> uses_;  // per traced buffer, the calls that reference it
};

}  // namespace

std::size_t fuse(Recorder& rec, std::size_t boundary, std::size_t output) {
    Fusion f(rec, boundary, output);
    f.redirect_products();
    return f.merge();
}

bool fusion_disabled_by_environment() {
    const char* v = std::getenv("FLUXION_FUSE");
    return v && std::strcmp(v, "0") == 0;
}

}  // namespace fluxion::detail
