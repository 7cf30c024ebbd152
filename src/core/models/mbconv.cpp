// mbconv.cpp — the blocks that MobileNetV3 and EfficientNet share: torchvision's
// SqueezeExcitation and its inverted residual block with squeeze-excitation.
#include "core/models/conv_bn.hpp"
#include "fluxion/layers/flatten.hpp"
#include "fluxion/models.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::models {

Tensor SqueezeExcitation::operator()(const Tensor& x) const { return x * fc2(fc1(GlobalMeanPool()(x))); }

// As Metalhead's squeeze_excite: SkipConnection(Chain(pool, conv, conv), .*).
void SqueezeExcitation::show(detail::Shower& s) const {
    s.open("SkipConnection");
    s.open("Chain");
    s.item("GlobalMeanPool()");
    s.layer(fc1);
    s.layer(fc2);
    s.close();
    s.item(".*");
    s.close();
}

Tensor MBConv::operator()(const Tensor& x) const {
    Tensor y = expand ? run(*expand, x) : x;
    y = run(depthwise, y);
    if (se) y = (*se)(y);
    y = run(project, y);
    return residual ? y + x : y;
}

void MBConv::show(detail::Shower& s) const {
    if (residual) s.open("SkipConnection");
    s.open("Chain");
    if (expand) models::show(s, *expand);
    models::show(s, depthwise);
    if (se) s.layer(*se);
    models::show(s, project);
    s.close();
    if (residual) s.item("+"), s.close();
}

}  // namespace fluxion::models
