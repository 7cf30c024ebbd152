// op_arguments.cpp — argument checks and view descriptions shared by the ops.
#include "core/op_arguments.hpp"

namespace fluxion::detail {

void require_defined(const char* op, const Tensor& t) {
    if (!t.defined()) throw ValueError(std::string(op) + ": an argument is an empty (undefined) tensor");
}

void require_floating(const char* op, const Tensor& t) {
    if (!is_floating(t.dtype()))
        throw DTypeError(std::string(op) + ": needs a floating-point tensor, got " + name(t.dtype()) +
                         "; convert it with fx::cast(x, fx::DType::f32)");
}

Device common_device(const char* op, const std::vector<Tensor>& args) {
    const Tensor* first = nullptr;
    for (const auto& t : args) {
        require_defined(op, t);
        if (!first) {
            first = &t;
        } else if (!(t.device() == first->device())) {
            throw DeviceError(std::string(op) + ": arguments on " + first->device().str() + " and " + t.device().str() +
                              "; move both with | fx::gpu or | fx::cpu");
        }
    }
    return first ? first->device() : Device{};
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
    std::size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (std::size_t i = 0; i < n; ++i) {
        std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (da != db && da != 1 && db != 1)
            throw ShapeError(std::string(op) + ": shapes " + to_string(a) + " and " + to_string(b) +
                             " cannot be broadcast together (dimension " + std::to_string(i) + ": " +
                             std::to_string(da) + " vs " + std::to_string(db) + ")");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

namespace {

int wrap_axis(const char* op, int axis, int ndim, int span) {
    int a = axis < 0 ? axis + span : axis;
    if (a < 0 || a >= span)
        throw ValueError(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for a tensor with " +
                         std::to_string(ndim) + " dimension(s)" +
                         (ndim == 0 ? "; a 0-d tensor has no axis (reshape it to {1} first)" : ""));
    return a;
}

}  // namespace

int normalize_axis(const char* op, int axis, int ndim) { return wrap_axis(op, axis, ndim, ndim); }
int normalize_scalar_axis(const char* op, int axis, int ndim) { return wrap_axis(op, axis, ndim, std::max(ndim, 1)); }

backend::Strided view_of(const Tensor& t) { return broadcast_view(t, t.shape()); }

backend::Strided broadcast_view(const Tensor& t, const Shape& shape) {
    if (shape.size() > static_cast<std::size_t>(backend::kMaxDims))
        throw ShapeError("tensors have at most " + std::to_string(backend::kMaxDims) + " dimensions, got " + to_string(shape));
    backend::Strided v{};
    v.ndim = static_cast<int>(shape.size());
    std::size_t lead = shape.size() - t.shape().size();
    for (std::size_t i = 0; i < shape.size(); ++i) {
        v.shape[i] = shape[i];
        if (i < lead) v.strides[i] = 0;
        else v.strides[i] = t.shape()[i - lead] == 1 && shape[i] != 1 ? 0 : t.strides()[i - lead];
    }
    return v;
}

Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

}  // namespace fluxion::detail
