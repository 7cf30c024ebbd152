// plans.cpp — from a recording to a replayable plan: every buffer the step created gets a place in
// one arena per memory space, the host's and the device's (greedy by size, sharing space between
// buffers whose lifetimes do not overlap), every recorded pointer is resolved once, and a replay is
// a loop over the prepared calls.
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "core/compile/fusion.hpp"
#include "core/compile/recorder.hpp"
#include "core/op_arguments.hpp"
#include "core/ops/optimiser_step.hpp"
#include "core/registry.hpp"
#include "core/tensor_impl.hpp"
#include "fluxion/compile.hpp"

namespace fluxion::detail {
namespace {

constexpr std::size_t kAlignment = 64;
constexpr std::size_t kNoMark = std::numeric_limits<std::size_t>::max();
thread_local std::size_t t_mark = kNoMark;

std::size_t aligned(std::size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

struct Plan {
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    std::vector<RecordedCall> calls;
    std::size_t boundary = 0;  // calls [0, boundary) are phase 0
    std::vector<void*> ptrs;   // every call's pointer arguments, resolved
    struct InputSlot {
        std::size_t at, input;
        std::uintptr_t offset;
    };
    std::vector<InputSlot> inputs;  // entries of ptrs set from each replay's inputs
    std::vector<std::unique_ptr<backend::OptimiserStep>> optimiser_steps;
    Tensor arena[2], output;  // per space
    CompileStats stats;
    // Where the device records submissions: the inputs' fixed places on the device, and each
    // phase's device calls as one recording (freed before the memory it uses).
    std::vector<Tensor> input_slots;
    struct Recordings {
        const backend::Backend* table = nullptr;
        int device = 0;
        void* phase[2] = {nullptr, nullptr};
        Recordings() = default;
        Recordings(const Recordings&) = delete;
        Recordings& operator=(const Recordings&) = delete;
        ~Recordings() {
            for (void* r : phase)
                if (r) table->capture_free(device, r);
        }
    } recorded;
};

// Offsets in the arena of `space` for its buffers live over [first, last] calls; returns the arena's
// size.
std::size_t place(int space, const std::vector<TracedBuffer>& buffers, std::vector<std::size_t>& offset) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < buffers.size(); ++i)
        if (buffers[i].first_use >= 0 && buffers[i].space == space) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return buffers[a].bytes > buffers[b].bytes; });
    std::vector<std::size_t> placed;
    std::size_t arena = 0;
    for (auto i : order) {
        const auto& b = buffers[i];
        std::size_t size = aligned(std::max<std::size_t>(b.bytes, 1));
        // Intervals taken by buffers alive at the same time, lowest first; the first gap that fits wins.
        std::vector<std::pair<std::size_t, std::size_t>> taken;
        for (auto j : placed) {
            const auto& o = buffers[j];
            if (o.first_use <= b.last_use && b.first_use <= o.last_use)
                taken.emplace_back(offset[j], offset[j] + aligned(std::max<std::size_t>(o.bytes, 1)));
        }
        std::sort(taken.begin(), taken.end());
        std::size_t at = 0;
        for (auto [lo, hi] : taken) {
            if (at + size <= lo) break;
            at = std::max(at, hi);
        }
        offset[i] = at;
        arena = std::max(arena, at + size);
        placed.push_back(i);
    }
    return arena;
}

// Why a recording cannot be replayed, or nothing.
int space_of_output(const Recorder& rec, const Tensor& out) { return std::max(rec.space_of(out.device()), 0); }

std::string refusal(Recorder& rec, const Tensor& out) {
    BufferRef oref = rec.resolve(space_of_output(rec, out), out.data_ptr());
    if (oref.kind != BufferRef::Kind::traced)
        return "fx::compile: the step returns a tensor it did not compute (an input or a tensor of the model); a "
               "compiled function must return a new tensor";
    if (!rec.refused.empty()) return rec.refused;
    if (rec.freed_fixed)
        return "fx::compile: the step frees a tensor that existed before it and that its kernels used (a tensor "
               "replaced inside the function?); a replay would use that memory after it is gone";
    for (std::size_t i = 0; i < rec.buffers.size(); ++i) {
        const auto& b = rec.buffers[i];
        if (i != oref.index && !b.freed && b.first_use >= 0)
            return "fx::compile: the step keeps a tensor of " + std::to_string(b.bytes) +
                   " bytes that it computed (saved outside the function?), which a replay would not update; a "
                   "compiled function may keep only its result";
    }
    return {};
}

// Whether the device can record the plan's device calls as submissions (record_submissions).
bool recordable(const Recorder& rec) {
    if (rec.device.is_cpu() || !untraced(backend_for(rec.device)).capture_begin) return false;
    for (const auto& c : rec.calls)
        if (c.download) return false;
    return true;
}

