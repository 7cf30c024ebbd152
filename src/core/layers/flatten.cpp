// flatten.cpp — Flatten: a reshape that keeps the batch axis of image batches.
#include "fluxion/layers/flatten.hpp"

namespace fluxion {

Tensor Flatten::operator()(const Tensor& x) const {
    if (!x.defined()) throw ValueError("Flatten(): the input is an empty tensor");
    switch (x.ndim()) {
        case 1:
        case 2: return x;
        case 3: return x.reshape({-1});
        case 4: return x.reshape({x.shape(0), -1});
        default:
            throw ShapeError("Flatten(): input has shape " + to_string(x.shape()) +
                             "; expected an image {C, H, W}, a batch {N, C, H, W}, or vectors {F} / {N, F}");
    }
}

}  // namespace fluxion
