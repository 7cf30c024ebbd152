// recurrent.cpp — fx::LSTM as ONNX LSTM nodes, one per layer, on batch-first {N, T, F} inputs:
// ONNX's LSTM runs time-major (ONNX Runtime takes no batch-major layout), so the input is
// transposed on the way in and each output on the way out. Its gates are ordered i, o, f, c where
// PyTorch's (and fluxion's) are i, f, g, o: the initialisers hold the weights in ONNX's order.
#include "core/onnx/graph.hpp"
#include "fluxion/layers/recurrent.hpp"

namespace fluxion::onnx::detail {
namespace {

using I = std::int64_t;

// The rows of `t` {4H, ...} in ONNX's gate order, appended to `out`.
void append_gates(const Tensor& t, std::vector<float>& out) {
    const std::vector<float> v = t.to_vector<float>();
    const std::size_t block = v.size() / 4;
    for (int gate : {0, 3, 1, 2}) out.insert(out.end(), v.begin() + gate * block, v.begin() + (gate + 1) * block);
}

}  // namespace

std::vector<std::string> lstm(Graph& g, const LSTM& l, const std::string& x, const std::string& path) {
    if (g.rank(x) != 3)
        throw ShapeError("fx::onnx::save: " + l.describe() + " is given a batch of rank " + std::to_string(g.rank(x)) +
                         "; it exports on {N, T, F}");
    if (l.weight_ih(0).dtype() != DType::f32)
        throw DTypeError("fx::onnx::save: " + l.describe() + " is " + std::string(fluxion::name(l.weight_ih(0).dtype())) +
                         "; the export writes f32 models");
    const I hidden = l.hidden_size(), dirs = l.bidirectional() ? 2 : 1;
    std::string seq = g.node("Transpose", {x}, join(path, "time_major"), 3,
                             [](auto& n) { attribute(n, "perm", std::vector<I>{1, 0, 2}); });
    std::vector<std::string> hs, cs;
    for (I layer = 0; layer < l.layers(); ++layer) {
        const std::string at = join(join(path, "layers"), std::to_string(layer));
        const I in = l.weight_ih(layer).shape(1);
        std::vector<float> w, r, b;
        for (I d = 0; d < dirs; ++d) {
            append_gates(l.weight_ih(layer, d == 1), w);
            append_gates(l.weight_hh(layer, d == 1), r);
            if (l.bias_ih(layer, d == 1).defined()) {
                append_gates(l.bias_ih(layer, d == 1), b);
                append_gates(l.bias_hh(layer, d == 1), b);
            }
        }
        std::vector<std::string> inputs{seq, g.initializer(w, {dirs, 4 * hidden, in}, join(at, "W")),
                                        g.initializer(r, {dirs, 4 * hidden, hidden}, join(at, "R"))};
        if (!b.empty()) inputs.push_back(g.initializer(b, {dirs, 8 * hidden}, join(at, "B")));
        const auto y = g.nodes("LSTM", inputs, at, {{"", 4}, {".h", 3}, {".c", 3}}, [&](auto& n) {
            attribute(n, "hidden_size", hidden);
            attribute(n, "direction", std::string(dirs == 2 ? "bidirectional" : "forward"));
        });
        hs.push_back(y[1]);
        cs.push_back(y[2]);
        // {T, D, N, H} -> {T, N, D·H}, the next layer's input
        seq = g.node("Transpose", {y[0]}, join(at, "directions_last"), 4,
                     [](auto& n) { attribute(n, "perm", std::vector<I>{0, 2, 1, 3}); });
        seq = g.node("Reshape", {seq, g.initializer_i64({0, 0, -1}, {3}, join(at, "join_directions"))},
                     join(at, "output"), 3);
    }
    const std::string out = g.node("Transpose", {seq}, join(path, "batch_major"), 3,
                                   [](auto& n) { attribute(n, "perm", std::vector<I>{1, 0, 2}); });
    auto stack = [&](const std::vector<std::string>& v, const char* name) {
        return v.size() == 1 ? v[0] : g.node("Concat", v, join(path, name), 3, [](auto& n) { attribute(n, "axis", I{0}); });
    };
    return {out, stack(hs, "final_h"), stack(cs, "final_c")};
}

}  // namespace fluxion::onnx::detail
