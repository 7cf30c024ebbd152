// fluxion/tensor.hpp — the n-dimensional array: a cheap, reference-counted handle with shape,
// strides, element type, device and storage offset. Views share storage.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "fluxion/device.hpp"
#include "fluxion/dtype.hpp"
#include "fluxion/error.hpp"

namespace fluxion {

using Shape = std::vector<std::int64_t>;
std::string to_string(const Shape& shape);  // "{2, 5}"
std::int64_t numel(const Shape& shape);

namespace detail {
struct TensorAccess;
struct Storage;
struct TensorImpl;
}  // namespace detail

struct TensorOptions {
    DType dtype = DType::f32;
    Device device = {};  // CPU
};

class Tensor {
public:
    Tensor();  // an empty handle; defined() is false

    bool defined() const { return impl_ != nullptr; }
    const Shape& shape() const;
    std::int64_t shape(int axis) const;     // negative axes count from the end
    const Shape& strides() const;
    int ndim() const;
    std::int64_t numel() const;
    DType dtype() const;
    const Device& device() const;
    std::int64_t offset() const;            // storage offset, in elements
    bool is_contiguous() const;

    // ---- views (share storage) and copies ----
    Tensor reshape(const Shape& shape) const;          // one dimension may be -1; copies if not contiguous
    Tensor permute(const std::vector<int>& axes) const;
    Tensor transpose(int a = -2, int b = -1) const;    // swaps two axes
    Tensor slice(int axis, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const;
    Tensor select(int axis, std::int64_t index) const;  // removes the axis
    Tensor unsqueeze(int axis) const;
    Tensor squeeze(int axis) const;
    Tensor flatten(int start = 0, int end = -1) const;
    Tensor expand(const Shape& shape) const;           // broadcast view (stride 0)
    Tensor contiguous() const;                         // this if already contiguous
    Tensor clone() const;                              // always a fresh copy, detached from autodiff
    Tensor detach() const;                             // same storage, not tracked by autodiff
    Tensor to(const Device& device) const;             // copy to another device (this if already there)
    Tensor to(DType dtype) const;                      // cast (this if already that type)

    // ---- element access ----
    template <class T> std::vector<T> to_vector() const;  // copies out (to the host), converting type
    double item() const;                                   // one-element tensors only
    template <class T> T item() const { return static_cast<T>(item()); }
    double at(const std::vector<std::int64_t>& index) const;  // non-CPU only under allowscalar(true)

    // ---- in-place (never tracked; used by optimisers and loaders) ----
    void copy_(const Tensor& src);  // same shape; may come from another device
    void fill_(double value);

    // Raw pointer to the first element on its device (offset applied). For backends and interop.
    void* data_ptr() const;
    template <class T> T* data() const { return static_cast<T*>(data_ptr()); }

    // Whether both are handles on the same tensor, not merely on equal values (PyTorch's is_same).
    bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

private:
    friend struct detail::TensorAccess;  // the library's view of the handle (src/core/tensor_impl.hpp)
    explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<detail::TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);  // Julia REPL style
std::string summary(const Tensor& t);                          // "2×5 Tensor<f32, CPU>"

// ---- factories ----
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor rand(const Shape& shape, TensorOptions options = {});   // uniform on [0, 1)
Tensor randn(const Shape& shape, TensorOptions options = {});  // standard normal
Tensor arange(double start, double stop, double step = 1, TensorOptions options = {});
Tensor arange(std::int64_t stop, TensorOptions options = {.dtype = DType::i64});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);

// From host data; the element type follows T unless options say otherwise.
template <class T> Tensor tensor(const std::vector<T>& data, const Shape& shape, TensorOptions options);
template <class T> Tensor tensor(const std::vector<T>& data, const Shape& shape) {
    return tensor(data, shape, TensorOptions{.dtype = dtype_of<T>()});
}
template <class T> Tensor tensor(const std::vector<T>& data) { return tensor(data, Shape{std::int64_t(data.size())}); }
inline Tensor tensor(std::initializer_list<float> data, const Shape& shape) { return tensor(std::vector<float>(data), shape); }
inline Tensor tensor(std::initializer_list<float> data) { return tensor(std::vector<float>(data)); }
Tensor scalar(double value, TensorOptions options = {});  // a 0-dimensional tensor

// Random numbers: every random factory and initialiser draws from one generator.
void seed(std::uint64_t n);

}  // namespace fluxion
