// overlap.cpp — gradients averaged while the backward pass runs (overlap.hpp). The sweep tells a
// LeafObserver (core/tape.hpp) of each final leaf gradient; a leaf is matched to a planned tensor by
// its storage, shape and dtype. Every MPI call is a recorded host write, so fx::compile replays the
// overlap as it traced it: the copies into a bucket, its start at the same point of the sweep, the
// wait in the optimiser step.
#include "distributed/overlap.hpp"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "core/compile/recorder.hpp"
#include "core/tape.hpp"
#include "core/tensor_impl.hpp"
#include "distributed/exchange.hpp"
#include "distributed/runtime.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::distributed::detail {
namespace {

constexpr const char* kOperation = "AverageGradients";
constexpr std::size_t kPlansKept = 4;  // models trained side by side on one thread

struct Planned {
    std::weak_ptr<fluxion::detail::Storage> storage;  // a tensor that died is not matched by its address
    const void* data;
    Shape shape;
    DType dtype;
    std::size_t bucket;
    std::int64_t offset;         // elements into the bucket
    bool ready = false;          // this sweep copied its gradient in
    const void* grad = nullptr;  // the gradient it copied, to recognise it in the optimiser step

    bool is(const Tensor& t) const {
        return t.data_ptr() == data && t.shape() == shape && t.dtype() == dtype &&
               storage.lock() == fluxion::detail::impl_of(t)->storage;
    }
};

struct Bucket {
    DType wire = DType::f32;
    std::int64_t numel = 0;
    std::size_t members = 0;
    // This step's: the packed gradients, how many are in, and the requests in flight, which the
    // recorded start and finish of a compiled step share.
    Tensor flat;
    std::size_t ready = 0;
    bool started = false;
    std::shared_ptr<std::vector<MPI_Request>> requests = std::make_shared<std::vector<MPI_Request>>();
};

struct Plan {
    std::size_t bucket_bytes;
    std::vector<Planned> params;
    std::vector<Bucket> buckets;
    std::unordered_map<const void*, std::size_t> by_data;

    bool same(const std::vector<Tensor>& ts, std::size_t bytes) const {
        if (bytes != bucket_bytes || ts.size() != params.size()) return false;
        for (std::size_t i = 0; i < ts.size(); ++i)
            if (!ts[i].defined() || !params[i].is(ts[i])) return false;
        return true;
    }
    bool alive() const {
        return std::none_of(params.begin(), params.end(), [](const Planned& p) { return p.storage.expired(); });
    }
    bool any_ready() const {
        return std::any_of(params.begin(), params.end(), [](const Planned& p) { return p.ready; });
    }
};

thread_local std::int64_t g_started = 0;  // allreduces started by sweeps of this thread, replays included

void copy_in(Bucket& b, const Planned& p, const Tensor& grad) {
    if (!b.flat.defined()) b.flat = empty({b.numel}, {.dtype = b.wire});
    const std::int64_t n = numel(p.shape);
    if (n > 0) {
        Tensor slot = b.flat.slice(0, p.offset, p.offset + n).reshape(p.shape);
        if (!grad.defined()) {
            slot.fill_(0.0);
        } else {
            // As the tape hands it to the optimiser: in the tensor's own dtype, then the wire's.
            const Tensor g = grad.dtype() == p.dtype ? grad : cast(grad, p.dtype);
            slot.copy_(g.dtype() == b.wire ? g : g.to(b.wire));
        }
    }
    ++b.ready;
}

// Starts the bucket's allreduce; `in_sweep` says it starts during the backward pass (counted).
void start(Bucket& b, std::size_t bucket_bytes, bool in_sweep) {
    b.started = true;
    if (b.numel == 0) return;
    fluxion::detail::host_write(b.flat.data_ptr(), [count = static_cast<std::size_t>(b.numel), wire = b.wire,
                                                    bucket_bytes, in_sweep, requests = b.requests](void* data) {
        start_allreduce(data, count, wire, ReduceOp::mean, bucket_bytes, *requests, kOperation);
        if (in_sweep) ++g_started;
    });
}

void finish(Bucket& b) {
    if (b.numel == 0) return;
    fluxion::detail::host_write(b.flat.data_ptr(), [count = static_cast<std::size_t>(b.numel), wire = b.wire,
                                                    requests = b.requests](void* data) {
        finish_allreduce(data, count, wire, ReduceOp::mean, *requests, kOperation);
    });
}

// Forgets this step's work; what was started is waited for first (every rank started it).
void reset(Plan& plan) {
    for (Bucket& b : plan.buckets) {
        if (b.started && b.numel > 0) finish(b);
        b.flat = Tensor(), b.ready = 0, b.started = false;
    }
    for (Planned& p : plan.params) p.ready = false, p.grad = nullptr;
}

class Overlap final : public fluxion::detail::LeafObserver {
public:
    std::vector<std::unique_ptr<Plan>> plans;  // the most recent last

    ~Overlap() override { fluxion::detail::set_leaf_observer(nullptr); }

    void sweep_begins() override {
        drain();
        forget_the_dead();
    }

