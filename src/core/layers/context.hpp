// context.hpp — errors raised by the ops inside a layer, re-raised with the layer's name in front
// ("Dense(10 => 5): matmul: arguments on CUDA:0 and CPU; ..."), keeping their type.
#pragma once
#include <string>
#include <utility>

#include "fluxion/error.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion::detail {

template <class L, class F> Tensor in_context(const L& layer, F&& f) {
    try {
        return std::forward<F>(f)();
    } catch (const ShapeError& e) {
        throw ShapeError(layer.describe() + ": " + e.what());
    } catch (const DTypeError& e) {
        throw DTypeError(layer.describe() + ": " + e.what());
    } catch (const DeviceError& e) {
        throw DeviceError(layer.describe() + ": " + e.what());
    } catch (const ValueError& e) {
        throw ValueError(layer.describe() + ": " + e.what());
    }
}

// The shape of one sample or a batch of them, for messages: "{10} or {N, 10}".
inline std::string sample_or_batch(const Shape& sample) {
    std::string b = "{N";
    for (auto d : sample) b += ", " + std::to_string(d);
    return to_string(sample) + " or " + b + "}";
}

}  // namespace fluxion::detail
