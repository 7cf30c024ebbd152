// factories.cpp — creating tensors: constants, ranges, host data, and seeded random numbers.
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>

#include "core/compile/recorder.hpp"
#include "core/op_arguments.hpp"
#include "fluxion/compile.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

std::mutex g_rng_mutex;
std::mt19937_64 g_rng{0x5eedf1u};

// Uniform doubles in [0, 1) with 53 random bits: the same sequence on every platform.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

void draw_uniform(double* v, std::size_t n) {
    std::lock_guard lock(g_rng_mutex);
    for (std::size_t i = 0; i < n; ++i) v[i] = uniform01(g_rng);
}

void draw_normal(double* v, std::size_t n) {
    std::lock_guard lock(g_rng_mutex);
    for (std::size_t i = 0; i < n; i += 2) {  // Box–Muller, two normals per pair of uniforms
        double u1 = 1.0 - uniform01(g_rng), u2 = uniform01(g_rng);
        double r = std::sqrt(-2.0 * std::log(u1));
        v[i] = r * std::cos(2 * M_PI * u2);
        if (i + 1 < n) v[i + 1] = r * std::sin(2 * M_PI * u2);
    }
}

// A CPU tensor of type `stored` filled by write(data), then converted as `options` ask. Under
// fx::compile the write is recorded and redone at every replay: random numbers are drawn anew.
Tensor host_tensor(const Shape& shape, DType stored, TensorOptions options, std::function<void(void*)> write) {
    Tensor t = detail::make_tensor(shape, stored, Device{});
    if (t.numel() > 0) detail::host_write(t.data_ptr(), std::move(write));
    if (stored != options.dtype) t = cast(t, options.dtype);
    return t.to(options.device);
}

Tensor from_host(const void* data, const Shape& shape, DType stored, TensorOptions options) {
    std::size_t bytes = static_cast<std::size_t>(numel(shape)) * itemsize(stored);
    if (!detail::active_recorder())
        return host_tensor(shape, stored, options, [data, bytes](void* dst) { std::memcpy(dst, data, bytes); });
    // A replay writes the constant again, from a copy: `data` is gone by then.
    std::vector<char> copy(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    return host_tensor(shape, stored, options, [copy = std::move(copy)](void* dst) {
        std::memcpy(dst, copy.data(), copy.size());
    });
}

}  // namespace

void seed(std::uint64_t n) {
    std::lock_guard lock(g_rng_mutex);
    g_rng.seed(n);
}

namespace detail {

GeneratorState::GeneratorState() {
    std::lock_guard lock(g_rng_mutex);
    state_ = std::make_shared<const std::mt19937_64>(g_rng);
}

void GeneratorState::restore() const {
    std::lock_guard lock(g_rng_mutex);
    g_rng = *static_cast<const std::mt19937_64*>(state_.get());
}

}  // namespace detail

Tensor empty(const Shape& shape, TensorOptions options) { return detail::make_tensor(shape, options.dtype, options.device); }

Tensor full(const Shape& shape, double value, TensorOptions options) {
    Tensor t = empty(shape, options);
    if (t.numel() > 0) detail::backend_of(t).fill(options.device.index, options.dtype, t.numel(), t.data_ptr(), value);
    return t;
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }
Tensor scalar(double value, TensorOptions options) { return full({}, value, options); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, {.dtype = t.dtype(), .device = t.device()}); }

Tensor rand(const Shape& shape, TensorOptions options) {
    auto n = static_cast<std::size_t>(numel(shape));
    return host_tensor(shape, DType::f64, options, [n](void* dst) { draw_uniform(static_cast<double*>(dst), n); });
}

Tensor randn(const Shape& shape, TensorOptions options) {
    auto n = static_cast<std::size_t>(numel(shape));
    return host_tensor(shape, DType::f64, options, [n](void* dst) { draw_normal(static_cast<double*>(dst), n); });
}

Tensor arange(double start, double stop, double step, TensorOptions options) {
    if (step == 0) throw ValueError("arange: step must not be zero");
    auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((stop - start) / step)));
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
    return from_host(v.data(), {n}, DType::f64, options);
}

Tensor arange(std::int64_t stop, TensorOptions options) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(std::max<std::int64_t>(stop, 0)));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(i);
    return from_host(v.data(), {std::int64_t(v.size())}, DType::i64, options);
}

template <class T> Tensor tensor(const std::vector<T>& data, const Shape& shape, TensorOptions options) {
    if (static_cast<std::int64_t>(data.size()) != numel(shape))
        throw ShapeError("tensor: " + std::to_string(data.size()) + " values do not fill shape " + to_string(shape) +
                         " (" + std::to_string(numel(shape)) + " elements)");
    if constexpr (std::is_same_v<T, bool>) {
        std::vector<std::uint8_t> bytes(data.begin(), data.end());
        return from_host(bytes.data(), shape, DType::boolean, options);
    } else {
        return from_host(data.data(), shape, dtype_of<T>(), options);
    }
}
template Tensor tensor(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor tensor(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor tensor(const std::vector<std::int32_t>&, const Shape&, TensorOptions);
template Tensor tensor(const std::vector<std::int64_t>&, const Shape&, TensorOptions);
template Tensor tensor(const std::vector<std::uint8_t>&, const Shape&, TensorOptions);
template Tensor tensor(const std::vector<bool>&, const Shape&, TensorOptions);

}  // namespace fluxion
