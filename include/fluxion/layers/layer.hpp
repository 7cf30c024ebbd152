// fluxion/layers/layer.hpp — the vocabulary every layer shares: sizes of windows and strides, the
// train/test mode of layers that behave differently while training, and the declaration of layers
// that hold no tensors.
//
// Layout rule for all layers (docs/ARCHITECTURE.md, "Conventions"): a sample is a vector {F} or an
// image {C, H, W}; a batch adds a leading N ({N, F} or {N, C, H, W}). Every layer accepts one
// sample or a batch.
#pragma once
#include <cstdint>
#include <vector>

#include "fluxion/functor.hpp"

namespace fluxion {

// Two sizes (height, width): `2` means {2, 2}; `{2, 3}` gives each.
struct Size2 {
    std::int64_t h = 1, w = 1;
    Size2(std::int64_t n = 1) : h(n), w(n) {}  // NOLINT: implicit so that `.stride = 2` reads naturally
    Size2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
    friend bool operator==(const Size2&, const Size2&) = default;
};

// A stride, dilation or output padding of a convolution or pooling: one value for every spatial
// axis (`2`) or one per axis in the input's order: `{h, w}` for images, `{d, h, w}` for volumes,
// `{l}` for sequences. Flux's `stride=(1, 2, 2)`, PyTorch's `stride=(1, 2, 2)` are `{1, 2, 2}`.
// `{}` gives none, which a pooling's stride reads as "the window".
class Sizes {
public:
    Sizes() = default;
    Sizes(std::int64_t n) : values_{n} {}  // NOLINT: implicit so that `.stride = 2` reads naturally
    Sizes(std::int64_t h, std::int64_t w) : values_{h, w} {}
    Sizes(std::int64_t d, std::int64_t h, std::int64_t w) : values_{d, h, w} {}
    Sizes(Size2 s) : Sizes(s.h, s.w) {}  // NOLINT: a 2-d size is one per axis of an image
    const std::vector<std::int64_t>& values() const { return values_; }  // as given: none, 1, 2 or 3

private:
    std::vector<std::int64_t> values_;
};

// How Dropout and BatchNorm behave. `automatic` (the default, as Flux) trains inside a gradient
// computation (fx::gradient, fx::withgradient, fx::train) and tests everywhere else; trainmode() and
// testmode() fix it.
enum class Mode { automatic, train, test };

// Whether a layer in `mode` behaves as in training right now.
bool training(Mode mode);

}  // namespace fluxion

// FLUXION_FUNCTOR_NO_FIELDS(Type): declares a type that holds no tensors (a layer without
// parameters, such as MaxPool) so that fmap, gpu, state and the optimisers pass over it.
#define FLUXION_FUNCTOR_NO_FIELDS(Type)                                \
    template <>                                                        \
    struct fluxion::functor<Type> {                                    \
        static constexpr bool declared = true;                         \
        template <class X, class F> static void visit(X&, F&&) {}      \
    }