// `recorded`: the host's calls of a phase will all run before its device calls, so host memory
// is not shared between buffers (a later host call would overwrite what a device call still reads).
// `fused`: the CPU's calls are fused first (fusion.hpp).
std::unique_ptr<Plan> build(Recorder& rec, const Tensor& out, std::size_t boundary, bool recorded, bool fused) {
    BufferRef oref = rec.resolve(space_of_output(rec, out), out.data_ptr());
    auto& buffers = rec.buffers;
    const std::size_t traced_calls = rec.calls.size();
    std::size_t total = 0;  // what the traced step allocated, fusion's intermediates included
    for (std::size_t i = 0; i < buffers.size(); ++i)
        if (buffers[i].first_use >= 0 || i == oref.index) total += buffers[i].bytes;
    if (fused) boundary = fuse(rec, boundary, oref.index);
    auto ncalls = static_cast<std::int64_t>(rec.calls.size());
    for (std::size_t i = 0; i < buffers.size(); ++i) {
        auto& b = buffers[i];
        if (i == oref.index) {
            if (b.first_use < 0) b.first_use = 0;
            b.last_use = ncalls;  // read after the step
        }
        if (recorded && b.space == kHost && b.first_use >= 0) b.last_use = ncalls;
    }
    auto plan = std::make_unique<Plan>();
    for (const auto& t : rec.inputs) plan->shapes.push_back(t.shape()), plan->dtypes.push_back(t.dtype());
    std::vector<std::size_t> offset(buffers.size(), 0);
    std::size_t arena[2] = {place(kHost, buffers, offset), place(kDevice, buffers, offset)};
    plan->stats = {rec.calls.size(), traced_calls, arena[0] + arena[1], total};
    plan->calls = std::move(rec.calls);
    plan->boundary = boundary == kNoMark ? plan->calls.size() : boundary;
    plan->optimiser_steps = std::move(rec.optimiser_steps);
    char* base[2] = {nullptr, nullptr};
    for (int s : {kHost, kDevice}) {
        if (arena[s] == 0) continue;
        plan->arena[s] =
            make_tensor({static_cast<std::int64_t>(arena[s])}, DType::u8, s == kHost ? Device{} : rec.device);
        base[s] = static_cast<char*>(plan->arena[s].data_ptr());
    }
    plan->ptrs.resize(rec.refs.size());
    for (std::size_t i = 0; i < rec.refs.size(); ++i) {
        const auto& r = rec.refs[i];
        switch (r.kind) {
            case BufferRef::Kind::fixed: plan->ptrs[i] = reinterpret_cast<void*>(r.offset); break;
            case BufferRef::Kind::traced:
                plan->ptrs[i] = base[buffers[r.index].space] + offset[r.index] + r.offset;
                break;
            case BufferRef::Kind::input: plan->inputs.push_back({i, r.index, r.offset}); break;
        }
    }
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = impl_of(plan->arena[buffers[oref.index].space])->storage;
    impl->shape = out.shape();
    impl->strides = out.strides();
    impl->dtype = out.dtype();
    impl->offset = static_cast<std::int64_t>((offset[oref.index] + oref.offset) / itemsize(out.dtype()));
    plan->output = TensorAccess::make(std::move(impl));
    return plan;
}

// Records each phase's device calls as one submission (where recordable: Vulkan): the inputs get
// fixed places on the device, copied in at each replay. If the device fails to record, the plan
// replays call by call.
void record_submissions(Plan& plan, const Device& device) {
    const backend::Backend& table = untraced(backend_for(device));
    for (std::size_t i = 0; i < plan.shapes.size(); ++i)
        plan.input_slots.push_back(make_tensor(plan.shapes[i], plan.dtypes[i], device));
    for (const auto& slot : plan.inputs)
        plan.ptrs[slot.at] = static_cast<char*>(plan.input_slots[slot.input].data_ptr()) + slot.offset;
    plan.recorded.table = &table;
    plan.recorded.device = device.index;
    void* const* ptrs = plan.ptrs.data();
    for (int phase : {0, 1}) {
        std::size_t begin = phase == 0 ? 0 : plan.boundary, end = phase == 0 ? plan.boundary : plan.calls.size();
        table.capture_begin(device.index);
        try {
            for (std::size_t c = begin; c < end; ++c)
                if (plan.calls[c].space == kDevice) plan.calls[c].run(ptrs + plan.calls[c].first);
        } catch (const Error&) {  // the plan replays call by call
            if (void* r = table.capture_end(device.index)) table.capture_free(device.index, r);
            for (void*& r : plan.recorded.phase)
                if (r) table.capture_free(device.index, std::exchange(r, nullptr));
            plan.input_slots.clear();
            return;
        }
        plan.recorded.phase[phase] = table.capture_end(device.index);
    }
    plan.stats.recorded = true;
}

