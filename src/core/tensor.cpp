// tensor.cpp — the Tensor handle: accessors, views (recorded for autodiff), copies and moves.
#include "fluxion/tensor.hpp"

#include <algorithm>
#include <numeric>

#include "core/op_arguments.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

using detail::make_view;
using detail::record;

std::string to_string(const Shape& shape) {
    std::string s = "{";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "}";
}

std::int64_t numel(const Shape& shape) {
    return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

Tensor::Tensor() = default;

namespace {
const detail::TensorImpl& checked(const std::shared_ptr<detail::TensorImpl>& p) {
    if (!p) throw ValueError("Tensor: this handle is empty (default-constructed); assign a tensor to it first");
    return *p;
}
}  // namespace

const Shape& Tensor::shape() const { return checked(impl_).shape; }
std::int64_t Tensor::shape(int axis) const { return shape()[detail::normalize_axis("shape", axis, ndim())]; }
const Shape& Tensor::strides() const { return checked(impl_).strides; }
int Tensor::ndim() const { return static_cast<int>(shape().size()); }
std::int64_t Tensor::numel() const { return fluxion::numel(shape()); }
DType Tensor::dtype() const { return checked(impl_).dtype; }
const Device& Tensor::device() const { return checked(impl_).storage->device; }
std::int64_t Tensor::offset() const { return checked(impl_).offset; }

bool Tensor::is_contiguous() const {
    const auto& sh = shape();
    const auto& st = strides();
    std::int64_t expected = 1;
    for (std::size_t i = sh.size(); i-- > 0;) {
        if (sh[i] != 1 && st[i] != expected) return false;
        expected *= sh[i];
    }
    return true;
}

void* Tensor::data_ptr() const {
    const auto& impl = checked(impl_);
    return static_cast<char*>(impl.storage->ptr) + impl.offset * static_cast<std::int64_t>(itemsize(impl.dtype));
}

// ---- views ----

Tensor Tensor::reshape(const Shape& new_shape) const {
    Shape s = new_shape;
    std::int64_t known = 1;
    int infer = -1;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == -1) {
            if (infer >= 0) throw ShapeError("reshape: only one dimension may be -1, got " + to_string(new_shape));
            infer = static_cast<int>(i);
        } else {
            known *= s[i];
        }
    }
    if (infer >= 0 && known > 0 && numel() % known == 0) s[infer] = numel() / known;
    if (fluxion::numel(s) != numel() || (infer >= 0 && known == 0))
        throw ShapeError("reshape: cannot reshape a tensor of shape " + to_string(shape()) + " (" +
                         std::to_string(numel()) + " elements) to " + to_string(new_shape));
    Tensor base = is_contiguous() ? *this : contiguous();
    Tensor out = make_view(base, s, detail::contiguous_strides(s), base.offset());
    Shape from = shape();
    return record("reshape", {*this}, out, [from](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{g.reshape(from)};
    });
}

Tensor Tensor::permute(const std::vector<int>& axes) const {
    int n = ndim();
    if (static_cast<int>(axes.size()) != n)
        throw ShapeError("permute: " + std::to_string(axes.size()) + " axes given for a tensor with " +
                         std::to_string(n) + " dimensions");
    Shape sh(n), st(n);
    std::vector<int> inverse(n, -1);
    for (int i = 0; i < n; ++i) {
        int a = detail::normalize_axis("permute", axes[i], n);
        if (inverse[a] >= 0) throw ShapeError("permute: axis " + std::to_string(a) + " appears twice");
        inverse[a] = i;
        sh[i] = shape()[a];
        st[i] = strides()[a];
    }
    Tensor out = make_view(*this, sh, st, offset());
    return record("permute", {*this}, out, [inverse](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{g.permute(inverse)};
    });
}

Tensor Tensor::transpose(int a, int b) const {
    int n = ndim();
    std::vector<int> axes(n);
    std::iota(axes.begin(), axes.end(), 0);
    std::swap(axes[detail::normalize_axis("transpose", a, n)], axes[detail::normalize_axis("transpose", b, n)]);
    return permute(axes);
}

