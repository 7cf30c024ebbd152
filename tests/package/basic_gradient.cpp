// The seed's basic example built against the installed package; exits non-zero unless its
// gradient agrees with central finite differences.
#include <fluxion/fluxion.hpp>

#include <cmath>
#include <cstdio>

namespace fx = fluxion;

int main() {
    fx::seed(7);
    fx::TensorOptions f64{.dtype = fx::DType::f64};
    fx::Tensor W = fx::rand({2, 5}, f64) | fx::gpu, b = fx::rand({2}, f64) | fx::gpu;
    fx::Tensor x = fx::rand({5}, f64) | fx::gpu, y = fx::rand({2}, f64) | fx::gpu;
    auto loss = [&](const fx::Tensor& W_, const fx::Tensor& b_) { return fx::sum(fx::square(fx::matmul(W_, x) + b_ - y)); };
    auto [dW, db] = fx::gradient(loss, W, b);
    auto w = (W | fx::cpu).to_vector<double>(), g = (dW | fx::cpu).to_vector<double>();
    double worst = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
        auto at = [&](double d) {
            auto v = w;
            v[i] += d;
            return loss(fx::tensor(v, W.shape()) | W.device(), b).item();
        };
        worst = std::max(worst, std::abs(g[i] - (at(1e-6) - at(-1e-6)) / 2e-6));
    }
    auto bg = (db | fx::cpu).to_vector<double>();
    std::printf("loss %.6f, largest gradient error %.2e, db[0] %.6f\n", loss(W, b).item(), worst, bg[0]);
    return worst < 1e-6 ? 0 : 1;
}