std::string shapes_of(const std::vector<Shape>& shapes) {
    std::string s;
    for (const auto& sh : shapes) s += (s.empty() ? "" : ", ") + to_string(sh);
    return s;
}

}  // namespace

struct CompiledPlans::Impl {
    std::string what;
    bool cache, fuse;
    std::vector<std::unique_ptr<Plan>> plans;
    Tensor probe;  // take_hyperparameters' (no kernel runs on it)
};

CompiledPlans::CompiledPlans(std::string what, bool cache, bool fuse)
    : impl_(std::make_unique<Impl>(Impl{std::move(what), cache, fuse, {}, zeros({1})})) {}
CompiledPlans::~CompiledPlans() = default;
CompiledPlans::CompiledPlans(CompiledPlans&&) noexcept = default;
CompiledPlans& CompiledPlans::operator=(CompiledPlans&&) noexcept = default;

int CompiledPlans::find(const Tensor* inputs, std::size_t n) const {
    for (std::size_t p = 0; p < impl_->plans.size(); ++p) {
        const Plan& plan = *impl_->plans[p];
        bool fits = plan.shapes.size() == n;
        for (std::size_t i = 0; fits && i < n; ++i)
            fits = inputs[i].shape() == plan.shapes[i] && inputs[i].dtype() == plan.dtypes[i];
        if (fits) return static_cast<int>(p);
    }
    return -1;
}

void CompiledPlans::check_devices(const Tensor* inputs, std::size_t n, const Device& device) const {
    for (std::size_t i = 0; i < n; ++i) {
        require_defined(impl_->what.c_str(), inputs[i]);
        if (!(inputs[i].device() == device))
            throw DeviceError(impl_->what + ": input " + std::to_string(i + 1) + " is on " + inputs[i].device().str() +
                              " but the model is on " + device.str() + "; move the input with | " +
                              (device.is_cpu() ? std::string("fx::cpu") : "dev"));
    }
}

CompiledPlans::Traced CompiledPlans::trace(std::vector<Tensor> inputs, const Device& device,
                                           const std::function<Tensor(const std::vector<Tensor>&)>& step) {
    if (!impl_->cache && !impl_->plans.empty()) {
        std::vector<Shape> given;
        for (const auto& t : inputs) given.push_back(t.shape());
        throw ValueError(impl_->what + ": inputs of shapes " + shapes_of(given) + ", but it was compiled for " +
                         shapes_of(impl_->plans[0]->shapes) +
                         " and caching is off (CompileOptions{.cache = false}); turn it on, or compile one per shape");
    }
    Recorder rec(std::move(inputs), device);
    t_mark = kNoMark;
    Tensor out = step(rec.inputs);
    require_defined(impl_->what.c_str(), out);
    rec.stop();  // what follows (the arena) is not part of the step
    if (std::string why = refusal(rec, out); !why.empty()) return {-1, out, why};
    const bool recorded = recordable(rec);
    impl_->plans.push_back(build(rec, out, t_mark, recorded, impl_->fuse && !fusion_disabled_by_environment()));
    if (recorded) record_submissions(*impl_->plans.back(), device);
    return {static_cast<int>(impl_->plans.size()) - 1, out, {}};
}

void CompiledPlans::mark_phase() {
    if (Recorder* r = active_recorder()) t_mark = r->calls.size();
}

void CompiledPlans::replay(int p, const Tensor* inputs, int phase) {
    Plan& plan = *impl_->plans[static_cast<std::size_t>(p)];
    std::size_t begin = phase == 0 ? 0 : plan.boundary, end = phase == 0 ? plan.boundary : plan.calls.size();
    void* const* ptrs = plan.ptrs.data();
    if (void* recording = plan.recorded.phase[phase]) {
        // The host's calls first (they only make data for the device), then one submission.
        const backend::Backend& table = *plan.recorded.table;
        const int d = plan.recorded.device;
        if (phase == 0)
            for (std::size_t i = 0; i < plan.input_slots.size(); ++i)
                table.copy_device(d, plan.input_slots[i].data_ptr(), d, inputs[i].data_ptr(),
                                  static_cast<std::size_t>(inputs[i].numel()) * itemsize(inputs[i].dtype()));
        for (std::size_t c = begin; c < end; ++c)
            if (plan.calls[c].space == kHost) plan.calls[c].run(ptrs + plan.calls[c].first);
        table.capture_run(d, recording);
        return;
    }
    for (const auto& s : plan.inputs) plan.ptrs[s.at] = static_cast<char*>(inputs[s.input].data_ptr()) + s.offset;
    for (std::size_t c = begin; c < end; ++c) plan.calls[c].run(ptrs + plan.calls[c].first);
}

