// fluxion/onnx.hpp — ONNX export: a model's forward (as in test mode) written as an ONNX graph that
// ONNX Runtime, TensorRT and the like run.
//
//   auto m = fx::models::resnet18();
//   fx::onnx::save("resnet18.onnx", m, fx::randn({1, 3, 224, 224}));
//
// The file is an ONNX model at opset 17 (IR version 8), written with ONNX's own protocol-buffer
// definitions (Debian's libonnx-dev) and checked by ONNX's checker before it is written. The graph
// has one input, "input", and one output, "output"; their first axis is a dynamic "batch", so the
// model runs at any batch size whatever the example's. The example input (f32, batched, on any
// device) fixes the other axes; the model runs on it once, and its output fixes the output's shape.
// Every parameter (and BatchNorm's running statistics) is an initialiser named as in fx::state
// ("layer1.0.conv1.weight"); each node is named after its layer's state path ("layer1.0.conv1",
// "layer1.0.add"; at the root, what it is: "maxpool").
//
// The walk is over layers, each written as the ONNX operators that compute it: Chain, std::tuple,
// std::vector and std::optional of layers; Dense (Gemm on {N, F}, MatMul + Add over the last axis
// otherwise), Conv and ConvTranspose (1-d, 2-d and 3-d, values per axis, groups), Upsample of images
// and volumes (a Resize: nearest, bilinear and trilinear with align_corners or half_pixel; by its
// scale or to its size),
// BatchNorm (running statistics), LayerNorm, MaxPool and MeanPool (1-d, 2-d and 3-d), GlobalMeanPool, AdaptiveMeanPool (GlobalAveragePool for an output of 1; else, where each
// input size, known from the example input, is a multiple of the output's, an AveragePool, or
// nothing where they are equal), Flatten, Dropout and AlphaDropout (identities),
// the activations relu, σ, tanh, relu6, leakyrelu, elu, softplus, hardσ, hardswish, swish, gelu_erf (through Erf),
// softmax and logsoftmax (as layers or in a layer's `activation`), MultiHeadAttention (self-attention without
// masks), TransformerEncoderLayer and TransformerEncoder on {N, L, E}, and the zoo's ResNet,
// VGG, MobileNetV2, MobileNetV3, EfficientNet, ConvNeXt, VisionTransformer and UNet (fluxion/models.hpp;
// the U-Net's zero padding of odd-sized skips is fixed by the example input's image size;
// VGG's AdaptiveMeanPool((7, 7)) needs an input whose features' size is a multiple of 7, as 224×224
// gives). An fx::LSTM, saved as the model, is one ONNX LSTM node per layer
// (its weights reordered into ONNX's gate order, as "layers.0.W", "layers.0.R", "layers.0.B") and
// has three outputs, "output" {batch, T, D·H}, "h" and "c" {L·D, batch, H}. Anything else (a
// lambda activation, gelu's tanh approximation, GRU, a layer of your own) throws fx::Error naming it, and no file is
// written.
//
// ONNX import: fx::onnx::load reads any ONNX model into an fx::onnx::Model, a layer like any other.
//
//   auto m = fx::onnx::load("resnet18.onnx");   // PyTorch's torch.onnx.export, fluxion's own, ...
//   fx::Tensor y = m(x);                          // one input, one output; m({x1, x2}) for several
//   auto g = m | fx::gpu;                         // fmap, fx::params, fx::save, fx::train, fx::compile
//
// The graph runs node by node on fluxion's differentiable ops, so gradients come from autodiff and
// the model runs on any device (every output on the device of its inputs, those of host-side
// shape arithmetic included). An operator that decides on the host from values that may change
// between calls of the same shapes (GridSample's taps from a grid that is an input or a parameter,
// integer Div of data) makes fx::compile refuse the model by name, since a replay would repeat the
// first call's decision; such a model runs eagerly. Shape arithmetic (values from constants and
// Shape) compiles. Every floating-point initialiser is a trainable parameter, under
// `initializers.<its ONNX name>` in fx::state (fx::save writes it), but for BatchNormalization's
// running mean and variance, which are state as in fx::BatchNorm: `statistics.<name>`, saved and
// moved, not trained; floating Constant nodes move with the model but are not trained; integer initialisers and constants (shapes, axes, indices)
// stay on the host, where the shape arithmetic of PyTorch's exports (Shape, Gather, Concat, ...)
// runs. Operators of the default domain, at any opset: the elementwise and activation families
// (Add ... Pow, Relu, Sigmoid, Tanh, LeakyRelu, Elu, Selu, Celu, PRelu, Softplus, HardSigmoid,
// HardSwish, Mish, Swish, Gelu, Erf, Clip; Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh,
// Shrink; Floor, Ceil, Round, IsInf, IsNaN), the comparisons, And/Or/Xor/Not, BitShift and the
// Bitwise family (on the host), Where, MatMul, Gemm,
// Conv and ConvTranspose (1-d, 2-d and 3-d, any padding), MaxPool, AveragePool and LpPool (1-d, 2-d
// and 3-d, dilations, ceil_mode, count_include_pad; MaxPool's Indices and integer inputs on the
// host), MaxUnpool, their Global forms, LRN, BatchNormalization (inference, and training_mode with
// its running statistics), InstanceNormalization and LayerNormalization, Dropout (training_mode
// draws its mask from fx::rand), Softmax, LogSoftmax, RNN, GRU and LSTM
// (every direction and layout, initial states, sequence_lens, peepholes, clip; not input_forget),
// Resize and Upsample (nearest, linear and cubic, every coordinate mode, antialias), GridSample (every
// mode and padding, 1-d to 3-d) and AffineGrid, DFT (forward, inverse, one-sided, irfft), STFT and
// the Hann, Hamming and Blackman windows, the Reduce family, ArgMax/ArgMin, and the shape family
// (Flatten, Reshape, Transpose, Concat, Split, Slice, Gather, Squeeze, Unsqueeze, Expand, Tile, Pad
// in every mode, Shape, Size, ConstantOfShape, Range, Cast, CastLike, Constant, Identity, Dropout),
// Mod; NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (every reduction, weights,
// ignore_index, log_prob), CumSum, CumProd, Einsum, and the indexing family (GatherElements,
// GatherND, ScatterElements, Scatter, ScatterND with every reduction, TopK, OneHot, Hardmax, Trilu,
// EyeLike, Compress, ReverseSequence, DepthToSpace, SpaceToDepth, CenterCropPad); RoiAlign, DeformConv,
// Col2Im and MeanVarianceNormalization, and on the host NonMaxSuppression, NonZero, Unique, Det and
// BitCast; and the
// transformer's: Attention (3-d and 4-d, grouped queries, masks, is_causal, windows, softcap, the
// past/present cache, every qk_matmul_output_mode), RMSNormalization, GroupNormalization,
// LpNormalization, RotaryEmbedding, SwiGLU, LinearAttention and CausalConvWithState; control flow:
// If, Loop and Scan (their graphs run as models of their own, reading the enclosing graph's values
// by name; If's condition and Loop's trip count and condition are read on the host, so fx::compile
// refuses a model whose branch or count depends on data); the quantization family (QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv;
// 8- and 16-bit integers, rounding on the host), TensorScatter, MelWeightMatrix; of
// ai.onnx.preview, FlexAttention (its score_mod and prob_mod graphs run as models of their own), and
// of ai.onnx.preview.training, Adagrad, Momentum and Adam.
// ONNX's own backend suite: README.md. An
// operator or attribute it does not implement throws fx::Error naming the operator, the node and
// the opset (at load for operators, at the first run for attributes); a file that is not a
// well-formed ONNX model (corrupt, truncated) throws fx::IOError.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "fluxion/error.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/layers/chain.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {
class Activation;
class Conv;
class ConvTranspose;
class Upsample;
class Dense;
class BatchNorm;
class MaxPool;
class MeanPool;
class GlobalMeanPool;
class AdaptiveMeanPool;
class Flatten;
class Dropout;
class AlphaDropout;
class LayerNorm;
class MultiHeadAttention;
class TransformerEncoderLayer;
class TransformerEncoder;
class LSTM;
struct LSTMOutput;
namespace models {
struct ResidualBlock;
struct ResNet;
struct VGG;
struct InvertedResidual;
struct MobileNetV2;
struct SqueezeExcitation;
struct MBConv;
struct MobileNetV3;
struct EfficientNet;
struct CNBlock;
struct ConvNeXt;
struct EncoderBlock;
struct VisionTransformer;
struct DoubleConv;
struct UNetDown;
struct UNet;
}  // namespace models
}  // namespace fluxion

