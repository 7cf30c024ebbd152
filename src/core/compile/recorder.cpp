// recorder.cpp — which buffer a pointer belongs to, and the lifetimes of traced memory.
#include "core/compile/recorder.hpp"

#include "core/registry.hpp"
#include "core/tensor_impl.hpp"

namespace fluxion::detail {

thread_local const backend::Backend* t_recorded_table[2] = {nullptr, nullptr};
thread_local const backend::Backend* t_recording_table[2] = {nullptr, nullptr};

namespace {
thread_local Recorder* t_recorder = nullptr;
}  // namespace

Recorder* active_recorder() { return t_recorder; }

Recorder::Recorder(std::vector<Tensor> in, const Device& dev) : inputs(std::move(in)), device(dev) {
    if (t_recorder)
        throw ValueError("fx::compile: a step is already being traced on this thread; compiled steps do not nest");
    const backend::Backend* real[2] = {&backend::cpu_backend(), dev.is_cpu() ? nullptr : &untraced(backend_for(dev))};
    for (int s : {kHost, kDevice}) {
        if (!real[s]) continue;
        tables_[s] = recording_table(s, *real[s]);
        t_recorded_table[s] = real[s];
        t_recording_table[s] = &tables_[s];
    }
    t_recorder = this;
}

Recorder::~Recorder() { stop(); }

void Recorder::stop() {
    if (t_recorder != this) return;
    t_recorder = nullptr;
    for (int s : {kHost, kDevice}) t_recorded_table[s] = t_recording_table[s] = nullptr;
}

int Recorder::space_of(const Device& d) const {
    if (d.is_cpu()) return kHost;
    return d == device ? kDevice : -1;
}

void Recorder::on_alloc(int space, const void* ptr, std::size_t bytes) {
    auto base = reinterpret_cast<std::uintptr_t>(ptr);
    live_[space][base] = buffers.size();
    buffers.push_back({.space = space, .base = base, .bytes = bytes});
}

void Recorder::on_free(int space, const void* ptr, std::size_t bytes) {
    auto base = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = live_[space].find(base);
    if (it == live_[space].end()) {  // allocated before the trace
        for (const auto& r : refs)
            if (r.kind == BufferRef::Kind::fixed && r.offset >= base && r.offset < base + bytes) freed_fixed = true;
        return;
    }
    buffers[it->second].freed = true;
    live_[space].erase(it);
}

BufferRef Recorder::resolve(int space, const void* ptr) const {
    auto p = reinterpret_cast<std::uintptr_t>(ptr);
    if (!ptr) return {};
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (space_of(inputs[i].device()) != space) continue;
        // Inputs are contiguous; a replay's inputs may sit elsewhere in their storage.
        auto base = reinterpret_cast<std::uintptr_t>(inputs[i].data_ptr());
        auto bytes = static_cast<std::uintptr_t>(inputs[i].numel()) * itemsize(inputs[i].dtype());
        if (p >= base && p < base + bytes) return {BufferRef::Kind::input, i, p - base};
    }
    auto it = live_[space].upper_bound(p);
    if (it != live_[space].begin()) {
        --it;
        const auto& b = buffers[it->second];
        if (p < b.base + b.bytes || (p == b.base && b.bytes == 0))
            return {BufferRef::Kind::traced, it->second, p - b.base};
    }
    return {BufferRef::Kind::fixed, 0, p};
}

void Recorder::record(int space, std::initializer_list<const void*> ptrs, PreparedCall run, Kernel kernel,
                      int device) {
    record(space, std::vector<const void*>(ptrs), std::move(run), kernel, device);
}

void Recorder::record(int space, const std::vector<const void*>& ptrs, PreparedCall run, Kernel kernel,
                      int device) {
    auto at = static_cast<std::int64_t>(calls.size());
    RecordedCall call{std::move(run), refs.size(), ptrs.size(), space, false, kernel, t_recorded_table[space], device};
    for (const void* p : ptrs) add_ref(at, space, p);
    calls.push_back(std::move(call));
}

void Recorder::record(int space, std::initializer_list<Pointer> ptrs, PreparedCall run, bool download) {
    auto at = static_cast<std::int64_t>(calls.size());
    RecordedCall call{std::move(run), refs.size(), ptrs.size(), space, download};
    for (const auto& p : ptrs) add_ref(at, p.space, p.ptr);
    calls.push_back(std::move(call));
}

void Recorder::add_ref(std::int64_t at, int space, const void* p) {
    BufferRef r = resolve(space, p);
    if (r.kind == BufferRef::Kind::traced) {
        auto& b = buffers[r.index];
        if (b.first_use < 0) b.first_use = at;
        b.last_use = at;
    }
    refs.push_back(r);
}

backend::OptimiserStep* Recorder::keep(const backend::OptimiserStep& hp) {
    optimiser_steps.push_back(std::make_unique<backend::OptimiserStep>(hp));
    return optimiser_steps.back().get();
}

void host_write(void* dst, std::function<void(void*)> write) {
    write(dst);
    if (Recorder* r = active_recorder())
        r->record(kHost, {dst}, [write = std::move(write)](void* const* p) { write(p[0]); });
}

void refuse_replay(const std::string& why) {
    if (Recorder* r = active_recorder(); r && r->refused.empty()) r->refused = why;
}

}  // namespace fluxion::detail
