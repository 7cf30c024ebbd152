// The seed's basic example (docs/ARCHITECTURE.md, "Autodiff"): any tensor code differentiates, on
// any device.
#include <fluxion/fluxion.hpp>
#include <iostream>

namespace fx = fluxion;

int main() {
    fx::seed(0);
    fx::Tensor W = fx::rand({2, 5}) | fx::gpu;  // on the GPU if one is usable
    fx::Tensor b = fx::rand({2}) | fx::gpu;
    auto predict = [&](const fx::Tensor& x) { return fx::matmul(W, x) + b; };
    auto loss = [&](const fx::Tensor& x, const fx::Tensor& y) { return fx::sum(fx::square(predict(x) - y)); };

    fx::Tensor x = fx::rand({5}) | fx::gpu, y = fx::rand({2}) | fx::gpu;
    std::cout << "device: " << W.device().str() << "\n";
    std::cout << "loss(x, y) = " << loss(x, y).item() << "\n";

    auto [dW, db] = fx::gradient(
        [&](const fx::Tensor& W_, const fx::Tensor& b_) { return fx::sum(fx::square(fx::matmul(W_, x) + b_ - y)); }, W, b);
    std::cout << (dW | fx::cpu) << "\n" << (db | fx::cpu) << "\n";

    // One step of gradient descent lowers the loss.
    W = W - 0.1 * dW;
    b = b - 0.1 * db;
    std::cout << "after one step: " << loss(x, y).item() << "\n";
}
