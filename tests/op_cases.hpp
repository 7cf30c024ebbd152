// op_cases.hpp — the one table of op test cases (ggml's test-backend-ops idea). Each entry names
// the op, its input shapes and domain, the fluxion expression, and the same expression in PyTorch.
// test_ops.cpp runs every entry: forward against PyTorch, gradients against finite differences,
// and forward and gradients on every other functional backend against the CPU.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace fx = fluxion;

enum class Domain { any, positive, away_from_zero };

struct OpCase {
    std::string name;
    std::vector<fx::Shape> shapes;
    std::function<fx::Tensor(const std::vector<fx::Tensor>&)> f;
    std::string torch;  // a Python expression over x0, x1, ... (torch as `torch`, functional as `F`)
    Domain domain = Domain::any;
    bool finite_differences = true;  // off where the op rounds (finite differences see steps)
};

inline std::vector<OpCase> op_cases() {
    using T = std::vector<fx::Tensor>;
    using fx::Tensor;
    auto idx = [](std::vector<std::int64_t> v) { return fx::tensor(v); };
    return {
        {"add_broadcast", {{3, 4}, {4}}, [](const T& x) { return x[0] + x[1]; }, "x0 + x1"},
        {"add_outer", {{3, 1}, {1, 4}}, [](const T& x) { return x[0] + x[1]; }, "x0 + x1"},
        {"sub", {{2, 3}, {2, 3}}, [](const T& x) { return x[0] - x[1]; }, "x0 - x1"},
        {"mul_broadcast", {{2, 3, 4}, {3, 1}}, [](const T& x) { return x[0] * x[1]; }, "x0 * x1"},
        {"div", {{3, 4}, {3, 4}}, [](const T& x) { return x[0] / x[1]; }, "x0 / x1", Domain::positive},
        {"scalar_ops", {{5}}, [](const T& x) { return (2.0 * x[0] + 1.0) / 3.0 - 0.5 * x[0]; },
         "(2.0 * x0 + 1.0) / 3.0 - 0.5 * x0"},
        {"scalar_left", {{5}}, [](const T& x) { return 1.0 / x[0] - (3.0 - x[0]); }, "1.0 / x0 - (3.0 - x0)", Domain::positive},
        {"neg", {{4}}, [](const T& x) { return -x[0]; }, "-x0"},
        {"pow", {{3, 4}, {4}}, [](const T& x) { return fx::pow(x[0], x[1]); }, "torch.pow(x0, x1)", Domain::positive},
        {"pow_scalar", {{6}}, [](const T& x) { return fx::pow(x[0], 2.5); }, "torch.pow(x0, 2.5)", Domain::positive},
        {"maximum", {{3, 4}, {4}}, [](const T& x) { return fx::maximum(x[0], x[1]); }, "torch.maximum(x0, x1)"},
        {"minimum", {{3, 4}, {3, 4}}, [](const T& x) { return fx::minimum(x[0], x[1]); }, "torch.minimum(x0, x1)"},
        {"exp", {{7}}, [](const T& x) { return fx::exp(x[0]); }, "torch.exp(x0)"},
        {"log", {{7}}, [](const T& x) { return fx::log(x[0]); }, "torch.log(x0)", Domain::positive},
        {"sqrt", {{7}}, [](const T& x) { return fx::sqrt(x[0]); }, "torch.sqrt(x0)", Domain::positive},
        {"abs", {{7}}, [](const T& x) { return fx::abs(x[0]); }, "torch.abs(x0)", Domain::away_from_zero},
        {"square", {{7}}, [](const T& x) { return fx::square(x[0]); }, "torch.square(x0)"},
        {"sign", {{7}}, [](const T& x) { return fx::sign(x[0]) * x[0]; }, "torch.sign(x0) * x0", Domain::away_from_zero},
        {"sin", {{7}}, [](const T& x) { return fx::sin(x[0]); }, "torch.sin(x0)"},
        {"cos", {{7}}, [](const T& x) { return fx::cos(x[0]); }, "torch.cos(x0)"},
        {"clamp", {{9}}, [](const T& x) { return fx::clamp(x[0], -0.5, 0.7); }, "torch.clamp(x0, -0.5, 0.7)",
         Domain::away_from_zero},
        {"relu", {{9}}, [](const T& x) { return fx::relu(x[0]); }, "torch.relu(x0)", Domain::away_from_zero},
        {"leakyrelu", {{9}}, [](const T& x) { return fx::leakyrelu(x[0], 0.2); }, "F.leaky_relu(x0, 0.2)",
         Domain::away_from_zero},
        {"elu", {{9}}, [](const T& x) { return fx::elu(x[0], 1.5); }, "F.elu(x0, 1.5)", Domain::away_from_zero},
        {"gelu", {{9}}, [](const T& x) { return fx::gelu(x[0]); }, "F.gelu(x0, approximate='tanh')"},
        {"gelu_erf", {{9}}, [](const T& x) { return fx::gelu_erf(x[0]); }, "F.gelu(x0)"},
        {"sigmoid", {{9}}, [](const T& x) { return fx::sigmoid(x[0]); }, "torch.sigmoid(x0)"},
        {"tanh", {{9}}, [](const T& x) { return fx::tanh(x[0]); }, "torch.tanh(x0)"},
        {"softplus", {{9}}, [](const T& x) { return fx::softplus(x[0] * 10.0); }, "F.softplus(x0 * 10.0)"},
        {"swish", {{9}}, [](const T& x) { return fx::swish(x[0]); }, "F.silu(x0)"},
        {"hardswish", {{9}}, [](const T& x) { return fx::hardswish(x[0] * 4.0); }, "F.hardswish(x0 * 4.0)"},
        {"relu6", {{9}}, [](const T& x) { return fx::relu6(x[0] * 4.0); }, "F.relu6(x0 * 4.0)", Domain::away_from_zero},
        {"hardtanh", {{9}}, [](const T& x) { return fx::hardtanh(x[0], -0.5, 0.7); }, "F.hardtanh(x0, -0.5, 0.7)",
         Domain::away_from_zero},
        // F.hardsigmoid's gradient in PyTorch 1.13 is 1/6 rounded to f32 even in f64; its value in clamp's terms.
        {"hardsigmoid", {{9}}, [](const T& x) { return fx::hardsigmoid(x[0] * 4.0); },
         "torch.clamp((x0 * 4.0 + 3.0) / 6.0, 0.0, 1.0)"},
        {"selu", {{9}}, [](const T& x) { return fx::selu(x[0]); }, "F.selu(x0)", Domain::away_from_zero},
        {"celu", {{9}}, [](const T& x) { return fx::celu(x[0], 1.5); }, "F.celu(x0, 1.5)", Domain::away_from_zero},
        {"softsign", {{9}}, [](const T& x) { return fx::softsign(x[0] * 3.0); }, "F.softsign(x0 * 3.0)"},
        {"logsigmoid", {{9}}, [](const T& x) { return fx::logsigmoid(x[0] * 10.0); }, "F.logsigmoid(x0 * 10.0)"},
        {"mish", {{9}}, [](const T& x) { return fx::mish(x[0] * 3.0); }, "F.mish(x0 * 3.0)"},
        {"tanhshrink", {{9}}, [](const T& x) { return fx::tanhshrink(x[0] * 2.0); }, "F.tanhshrink(x0 * 2.0)"},
        {"softshrink", {{9}}, [](const T& x) { return fx::softshrink(x[0], 0.3); }, "F.softshrink(x0, 0.3)"},
        {"trelu", {{9}}, [](const T& x) { return fx::trelu(x[0], 0.2, -0.5); }, "F.threshold(x0, 0.2, -0.5)"},
        {"gelu_sigmoid", {{9}}, [](const T& x) { return fx::gelu_sigmoid(x[0] * 2.0); },
         "F.gelu(x0 * 2.0, approximate='tanh')"},
        {"quick_gelu", {{9}}, [](const T& x) { return fx::quick_gelu(x[0] * 2.0); },
         "x0 * 2.0 * torch.sigmoid(1.702 * x0 * 2.0)"},
        {"logcosh", {{9}}, [](const T& x) { return fx::logcosh(x[0] * 3.0); }, "torch.log(torch.cosh(x0 * 3.0))"},
        {"lisht", {{9}}, [](const T& x) { return fx::lisht(x[0] * 2.0); }, "x0 * 2.0 * torch.tanh(x0 * 2.0)"},
        // Testing: the mean slope (the random slopes of training are test_activations.cpp's).
        {"rrelu_test_mode", {{9}},
         [](const T& x) {
             fx::RReLU layer(0.1, 0.3);
             layer.mode = fx::Mode::test;
             return layer(x[0]);
         },
         "F.rrelu(x0, 0.1, 0.3, training=False)", Domain::away_from_zero},
        {"where", {{3, 4}, {3, 4}, {4}}, [](const T& x) { return fx::where(x[0] > x[1], x[1], x[2]); },
         "torch.where(x0 > x1, x1, x2)"},
        {"sum", {{3, 4}}, [](const T& x) { return fx::sum(x[0]); }, "torch.sum(x0)"},
        {"sum_axis", {{2, 3, 4}}, [](const T& x) { return fx::sum(x[0], 1); }, "torch.sum(x0, 1)"},
        {"sum_keepdims", {{2, 3, 4}}, [](const T& x) { return fx::sum(x[0], -1, true); }, "torch.sum(x0, -1, keepdim=True)"},
        {"mean", {{3, 4}}, [](const T& x) { return fx::mean(x[0]); }, "torch.mean(x0)"},
        {"mean_axis", {{3, 4}}, [](const T& x) { return fx::mean(x[0], 0); }, "torch.mean(x0, 0)"},
        {"max", {{3, 4}}, [](const T& x) { return fx::max(x[0]); }, "torch.max(x0)"},
        {"max_axis", {{3, 4}}, [](const T& x) { return fx::max(x[0], 1); }, "torch.amax(x0, 1)"},
        {"min_axis", {{3, 4}}, [](const T& x) { return fx::min(x[0], 0, true); }, "torch.amin(x0, 0, keepdim=True)"},
        {"logsumexp", {{3, 5}}, [](const T& x) { return fx::logsumexp(x[0] * 30.0, 1); }, "torch.logsumexp(x0 * 30.0, 1)"},
        {"matmul", {{3, 4}, {4, 5}}, [](const T& x) { return fx::matmul(x[0], x[1]); }, "x0 @ x1"},
        {"matmul_vector", {{3, 4}, {4}}, [](const T& x) { return fx::matmul(x[0], x[1]); }, "x0 @ x1"},
        {"matmul_row", {{4}, {4, 2}}, [](const T& x) { return fx::matmul(x[0], x[1]); }, "x0 @ x1"},
        {"matmul_dot", {{4}, {4}}, [](const T& x) { return fx::matmul(x[0], x[1]); }, "x0 @ x1"},
        {"matmul_batched", {{2, 3, 4}, {2, 4, 5}}, [](const T& x) { return fx::matmul(x[0], x[1]); }, "x0 @ x1"},
        {"matmul_broadcast", {{2, 3, 4}, {4, 5}}, [](const T& x) { return fx::matmul(x[0], x[1]); }, "x0 @ x1"},
        {"linear", {{3, 4}, {5, 4}, {5}}, [](const T& x) { return fx::linear(x[0], x[1], x[2]); }, "F.linear(x0, x1, x2)"},
        {"linear_batched", {{2, 3, 4}, {5, 4}, {5}}, [](const T& x) { return fx::linear(x[0], x[1], x[2]); },
         "F.linear(x0, x1, x2)"},
        {"linear_sample", {{4}, {2, 4}, {2}}, [](const T& x) { return fx::linear(x[0], x[1], x[2]); }, "F.linear(x0, x1, x2)"},
        {"linear_transposed_input", {{4, 3}, {5, 4}, {5}},
         [](const T& x) { return fx::linear(x[0].transpose(), x[1], x[2]); }, "F.linear(x0.t(), x1, x2)"},
        {"matmul_transposed", {{4, 3}, {5, 4}}, [](const T& x) { return fx::matmul(x[0].transpose(), x[1].transpose()); },
         "x0.t() @ x1.t()"},
        {"conv2d", {{2, 3, 6, 7}, {4, 3, 3, 3}}, [](const T& x) { return fx::conv2d(x[0], x[1]); }, "F.conv2d(x0, x1)"},
        {"conv2d_stride_pad", {{1, 2, 7, 6}, {3, 2, 3, 2}},
         [](const T& x) { return fx::conv2d(x[0], x[1], {.stride = {2, 1}, .padding = {1, 2}}); },
         "F.conv2d(x0, x1, stride=(2, 1), padding=(1, 2))"},
        {"conv2d_dilation_groups", {{2, 4, 7, 7}, {6, 2, 3, 3}},
         [](const T& x) { return fx::conv2d(x[0], x[1], {.padding = {1, 1}, .dilation = {2, 2}, .groups = 2}); },
         "F.conv2d(x0, x1, padding=1, dilation=2, groups=2)"},
        {"conv_transpose2d", {{2, 3, 4, 5}, {3, 2, 3, 3}},
         [](const T& x) { return fx::conv_transpose2d(x[0], x[1], {.stride = {2, 2}, .padding = {1, 1}}, {1, 0}); },
         "F.conv_transpose2d(x0, x1, stride=2, padding=1, output_padding=(1, 0))"},
        {"maxpool2d", {{2, 3, 6, 6}}, [](const T& x) { return fx::maxpool2d(x[0], {.window = {2, 2}}); },
         "F.max_pool2d(x0, 2)"},
        {"maxpool2d_pad", {{1, 2, 5, 5}}, [](const T& x) { return fx::maxpool2d(x[0], {.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}); },
         "F.max_pool2d(x0, 3, stride=2, padding=1)"},
        {"meanpool2d", {{2, 2, 5, 6}}, [](const T& x) { return fx::meanpool2d(x[0], {.window = {2, 3}, .padding = {1, 1}}); },
         "F.avg_pool2d(x0, (2, 3), padding=1)"},
        {"softmax", {{3, 5}}, [](const T& x) { return fx::softmax(x[0]); }, "torch.softmax(x0, -1)"},
        {"softmax_axis0", {{3, 4, 2}}, [](const T& x) { return fx::softmax(x[0], 1); }, "torch.softmax(x0, 1)"},
        {"logsoftmax", {{3, 5}}, [](const T& x) { return fx::logsoftmax(x[0] * 50.0); }, "torch.log_softmax(x0 * 50.0, -1)"},
        {"attention_blocks", {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}},
         [](const T& x) { return fx::scaled_dot_product_attention(x[0], x[1], x[2], {.block = 2}); },
         "torch.softmax(x0 @ x1.transpose(-2, -1) / 2.0, -1) @ x2"},
        {"attention_masked", {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}},
         [](const T& x) {
             const auto rows = fx::arange(3, {.dtype = fx::DType::i64, .device = x[0].device()}).reshape({3, 1});
             const auto cols = fx::arange(5, {.dtype = fx::DType::i64, .device = x[0].device()}).reshape({1, 5});
             return fx::scaled_dot_product_attention(x[0], x[1], x[2], {.mask = cols > rows, .scale = 0.3, .block = 1});
         },
         "torch.softmax((x0 @ x1.transpose(-2, -1) * 0.3).masked_fill(torch.ones(3, 5, dtype=torch.bool).triu(1), "
         "float('-inf')), -1) @ x2"},
        {"concat", {{2, 3}, {4, 3}}, [](const T& x) { return fx::concat({x[0], x[1]}, 0); }, "torch.cat([x0, x1], 0)"},
        {"concat_axis1", {{2, 3}, {2, 1}}, [](const T& x) { return fx::concat({x[0], x[1]}, 1); }, "torch.cat([x0, x1], 1)"},
        {"stack", {{2, 3}, {2, 3}}, [](const T& x) { return fx::stack({x[0], x[1]}, 1); }, "torch.stack([x0, x1], 1)"},
        {"index_select", {{5, 3}}, [idx](const T& x) { return fx::index_select(x[0], 0, idx({4, 0, 4, 2}).to(x[0].device())); },
         "torch.index_select(x0, 0, torch.tensor([4, 0, 4, 2]))"},
        {"index_select_axis1", {{2, 5, 3}}, [idx](const T& x) { return fx::index_select(x[0], 1, idx({1, 1, 3}).to(x[0].device())); },
         "torch.index_select(x0, 1, torch.tensor([1, 1, 3]))"},
        {"gather_rows", {{6, 2}}, [](const T& x) { return fx::gather(x[0], fx::tensor<std::int64_t>({5, 1, 1, 0, 2, 3}, {2, 3}).to(x[0].device())); },
         "x0[torch.tensor([[5, 1, 1], [0, 2, 3]])]"},
        {"reshape", {{2, 6}}, [](const T& x) { return x[0].reshape({3, -1}) * 2.0; }, "x0.reshape(3, -1) * 2.0"},
        {"permute", {{2, 3, 4}}, [](const T& x) { return x[0].permute({2, 0, 1}) * 1.5; }, "x0.permute(2, 0, 1) * 1.5"},
        {"transpose_contiguous", {{3, 4}}, [](const T& x) { return x[0].transpose().contiguous(); }, "x0.t().contiguous()"},
        {"slice_step", {{7, 3}}, [](const T& x) { return x[0].slice(0, 1, 6, 2) * 3.0; }, "x0[1:6:2] * 3.0"},
        {"select", {{4, 3}}, [](const T& x) { return x[0].select(1, -1) + 0.0; }, "x0[:, -1] + 0.0"},
        {"unsqueeze_expand", {{3}}, [](const T& x) { return x[0].unsqueeze(0).expand({4, 3}) * 1.0; },
         "x0.unsqueeze(0).expand(4, 3) * 1.0"},
        {"flatten", {{2, 3, 4}}, [](const T& x) { return x[0].flatten(1) * 1.0; }, "x0.flatten(1) * 1.0"},
        {"cast_roundtrip", {{5}}, [](const T& x) { return fx::cast(fx::cast(x[0], fx::DType::f32), fx::DType::f64) * 1.0; },
         "x0.float().double() * 1.0", Domain::any, false},
        {"chain", {{4, 3}, {3, 2}, {2}}, [](const T& x) { return fx::softmax(fx::tanh(fx::matmul(x[0], x[1]) + x[2])); },
         "torch.softmax(torch.tanh(x0 @ x1 + x2), -1)"},
    };
}