namespace fluxion::onnx {
namespace detail {

// An ONNX graph being built (src/core/onnx/graph.hpp). Each `layer` below appends the nodes of one
// layer applied to the value named `x`, naming them and their initialisers under `path`, and returns
// the name of the value it computes.
struct Graph;
std::shared_ptr<Graph> new_graph(const Tensor& example_input);
const std::string& input_name(const Graph& g);
struct Output {
    std::string name, value;  // the graph's output `name` is the value `value`
    Tensor example;           // its shape on the example input
    int batch_axis = 0;
};
void write(Graph& g, const std::vector<Output>& outputs, const std::filesystem::path& path);
[[noreturn]] void unsupported(const std::type_info& type, const std::string& path);

std::string layer(Graph& g, const Activation& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const Conv& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const ConvTranspose& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const Upsample& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const Dense& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const BatchNorm& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const MaxPool& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const MeanPool& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const GlobalMeanPool& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const AdaptiveMeanPool& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const Flatten& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const Dropout& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const AlphaDropout& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const LayerNorm& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const MultiHeadAttention& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const TransformerEncoderLayer& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const TransformerEncoder& l, const std::string& x, const std::string& path);
// An LSTM's output, final hidden and cell states ({N, T, D·H}, {L·D, N, H}, {L·D, N, H}).
std::vector<std::string> lstm(Graph& g, const LSTM& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::ResidualBlock& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::ResNet& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::VGG& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::InvertedResidual& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::MobileNetV2& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::SqueezeExcitation& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::MBConv& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::MobileNetV3& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::EfficientNet& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::CNBlock& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::ConvNeXt& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::EncoderBlock& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::VisionTransformer& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::DoubleConv& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::UNetDown& l, const std::string& x, const std::string& path);
std::string layer(Graph& g, const models::UNet& l, const std::string& x, const std::string& path);

std::string join(const std::string& path, const std::string& name);  // "a" + "b" -> "a.b"; "" + "b" -> "b"

template <class... Ls>
std::string layer(Graph& g, const std::tuple<Ls...>& layers, const std::string& x, const std::string& path) {
    std::string y = x;
    std::size_t i = 0;
    std::apply([&](const auto&... l) { ((y = layer(g, l, y, join(path, std::to_string(i++)))), ...); }, layers);
    return y;
}
template <class... Ls> std::string layer(Graph& g, const Chain<Ls...>& c, const std::string& x, const std::string& path) {
    return layer(g, c.layers, x, join(path, "layers"));
}
template <class L> std::string layer(Graph& g, const std::vector<L>& ls, const std::string& x, const std::string& path) {
    std::string y = x;
    for (std::size_t i = 0; i < ls.size(); ++i) y = layer(g, ls[i], y, join(path, std::to_string(i)));
    return y;
}
template <class L> std::string layer(Graph& g, const std::optional<L>& l, const std::string& x, const std::string& path) {
    return l ? layer(g, *l, x, path) : x;
}
// Every other type: no ONNX counterpart is known.
template <class L> std::string layer(Graph&, const L&, const std::string&, const std::string& path) {
    unsupported(typeid(L), path);
}

}  // namespace detail

// Writes `model` applied to inputs like `example_input` ({N, ...}, f32, on any device) to `path` as
// an ONNX model (see above). Throws fx::Error naming the first layer it cannot express, or
// fx::IOError when the file cannot be written.
template <class Model>
void save(const std::filesystem::path& path, const Model& model, const Tensor& example_input) {
    const auto output = model(example_input);
    auto g = detail::new_graph(example_input);
    if constexpr (std::is_same_v<std::decay_t<decltype(output)>, LSTMOutput>) {
        static_assert(std::is_same_v<Model, LSTM>, "fx::onnx::save: of the models giving LSTMOutput, only fx::LSTM exports");
        const auto y = detail::lstm(*g, model, detail::input_name(*g), "");
        detail::write(*g, {{"output", y[0], output.output, 0}, {"h", y[1], output.h, 1}, {"c", y[2], output.c, 1}}, path);
    } else {
        const std::string y = detail::layer(*g, model, detail::input_name(*g), "");
        detail::write(*g, {{"output", y, output, 0}}, path);
    }
}

// ---- import ----
namespace detail {
struct Program;  // the graph, its operators and host constants (src/core/onnx/import.hpp)
}

// An ONNX model read by load(): a layer whose tensors are its initialisers.
class Model {
public:
    std::map<std::string, Tensor> initializers;  // floating-point initialisers: the parameters
    std::map<std::string, Tensor> statistics;    // BatchNormalization's running means and variances: state
    std::map<std::string, Tensor> constants;     // floating-point Constant nodes: moved, not trained

    // The graph on one input, giving its one output (ValueError if it has more of either).
    Tensor operator()(const Tensor& x) const;
    // The graph on its inputs, in the graph's order, giving its outputs in order.
    std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
    const std::vector<std::string>& input_names() const;
    const std::vector<std::string>& output_names() const;

    std::shared_ptr<const detail::Program> program;  // shared by copies and fmap's results
};

// Reads an ONNX model (see above). Throws fx::IOError for a missing, corrupt or truncated file, and
// fx::Error naming the first node whose operator (or domain) fluxion does not implement.
Model load(const std::filesystem::path& path);
// Reads one serialised ONNX TensorProto (the test data of ONNX's backend suite) as a CPU tensor.
Tensor load_tensor(const std::filesystem::path& path);

}  // namespace fluxion::onnx

FLUXION_FUNCTOR(fluxion::onnx::Model, initializers, statistics, constants);
FLUXION_TRAINABLE(fluxion::onnx::Model, initializers);
