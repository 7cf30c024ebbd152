// vgg.cpp — torchvision's VGGs (configurations A and D, with and without BatchNorm) from fluxion's
// layers; state names come from the hand-written functor in models.hpp.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/error.hpp"
#include "fluxion/layers/flatten.hpp"
#include "fluxion/models.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::models {
namespace {

constexpr std::int64_t M = 0;  // a 2×2 max pool in a configuration

// torchvision's cfgs "A" (VGG-11) and "D" (VGG-16): output channels of each 3×3 convolution.
const std::vector<std::int64_t> kVgg11{64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M};
const std::vector<std::int64_t> kVgg16{64, 64, M, 128, 128, M, 256, 256, 256, M, 512, 512, 512, M, 512, 512, 512, M};

VGG vgg(const char* name, const std::vector<std::int64_t>& config, bool batch_norm, const ModelOptions& options) {
    if (options.num_classes < 1)
        throw ValueError(std::string(name) + ": num_classes must be positive (got " +
                         std::to_string(options.num_classes) + ")");
    VGG m{{}, {}, {}, AdaptiveMeanPool({7, 7}), Dense(512 * 7 * 7, 4096, relu), Dense(4096, 4096, relu),
          Dropout(0.5), Dense(4096, options.num_classes)};
    std::int64_t in = 3;
    for (const std::int64_t out : config) {
        if (out == M) {
            m.pool_after.back() = true;
            continue;
        }
        const ConvOptions o{.pad = 1, .init = kaiming_normal};
        m.convs.push_back(batch_norm ? Conv({3, 3}, in, out, o) : Conv({3, 3}, in, out, relu, o));
        if (batch_norm) m.norms.push_back(BatchNorm(out, relu));
        m.pool_after.push_back(false);
        in = out;
    }
    return m;
}

}  // namespace

Tensor VGG::operator()(const Tensor& x) const {
    const MaxPool pool({2, 2});
    Tensor y = x;
    for (std::size_t i = 0; i < convs.size(); ++i) {
        y = convs[i](y);
        if (!norms.empty()) y = norms[i](y);
        if (pool_after[i]) y = pool(y);
    }
    y = Flatten()(avgpool(y));
    return classifier(dropout(fc2(dropout(fc1(y)))));
}

// As Metalhead: the convolutional Chain, then the classifier's.
void VGG::show(detail::Shower& s) const {
    s.open("VGG");
    s.open("Chain");
    for (std::size_t i = 0; i < convs.size(); ++i) {
        s.layer(convs[i]);
        if (!norms.empty()) s.layer(norms[i]);
        if (pool_after[i]) s.layer(MaxPool({2, 2}));
    }
    s.close();
    s.open("Chain");
    s.layer(avgpool);
    s.item("Flatten()");
    s.layer(fc1);
    s.layer(dropout);
    s.layer(fc2);
    s.layer(dropout);
    s.layer(classifier);
    s.close();
    s.close();
}

VGG vgg11(const ModelOptions& o) { return vgg("vgg11", kVgg11, false, o); }
VGG vgg11_bn(const ModelOptions& o) { return vgg("vgg11_bn", kVgg11, true, o); }
VGG vgg16(const ModelOptions& o) { return vgg("vgg16", kVgg16, false, o); }
VGG vgg16_bn(const ModelOptions& o) { return vgg("vgg16_bn", kVgg16, true, o); }

std::vector<std::string> trunk(const VGG&) { return {"features", "classifier.0", "classifier.3"}; }

}  // namespace fluxion::models
