// storage.cpp — device memory ownership and raw tensor construction.
#include "core/compile/recorder.hpp"
#include "core/registry.hpp"
#include "core/tensor_impl.hpp"

namespace fluxion::detail {

// A storage keeps the real table, never the recording one, so that it outlives a trace.
Storage::Storage(const backend::Backend* b, Device d, std::size_t n)
    : backend(&untraced(*b)), device(std::move(d)), bytes(n) {
    ptr = backend->alloc(device.index, n);
    if (Recorder* r = active_recorder())
        if (int space = r->space_of(device); space >= 0) r->on_alloc(space, ptr, n);
}

Storage::~Storage() {
    if (!ptr) return;
    if (Recorder* r = active_recorder())
        if (int space = r->space_of(device); space >= 0) r->on_free(space, ptr, bytes);
    backend->free(device.index, ptr);
}

Shape contiguous_strides(const Shape& shape) {
    Shape s(shape.size());
    std::int64_t acc = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        s[i] = acc;
        acc *= shape[i];
    }
    return s;
}

Tensor make_tensor(const Shape& shape, DType dtype, const Device& device) {
    for (auto d : shape)
        if (d < 0) throw ShapeError("tensor: negative dimension in shape " + to_string(shape));
    auto impl = std::make_shared<TensorImpl>();
    const auto& table = backend_for(device);
    impl->storage = std::make_shared<Storage>(&table, device, static_cast<std::size_t>(numel(shape)) * itemsize(dtype));
    impl->shape = shape;
    impl->strides = contiguous_strides(shape);
    impl->dtype = dtype;
    return TensorAccess::make(std::move(impl));
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, std::int64_t offset) {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = impl_of(base)->storage;
    impl->shape = shape;
    impl->strides = strides;
    impl->offset = offset;
    impl->dtype = base.dtype();
    return TensorAccess::make(std::move(impl));
}

}  // namespace fluxion::detail