    void forget_the_dead() {
        std::erase_if(plans, [](const auto& plan) {
            if (plan->alive()) return false;
            reset(*plan);
            return true;
        });
    }

    // Forgets the work of the last sweep (what it started is waited for: every rank started it).
    void drain() {
        for (auto& plan : plans)
            if (plan->any_ready()) reset(*plan);
    }

    void leaf_ready(const Tensor& leaf, const Tensor& grad) override {
        for (auto& plan : plans) {
            const auto found = plan->by_data.find(leaf.data_ptr());
            if (found == plan->by_data.end()) continue;
            Planned& p = plan->params[found->second];
            if (p.ready || !p.is(leaf)) continue;
            Bucket& b = plan->buckets[p.bucket];
            copy_in(b, p, grad);
            p.ready = true;
            p.grad = grad.defined() ? grad.data_ptr() : nullptr;
            if (b.ready == b.members) start(b, plan->bucket_bytes, true);
        }
    }
};

Overlap& overlap() {
    thread_local Overlap o;
    return o;
}

}  // namespace

void plan_overlap(const std::vector<Tensor>& params, std::size_t bucket_bytes) {
    if (!using_mpi() || params.empty()) return;
    for (const Tensor& t : params)
        if (!t.defined() || !t.device().is_cpu()) return;
    Overlap& o = overlap();
    for (const auto& plan : o.plans)
        if (plan->same(params, bucket_bytes)) return;
    check_same_everywhere(params, kOperation);

    auto plan = std::make_unique<Plan>();
    plan->bucket_bytes = bucket_bytes;
    std::vector<std::size_t> open;  // per wire type, the bucket being filled
    for (std::size_t i = params.size(); i-- > 0;) {
        const Tensor& t = params[i];
        const DType wire = wire_dtype(t.dtype());
        auto it = std::find_if(open.begin(), open.end(), [&](std::size_t b) { return plan->buckets[b].wire == wire; });
        const auto bytes = static_cast<std::size_t>(t.numel()) * itemsize(wire);
        if (it != open.end() && plan->buckets[*it].numel > 0 &&
            static_cast<std::size_t>(plan->buckets[*it].numel) * itemsize(wire) + bytes > bucket_bytes) {
            open.erase(it);
            it = open.end();
        }
        if (it == open.end()) {
            plan->buckets.emplace_back().wire = wire;
            it = open.insert(open.end(), plan->buckets.size() - 1);
        }
        Bucket& b = plan->buckets[*it];
        plan->params.resize(params.size());
        plan->params[i] = Planned{fluxion::detail::impl_of(t)->storage, t.data_ptr(), t.shape(), t.dtype(), *it, b.numel};
        plan->by_data.emplace(t.data_ptr(), i);
        b.numel += t.numel();
        ++b.members;
    }
    o.forget_the_dead();
    if (o.plans.size() == kPlansKept) {
        reset(*o.plans.front());
        o.plans.erase(o.plans.begin());
    }
    o.plans.push_back(std::move(plan));
    fluxion::detail::set_leaf_observer(&o);
}

bool finish_overlap(std::vector<Tensor>& grads, const std::vector<Tensor>& params, std::size_t bucket_bytes) {
    Overlap& o = overlap();
    auto found = std::find_if(o.plans.begin(), o.plans.end(),
                              [&](const auto& plan) { return plan->same(params, bucket_bytes); });
    if (found == o.plans.end() || !(*found)->any_ready()) {
        o.drain();  // a sweep over other tensors (a subset, after freeze) leaves nothing behind
        return false;
    }
    Plan& plan = **found;
    for (std::size_t i = 0; i < grads.size(); ++i) {
        const Planned& p = plan.params[i];
        if (p.ready && p.grad && (!grads[i].defined() || grads[i].data_ptr() != p.grad)) {
            reset(plan);  // changed after the sweep: what was sent is not what the step uses
            return false;
        }
    }
    NoGrad no_grad;
    for (std::size_t i = 0; i < grads.size(); ++i) {
        Planned& p = plan.params[i];
        if (p.ready) continue;
        Bucket& b = plan.buckets[p.bucket];
        copy_in(b, p, grads[i]);
        p.ready = true;
        if (b.ready == b.members) start(b, plan.bucket_bytes, false);
    }
    for (Bucket& b : plan.buckets) finish(b);
    for (std::size_t i = 0; i < grads.size(); ++i) {
        const Planned& p = plan.params[i];
        const Bucket& b = plan.buckets[p.bucket];
        const Tensor averaged = numel(p.shape) > 0
                                    ? b.flat.slice(0, p.offset, p.offset + numel(p.shape)).reshape(p.shape)
                                    : zeros(p.shape, {.dtype = b.wire});
        grads[i] = averaged.dtype() == p.dtype ? averaged : averaged.to(p.dtype);
    }
    for (Bucket& b : plan.buckets) b.flat = Tensor(), b.ready = 0, b.started = false;
    for (Planned& p : plan.params) p.ready = false, p.grad = nullptr;
    return true;
}

std::int64_t overlapped_buckets() { return g_started; }

}  // namespace fluxion::distributed::detail