// On a device the value is copied through the real table: inside a trace that copy is a read on the
// host, not a kernel of the step.
double CompiledPlans::read(const Tensor& t) {
    if (t.numel() != 1)
        throw ShapeError("fx::compile: the step returned " + summary(t) +
                         "; a training step returns a one-element loss");
    if (!is_floating(t.dtype()))
        throw DTypeError(std::string("fx::compile: the loss is ") + name(t.dtype()) +
                         "; it must be a floating type (f32, f64, f16 or bf16)");
    unsigned char bytes[8] = {};
    if (t.device().is_cpu()) std::memcpy(bytes, t.data_ptr(), itemsize(t.dtype()));
    else untraced(backend_of(t)).copy_to_host(t.device().index, bytes, t.data_ptr(), itemsize(t.dtype()));
    if (t.dtype() == DType::f64) {
        double d = 0;
        std::memcpy(&d, bytes, sizeof d);
        return d;
    }
    float f = 0;  // f32, or a half type widened on the host (no kernel of the step)
    backend::cpu_backend().cast(0, t.dtype(), DType::f32, 1, bytes, &f);
    return double(f);
}

double CompiledPlans::value(int p) const { return read(impl_->plans[static_cast<std::size_t>(p)]->output); }

void CompiledPlans::values(int p, double* out, std::size_t n) const {
    const Tensor& t = impl_->plans[static_cast<std::size_t>(p)]->output;
    if (static_cast<std::size_t>(t.numel()) != n || (t.dtype() != DType::f32 && t.dtype() != DType::f64) ||
        n > kMaxValues)
        throw ShapeError("fx::compile: the step returned " + summary(t) + "; " + std::to_string(n) +
                         " f32 or f64 values were expected");
    unsigned char bytes[kMaxValues * sizeof(double)] = {};
    const std::size_t size = n * itemsize(t.dtype());
    if (t.device().is_cpu()) std::memcpy(bytes, t.data_ptr(), size);
    else untraced(backend_of(t)).copy_to_host(t.device().index, bytes, t.data_ptr(), size);
    for (std::size_t i = 0; i < n; ++i) {
        if (t.dtype() == DType::f64) {
            std::memcpy(&out[i], bytes + i * sizeof(double), sizeof(double));
        } else {
            float f = 0;
            std::memcpy(&f, bytes + i * sizeof(float), sizeof(float));
            out[i] = double(f);
        }
    }
}
const Tensor& CompiledPlans::output(int p) const { return impl_->plans[static_cast<std::size_t>(p)]->output; }

std::size_t CompiledPlans::optimiser_steps(int p) const {
    return impl_->plans[static_cast<std::size_t>(p)]->optimiser_steps.size();
}

void CompiledPlans::take_hyperparameters(int p, const std::function<void(Tensor&)>& step) {
    backend::OptimiserStep now;
    if (!capture_optimiser_step(now, [&] { step(impl_->probe); })) return;
    for (auto& hp : impl_->plans[static_cast<std::size_t>(p)]->optimiser_steps) {
        const std::int64_t t = hp->t;
        *hp = now;
        hp->t = t;
    }
}

void CompiledPlans::set_optimiser_step(int p, std::size_t k, std::int64_t t) {
    impl_->plans[static_cast<std::size_t>(p)]->optimiser_steps[k]->t = t;
}

CompileStats CompiledPlans::stats(int p) const {
    return p < 0 ? CompileStats{} : impl_->plans[static_cast<std::size_t>(p)]->stats;
}

void CompiledPlans::clear() { impl_->plans.clear(); }

bool Identity::same_tensor(const Tensor& a, const Tensor& b) {
    if (a.defined() != b.defined()) return false;
    return !a.defined() || (a.data_ptr() == b.data_ptr() && a.numel() == b.numel() && a.dtype() == b.dtype());
}

void StepSnapshot::keep(const Tensor& t) {
    NoGrad no_grad;
    copies_.push_back(t.defined() ? t.clone() : Tensor());
}

void StepSnapshot::put_back(const Tensor& t, std::size_t i) const {
    if (!t.defined()) return;
    NoGrad no_grad;
    Tensor into = t;
    into.copy_(copies_[i]);
}

Device Identity::device() const {
    for (const auto& t : held_)
        if (t.defined()) return t.device();
    return Device{};
}

}  // namespace fluxion::detail