Tensor Tensor::slice(int axis, std::int64_t start, std::int64_t stop, std::int64_t step) const {
    int a = detail::normalize_axis("slice", axis, ndim());
    if (step <= 0) throw ValueError("slice: step must be positive, got " + std::to_string(step));
    std::int64_t n = shape()[a];
    auto clampi = [n](std::int64_t i) { return std::clamp(i < 0 ? i + n : i, std::int64_t{0}, n); };
    start = clampi(start);
    stop = std::max(clampi(stop), start);
    Shape sh = shape(), st = strides();
    sh[a] = (stop - start + step - 1) / step;
    st[a] = strides()[a] * step;
    Tensor out = make_view(*this, sh, st, offset() + start * strides()[a]);
    Shape from = shape();
    DType dt = dtype();
    Device dev = device();
    return record("slice", {*this}, out, [=](const Tensor& g, const std::vector<bool>&) {
        Tensor full = zeros(from, {.dtype = dt, .device = dev});
        full.slice(a, start, stop, step).copy_(g);
        return std::vector<Tensor>{full};
    });
}

Tensor Tensor::select(int axis, std::int64_t index) const {
    int a = detail::normalize_axis("select", axis, ndim());
    std::int64_t n = shape()[a];
    if (index < -n || index >= n)
        throw ValueError("select: index " + std::to_string(index) + " is out of range for axis " + std::to_string(a) +
                         " of size " + std::to_string(n));
    if (index < 0) index += n;
    return slice(a, index, index + 1).squeeze(a);
}

Tensor Tensor::unsqueeze(int axis) const {
    int a = detail::normalize_axis("unsqueeze", axis, ndim() + 1);
    Shape sh = shape(), st = strides();
    std::int64_t stride = a < ndim() ? strides()[a] * shape()[a] : 1;
    sh.insert(sh.begin() + a, 1);
    st.insert(st.begin() + a, stride);
    Tensor out = make_view(*this, sh, st, offset());
    Shape from = shape();
    return record("unsqueeze", {*this}, out, [from](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{g.reshape(from)};
    });
}

Tensor Tensor::squeeze(int axis) const {
    int a = detail::normalize_axis("squeeze", axis, ndim());
    if (shape()[a] != 1)
        throw ShapeError("squeeze: axis " + std::to_string(a) + " of shape " + to_string(shape()) + " is not 1");
    Shape sh = shape(), st = strides();
    sh.erase(sh.begin() + a);
    st.erase(st.begin() + a);
    Tensor out = make_view(*this, sh, st, offset());
    Shape from = shape();
    return record("squeeze", {*this}, out, [from](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{g.reshape(from)};
    });
}

Tensor Tensor::flatten(int start, int end) const {
    if (ndim() == 0) return reshape({1});
    int s = detail::normalize_axis("flatten", start, ndim()), e = detail::normalize_axis("flatten", end, ndim());
    if (s > e) throw ValueError("flatten: start axis " + std::to_string(start) + " comes after end axis " + std::to_string(end));
    Shape sh(shape().begin(), shape().begin() + s);
    std::int64_t merged = 1;
    for (int i = s; i <= e; ++i) merged *= shape()[i];
    sh.push_back(merged);
    sh.insert(sh.end(), shape().begin() + e + 1, shape().end());
    return reshape(sh);
}

Tensor Tensor::expand(const Shape& to) const {
    Shape sh = detail::broadcast_shapes("expand", shape(), to);
    if (sh != to) throw ShapeError("expand: cannot expand shape " + to_string(shape()) + " to " + to_string(to));
    auto v = detail::broadcast_view(*this, to);
    Tensor out = make_view(*this, to, Shape(v.strides, v.strides + v.ndim), offset());
    Shape from = shape();
    return record("expand", {*this}, out, [from](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{sum_to(g, from)};
    });
}

Tensor Tensor::contiguous() const {
    if (is_contiguous()) return *this;
    Tensor out = clone();
    return record("contiguous", {*this}, out, [](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{g};
    });
}

Tensor Tensor::clone() const {
    Tensor out = detail::make_tensor(shape(), dtype(), device());
    auto v = detail::view_of(*this);
    detail::backend_of(*this).copy_strided(device().index, dtype(), &v, data_ptr(), out.strides().data(), out.data_ptr());
    return out;
}

