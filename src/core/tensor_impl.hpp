// tensor_impl.hpp — what a Tensor handle points to: storage (memory on one device) and a view of it.
#pragma once
#include <cstddef>
#include <memory>

#include "core/backend.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion::detail {

struct TapeData;

// Memory on one device, freed through its backend when the last view goes away.
struct Storage {
    const backend::Backend* backend = nullptr;
    Device device;
    void* ptr = nullptr;
    std::size_t bytes = 0;

    Storage(const backend::Backend* b, Device d, std::size_t n);
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
    std::shared_ptr<Storage> storage;
    Shape shape;
    Shape strides;
    std::int64_t offset = 0;
    DType dtype = DType::f32;
    // Autodiff: the tape this tensor is recorded on, and its slot there (-1: not tracked).
    TapeData* tape = nullptr;
    std::int64_t tape_id = -1;
};

Shape contiguous_strides(const Shape& shape);
// A fresh contiguous tensor on `device` (uninitialised).
Tensor make_tensor(const Shape& shape, DType dtype, const Device& device);
// A new handle on the same storage with another shape/strides/offset (not tracked).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, std::int64_t offset);

// While fx::compile traces a step on this thread, the kernels of the CPU's table and of the model's
// device's table are reached through recording tables that run each kernel and record it
// (src/core/compile/recorder.hpp). Slot 1 is null when the model is on the CPU.
extern thread_local const backend::Backend* t_recorded_table[2];   // the tables being recorded, else null
extern thread_local const backend::Backend* t_recording_table[2];  // the tables that record them
inline const backend::Backend& traced(const backend::Backend& b) {
    if (&b == t_recorded_table[0]) return *t_recording_table[0];
    return &b == t_recorded_table[1] ? *t_recording_table[1] : b;
}
inline const backend::Backend& untraced(const backend::Backend& b) {
    if (&b == t_recording_table[0]) return *t_recorded_table[0];
    return &b == t_recording_table[1] ? *t_recorded_table[1] : b;
}

// The library's access to a tensor's handle, which the public Tensor keeps private.
struct TensorAccess {
    static TensorImpl* impl(const Tensor& t) { return t.impl_.get(); }
    static Tensor make(std::shared_ptr<TensorImpl> impl) { return Tensor(std::move(impl)); }
};
inline TensorImpl* impl_of(const Tensor& t) { return TensorAccess::impl(t); }

inline const backend::Backend& backend_of(const Tensor& t) { return traced(*impl_of(t)->storage->backend); }
inline int device_index(const Tensor& t) { return t.device().index; }

}  // namespace fluxion::detail