Tensor Tensor::detach() const { return make_view(*this, shape(), strides(), offset()); }

Tensor Tensor::to(const Device& target) const {
    if (device() == target) return *this;
    const auto& dst_backend = detail::backend_for(target);
    Tensor src = is_contiguous() ? *this : clone();
    Tensor out = detail::make_tensor(shape(), dtype(), target);
    std::size_t bytes = static_cast<std::size_t>(numel()) * itemsize(dtype());
    if (bytes > 0) {
        if (device().is_cpu()) {
            dst_backend.copy_from_host(target.index, out.data_ptr(), src.data_ptr(), bytes);
        } else if (target.is_cpu()) {
            detail::backend_of(src).copy_to_host(device().index, out.data_ptr(), src.data_ptr(), bytes);
        } else if (device().type == target.type) {
            dst_backend.copy_device(target.index, out.data_ptr(), device().index, src.data_ptr(), bytes);
        } else {
            return to(Device{}).to(target);  // between two backends: through the host
        }
    }
    Device from = device();
    return record("to", {*this}, out, [from](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{g.to(from)};
    });
}

Tensor Tensor::to(DType t) const { return cast(*this, t); }

// ---- element access ----

template <class T> std::vector<T> Tensor::to_vector() const {
    Tensor c = (dtype() == dtype_of<T>() ? *this : cast(detach(), dtype_of<T>())).contiguous();
    std::vector<T> out(static_cast<std::size_t>(c.numel()));
    if (!out.empty()) {
        if (c.device().is_cpu()) std::copy_n(c.data<T>(), out.size(), out.data());
        else detail::backend_of(c).copy_to_host(c.device().index, out.data(), c.data_ptr(), out.size() * sizeof(T));
    }
    return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int32_t> Tensor::to_vector<std::int32_t>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<std::uint8_t> Tensor::to_vector<std::uint8_t>() const;

double Tensor::item() const {
    if (numel() != 1)
        throw ShapeError("item: the tensor has shape " + to_string(shape()) + " (" + std::to_string(numel()) +
                         " elements); item() reads one-element tensors only");
    return to_vector<double>()[0];
}

double Tensor::at(const std::vector<std::int64_t>& index) const {
    if (!device().is_cpu() && !scalar_allowed())
        throw DeviceError("at: reading single elements of a tensor on " + device().str() +
                          " is slow and refused; move it with | fx::cpu, or call fx::allowscalar(true)");
    if (static_cast<int>(index.size()) != ndim())
        throw ShapeError("at: " + std::to_string(index.size()) + " indices for a tensor of shape " + to_string(shape()));
    Tensor v = *this;
    for (int i = ndim() - 1; i >= 0; --i) v = v.detach().select(i, index[i]);
    return v.item();
}

// ---- in-place ----

void Tensor::copy_(const Tensor& src) {
    detail::require_defined("copy_", src);
    Shape sh = detail::broadcast_shapes("copy_", src.shape(), shape());
    if (sh != shape())
        throw ShapeError("copy_: cannot copy a tensor of shape " + to_string(src.shape()) + " into one of shape " +
                         to_string(shape()));
    NoGrad no_grad;
    Tensor s = src.detach().to(device());
    if (s.dtype() != dtype() && s.shape() == shape() && s.is_contiguous() && is_contiguous()) {
        // One pass and no temporary: mixed precision refreshes its compute copy this way every step.
        if (numel() > 0)
            detail::backend_of(*this).cast(device().index, s.dtype(), dtype(), numel(), s.data_ptr(), data_ptr());
        return;
    }
    if (s.dtype() != dtype()) s = cast(s, dtype());
    auto v = detail::broadcast_view(s, shape());
    detail::backend_of(*this).copy_strided(device().index, dtype(), &v, s.data_ptr(), strides().data(), data_ptr());
}

void Tensor::fill_(double value) {
    if (is_contiguous()) detail::backend_of(*this).fill(device().index, dtype(), numel(), data_ptr(), value);
    else copy_(full({}, value, {.dtype = dtype(), .device = device()}));
}

}  // namespace fluxion
