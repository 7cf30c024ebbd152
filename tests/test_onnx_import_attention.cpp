// test_onnx_import_attention.cpp — ONNX's Attention, its norms, the transformer's other parts and
// linear attention's stateful operators imported by fx::onnx::load: gradients through the imported
// graph against finite differences, the same graphs on every other device as on the CPU, and refused
// attributes named with their node. (Their forward values are checked against ONNX's reference by
// ONNX's node suite, test_onnx_backend.)
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "onnx_graph_writer.hpp"
#include "other_devices.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using io_test::ScratchDir;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

struct Attribute {
    std::string name;
    std::variant<std::int64_t, float, std::string> value;
};

// A graph of one node `op`: its inputs are the graph's, but for those given as boolean constants
// (name -> values and shape); "" skips an optional input.
struct OneNode {
    std::string op;
    std::int64_t opset = 23;
    std::vector<std::string> inputs;
    std::vector<std::string> outputs = {"Y"};
    std::vector<Attribute> attributes = {};
    std::vector<std::tuple<std::string, std::vector<bool>, fx::Shape>> boolean_constants = {};
    std::string domain = "";
    std::vector<std::pair<std::string, ::onnx::GraphProto>> graphs = {};  // graph attributes
};

// FlexAttention's score_mod as softcap: (scores / cap) tanh · cap, cap an initialiser of the graph.
::onnx::GraphProto softcap_graph(float cap) {
    ::onnx::GraphProto g;
    g.set_name("softcap");
    g.add_input()->set_name("scores");
    g.add_output()->set_name("capped");
    auto* c = g.add_initializer();
    c->set_name("cap");
    c->set_data_type(::onnx::TensorProto::FLOAT);
    c->add_float_data(cap);
    auto node = [&](const char* op, std::vector<std::string> in, const char* out) {
        auto* n = g.add_node();
        n->set_op_type(op);
        for (const auto& x : in) n->add_input(x);
        n->add_output(out);
    };
    node("Div", {"scores", "cap"}, "scaled");
    node("Tanh", {"scaled"}, "bounded");
    node("Mul", {"bounded", "cap"}, "capped");
    return g;
}

void write(const std::filesystem::path& path, const OneNode& spec) {
    fx_test::GraphWriter g(spec.opset, 10);
    if (!spec.domain.empty()) g.domain(spec.domain);
    for (const auto& [name, values, shape] : spec.boolean_constants) g.initializer_bool(name, values, shape);
    std::set<std::string> declared;  // a constant, or an input already declared
    for (const auto& c : spec.boolean_constants) declared.insert(std::get<0>(c));
    for (const auto& x : spec.inputs)
        if (!x.empty() && declared.insert(x).second) g.input(x);
    auto& n = g.node(spec.op, spec.inputs, spec.outputs, spec.domain);
    n.set_name("the_node");
    for (const auto& [name, graph] : spec.graphs) fx_test::set(n, name, graph);
    for (const auto& a : spec.attributes) std::visit([&](const auto& v) { fx_test::set(n, a.name, v); }, a.value);
    for (const auto& y : spec.outputs)
        if (!y.empty()) g.output(y);
    g.write(path);
}

fx::onnx::Model load(const OneNode& spec) {
    ScratchDir dir;
    write(dir / "m.onnx", spec);
    return fx::onnx::load(dir / "m.onnx");
}

using fx_test::message_of;

using fx_test::weighted_sum;

double largest_difference(const fx::Tensor& a, const fx::Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    const auto x = a.to_vector<double>(), y = b.to_vector<double>();
    double worst = 0;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
    return worst;
}

}  // namespace

// 4-d grouped queries (4 query heads over 2 key and value heads) with a past cache, a float mask
// shorter than the keys (padded with -inf), is_causal, softcap and scale: the gradients of Y, the
// present cache and the scores after softcap, in Q, K, V, the mask and the past.
TEST(OnnxImportAttention, GradientsThroughGroupedCausalCachedAttentionMatchFiniteDifferences) {
    const fx::onnx::Model m = load({.op = "Attention",
                                    .inputs = {"Q", "K", "V", "mask", "past_key", "past_value"},
                                    .outputs = {"Y", "present_key", "present_value", "qk"},
                                    .attributes = {{"is_causal", std::int64_t{1}},
                                                   {"softcap", 2.5f},
                                                   {"scale", 0.4f},
                                                   {"qk_matmul_output_mode", std::int64_t{1}}}});
    fx::seed(3);
    const fx::Tensor q = fx::randn({1, 4, 3, 2}), k = fx::randn({1, 2, 3, 2}), v = fx::randn({1, 2, 3, 3});
    const fx::Tensor mask = fx::randn({3, 4}), past_key = fx::randn({1, 2, 2, 2}), past_value = fx::randn({1, 2, 2, 3});
    const auto ys = m({q, k, v, mask, past_key, past_value});
    ASSERT_EQ(ys.size(), 4u);
    EXPECT_EQ(ys[0].shape(), (fx::Shape{1, 4, 3, 3}));
    EXPECT_EQ(ys[1].shape(), (fx::Shape{1, 2, 5, 2}));
    EXPECT_EQ(ys[3].shape(), (fx::Shape{1, 4, 3, 5}));
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c, const fx::Tensor& d, const fx::Tensor& e,
            const fx::Tensor& f) {
            return weighted_sum(m({a, b, c, d, e, f}));
        },
        q, k, v, mask, past_key, past_value));
}

// Without a mask, softcap or scores output the node runs fx::scaled_dot_product_attention: 3-d
// grouped queries, is_causal after a past cache, a left window and a scale, in Q, K, V and the past.
TEST(OnnxImportAttention, GradientsThroughTheMemoryEfficientPathMatchFiniteDifferences) {
    const fx::onnx::Model m = load({.op = "Attention",
                                    .opset = 25,
                                    .inputs = {"Q", "K", "V", "", "past_key", "past_value"},
                                    .outputs = {"Y", "present_key", "present_value"},
                                    .attributes = {{"q_num_heads", std::int64_t{4}},
                                                   {"kv_num_heads", std::int64_t{2}},
                                                   {"is_causal", std::int64_t{1}},
                                                   {"left_window_size", std::int64_t{2}},
                                                   {"scale", 0.3f}}});
    fx::seed(9);
    const fx::Tensor q = fx::randn({2, 3, 8}), k = fx::randn({2, 3, 4}), v = fx::randn({2, 3, 6});
    const fx::Tensor past_key = fx::randn({2, 2, 2, 2}), past_value = fx::randn({2, 2, 2, 3});
    EXPECT_EQ(m({q, k, v, past_key, past_value})[0].shape(), (fx::Shape{2, 3, 12}));
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c, const fx::Tensor& d, const fx::Tensor& e) {
            return weighted_sum(m({a, b, c, d, e}));
        },
        q, k, v, past_key, past_value));
}

// ai.onnx.preview's FlexAttention with a score_mod graph (a softcap), grouped queries and a scale: the
// modifier runs on fluxion's ops, so the gradients in Q, K and V go through it.
TEST(OnnxImportAttention, FlexAttentionGradientsThroughItsScoreModMatchFiniteDifferences) {
    const fx::onnx::Model m = load({.op = "FlexAttention",
                                    .opset = 26,
                                    .inputs = {"Q", "K", "V"},
                                    .attributes = {{"scale", 0.5f}},
                                    .domain = "ai.onnx.preview",
                                    .graphs = {{"score_mod", softcap_graph(1.5f)}}});
    fx::seed(10);
    const fx::Tensor q = fx::randn({1, 4, 3, 2}), k = fx::randn({1, 2, 5, 2}), v = fx::randn({1, 2, 5, 3});
    const fx::Tensor y = m({q, k, v})[0];
    EXPECT_EQ(y.shape(), (fx::Shape{1, 4, 3, 3}));
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c) {
            return weighted_sum(m({a, b, c}));
        },
        q, k, v));
}

// 3-d inputs split into heads, a boolean mask that leaves the second query no key: its output row is
// zero and every gradient finite and right (no NaN from the empty row).
TEST(OnnxImportAttention, AQueryWithNoKeyGivesZerosAndFiniteGradients) {
    const fx::onnx::Model m = load({.op = "Attention",
                                    .inputs = {"Q", "K", "V", "mask"},
                                    .attributes = {{"q_num_heads", std::int64_t{2}}, {"kv_num_heads", std::int64_t{2}}},
                                    .boolean_constants = {{"mask", {true, false, true, false, false, false}, {2, 3}}}});
    fx::seed(4);
    const fx::Tensor q = fx::randn({2, 2, 4}), k = fx::randn({2, 3, 4}), v = fx::randn({2, 3, 6});
    const fx::Tensor y = m({q, k, v})[0];
    ASSERT_EQ(y.shape(), (fx::Shape{2, 2, 6}));
    for (const double value : y.slice(1, 1, 2).to_vector<double>()) EXPECT_EQ(value, 0);
    for (const double value : y.slice(1, 0, 1).to_vector<double>()) EXPECT_NE(value, 0);
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c) {
            return weighted_sum(m({a, b, c}));
        },
        q, k, v));
}

// Each operator of this family on every other device (Vulkan on lavapipe here) as on the CPU.
TEST(OnnxImportAttention, RunsOnEveryOtherDeviceAsOnTheCpu) {
    fx::seed(5);
    const std::vector<std::pair<OneNode, std::vector<fx::Tensor>>> cases = {
        {{.op = "Attention",
          .inputs = {"Q", "K", "V", "mask"},
          .outputs = {"Y", "", "", "qk"},
          .attributes = {{"is_causal", std::int64_t{1}}, {"qk_matmul_output_mode", std::int64_t{3}}},
          .boolean_constants = {{"mask", {true, true, false, true}, {4}}}},
         {fx::randn({2, 4, 3, 8}), fx::randn({2, 2, 4, 8}), fx::randn({2, 2, 4, 8})}},
        {{.op = "Attention",
          .inputs = {"Q", "K", "V", "", "past_key", "past_value"},
          .outputs = {"Y", "present_key", "present_value"},
          .attributes = {{"is_causal", std::int64_t{1}}}},
         {fx::randn({1, 4, 3, 4}), fx::randn({1, 2, 3, 4}), fx::randn({1, 2, 3, 4}), fx::randn({1, 2, 2, 4}),
          fx::randn({1, 2, 2, 4})}},
        {{.op = "Attention", .inputs = {"Q", "K", "V", "mask"}, .attributes = {{"softcap", 2.f}}},
         {fx::randn({1, 2, 3, 4}), fx::randn({1, 2, 5, 4}), fx::randn({1, 2, 5, 4}), fx::randn({3, 4})}},
        {{.op = "FlexAttention",
          .opset = 26,
          .inputs = {"Q", "K", "V"},
          .domain = "ai.onnx.preview",
          .graphs = {{"score_mod", softcap_graph(2.f)}}},
         {fx::randn({1, 2, 3, 4}), fx::randn({1, 1, 5, 4}), fx::randn({1, 1, 5, 4})}},
        {{.op = "Mod", .inputs = {"A", "B"}}, {fx::randn({2, 3}) * 5.0, fx::full({3}, 1.5)}},
        {{.op = "RMSNormalization", .inputs = {"X", "W"}}, {fx::randn({2, 3, 4}), fx::randn({4})}},
        {{.op = "GroupNormalization",
          .opset = 21,
          .inputs = {"X", "scale", "bias"},
          .attributes = {{"num_groups", std::int64_t{2}}}},
         {fx::randn({2, 4, 3}), fx::randn({4}), fx::randn({4})}},
        {{.op = "LpNormalization", .opset = 22, .inputs = {"X"}}, {fx::randn({3, 4})}},
        {{.op = "RotaryEmbedding", .inputs = {"X", "cos", "sin"}},
         {fx::randn({2, 2, 3, 4}), fx::randn({2, 3, 2}), fx::randn({2, 3, 2})}},
        {{.op = "SwiGLU", .opset = 28, .inputs = {"A", "B"}}, {fx::randn({2, 5}), fx::randn({2, 5})}},
        {{.op = "LinearAttention",
          .opset = 27,
          .inputs = {"query", "key", "value", "past_state", "decay", "beta"},
          .outputs = {"Y", "present_state"},
          .attributes = {{"q_num_heads", std::int64_t{2}}, {"kv_num_heads", std::int64_t{1}}}},
         {fx::randn({1, 3, 4}), fx::randn({1, 3, 2}), fx::randn({1, 3, 3}), fx::randn({1, 1, 2, 3}),
          -fx::rand({1, 3, 1}), fx::rand({1, 3, 1})}},
        {{.op = "CausalConvWithState", .opset = 27, .inputs = {"input", "weight"}, .outputs = {"Y", "present_state"}},
         {fx::randn({2, 3, 5}), fx::randn({3, 1, 3})}},
    };
    // The half-precision paths too (the op-by-op softmax, the f32 recurrence): f16 on the devices
    // that take it.
    std::vector<std::pair<OneNode, std::vector<fx::Tensor>>> halves;
    for (const char* op : {"Attention", "RMSNormalization", "SwiGLU", "LinearAttention", "CausalConvWithState"})
        for (const auto& [spec, inputs] : cases)
            if (spec.op == op) {  // the first graph of each
                std::vector<fx::Tensor> f16;
                for (const auto& x : inputs) f16.push_back(fx::cast(x, fx::DType::f16));
                halves.push_back({spec, f16});
                break;
            }
    ASSERT_EQ(halves.size(), 5u);
    const auto run = [](const OneNode& spec, const std::vector<fx::Tensor>& inputs,
                        const std::vector<fx::Device>& devices, double tolerance) {
        SCOPED_TRACE(spec.op + " on " + fx::name(inputs[0].dtype()));
        const fx::onnx::Model m = load(spec);
        const auto want = m(inputs);
        for (const auto& d : devices) {
            SCOPED_TRACE(d.str());
            std::vector<fx::Tensor> on_device;
            for (const auto& x : inputs) on_device.push_back(x.to(d));
            const auto got = m(on_device);
            ASSERT_EQ(got.size(), want.size());
            for (std::size_t i = 0; i < want.size(); ++i) {
                EXPECT_EQ(got[i].device(), d);
                EXPECT_LE(largest_difference(got[i].to(fx::Device{}), want[i]), tolerance) << "output " << i;
            }
        }
    };
    for (const auto& [spec, inputs] : cases) run(spec, inputs, fx::testing::other_devices(), 1e-5);
    for (const auto& [spec, inputs] : halves) run(spec, inputs, fx::testing::other_devices(fx::DType::f16), 1e-2);
}

// stash_type 11: the statistics in f64, as the check's values (the default, 1, computes them in f32).
TEST(OnnxImportAttention, NormalizationGradientsMatchFiniteDifferences) {
    fx::seed(6);
    const fx::onnx::Model rms = load({.op = "RMSNormalization",
                                      .inputs = {"X", "W"},
                                      .attributes = {{"axis", std::int64_t{1}}, {"stash_type", std::int64_t{11}}}});
    const fx::Tensor x = fx::randn({2, 3, 4}), w = fx::randn({3, 4});
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b) {
            return weighted_sum(rms({a, b}));
        },
        x, w));

    const fx::onnx::Model group =
        load({.op = "GroupNormalization",
              .opset = 21,
              .inputs = {"X", "scale", "bias"},
              .attributes = {{"num_groups", std::int64_t{2}}, {"epsilon", 0.01f}, {"stash_type", std::int64_t{11}}}});
    const fx::Tensor image = fx::randn({2, 4, 3, 2}), scale = fx::randn({4}), bias = fx::randn({4});
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c) {
            return weighted_sum(group({a, b, c}));
        },
        image, scale, bias));

    const fx::onnx::Model lp =
        load({.op = "LpNormalization", .opset = 22, .inputs = {"X"}, .attributes = {{"p", std::int64_t{1}}}});
    EXPECT_TRUE(fx::testing::gradcheck([&](const fx::Tensor& a) { return weighted_sum({lp(a)}); }, fx::randn({3, 4})));
}

TEST(OnnxImportAttention, RotaryEmbeddingAndSwiGluGradientsMatchFiniteDifferences) {
    fx::seed(7);
    // Interleaved pairs over the first 4 of 6 features, the caches given per token.
    const fx::onnx::Model rotary = load({.op = "RotaryEmbedding",
                                         .inputs = {"X", "cos", "sin"},
                                         .attributes = {{"interleaved", std::int64_t{1}},
                                                        {"rotary_embedding_dim", std::int64_t{4}},
                                                        {"num_heads", std::int64_t{2}}}});
    const fx::Tensor x = fx::randn({2, 3, 12}), cos = fx::randn({2, 3, 2}), sin = fx::randn({2, 3, 2});
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c) {
            return weighted_sum(rotary({a, b, c}));
        },
        x, cos, sin));

    const fx::onnx::Model swiglu =
        load({.op = "SwiGLU", .opset = 28, .inputs = {"A", "B"}, .attributes = {{"alpha", 0.5f}}});
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b) {
            return weighted_sum(swiglu({a, b}));
        },
        fx::randn({2, 5}), fx::randn({2, 5})));
}

// Gated DeltaNet's two stateful operators: gated_delta over grouped queries (4 query heads reading 2
// key heads), a decay and beta per head and a past state; the SiLU causal convolution with a bias and
// a carried state. The gradients of the outputs and the new states, in every input.
TEST(OnnxImportAttention, LinearAttentionAndCausalConvGradientsMatchFiniteDifferences) {
    fx::seed(8);
    const fx::onnx::Model linear =
        load({.op = "LinearAttention",
              .opset = 27,
              .inputs = {"query", "key", "value", "past_state", "decay", "beta"},
              .outputs = {"Y", "present_state"},
              .attributes = {{"q_num_heads", std::int64_t{4}}, {"kv_num_heads", std::int64_t{2}}}});
    const fx::Tensor q = fx::randn({1, 3, 8}), k = fx::randn({1, 3, 4}), v = fx::randn({1, 3, 6});
    const fx::Tensor past = fx::randn({1, 2, 2, 3}), decay = -fx::rand({1, 3, 2}), beta = fx::rand({1, 3, 2});
    const auto ys = linear({q, k, v, past, decay, beta});
    EXPECT_EQ(ys[0].shape(), (fx::Shape{1, 3, 12}));
    EXPECT_EQ(ys[1].shape(), (fx::Shape{1, 2, 2, 3}));
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c, const fx::Tensor& d, const fx::Tensor& e,
            const fx::Tensor& f) {
            return weighted_sum(linear({a, b, c, d, e, f}));
        },
        q, k, v, past, decay, beta));

    const fx::onnx::Model conv = load({.op = "CausalConvWithState",
                                       .opset = 27,
                                       .inputs = {"input", "weight", "bias", "past_state"},
                                       .outputs = {"Y", "present_state"},
                                       .attributes = {{"activation", std::string("silu")}}});
    const fx::Tensor x = fx::randn({2, 3, 4}), w = fx::randn({3, 1, 3}), bias = fx::randn({3}),
                     state = fx::randn({2, 3, 2});
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c, const fx::Tensor& d) {
            return weighted_sum(conv({a, b, c, d}));
        },
        x, w, bias, state));
}

TEST(OnnxImportAttention, RefusedAttributesAreNamedWithTheirNode) {
    const fx::Tensor q = fx::randn({1, 1, 2, 4});
    const fx::onnx::Model mode = load({.op = "Attention",
                                       .inputs = {"Q", "K", "V"},
                                       .outputs = {"Y", "", "", "qk"},
                                       .attributes = {{"qk_matmul_output_mode", std::int64_t{4}}}});
    std::string e = message_of([&] { (void)mode({q, q, q}); });
    EXPECT_NE(e.find("node 'the_node' (Attention, opset 23): qk_matmul_output_mode=4"), std::string::npos) << e;

    const fx::onnx::Model precision =
        load({.op = "Attention", .inputs = {"Q", "K", "V"}, .attributes = {{"softmax_precision", std::int64_t{7}}}});
    e = message_of([&] { (void)precision({q, q, q}); });
    EXPECT_NE(e.find("node 'the_node' (Attention, opset 23): softmax_precision=7"), std::string::npos) << e;

    const fx::onnx::Model heads = load({.op = "Attention", .inputs = {"Q", "K", "V"}});
    const fx::Tensor flat = fx::randn({1, 2, 4});
    e = message_of([&] { (void)heads({flat, flat, flat}); });
    EXPECT_NE(e.find("3-d Q, K and V need the attributes q_num_heads and kv_num_heads"), std::string::npos) << e;

    ScratchDir dir;
    write(dir / "preview.onnx", {.op = "FancyPreviewOp", .inputs = {"X"}, .domain = "ai.onnx.preview"});
    e = message_of([&] { (void)fx::onnx::load(dir / "preview.onnx"); });
    EXPECT_NE(e.find("node 'the_node' (FancyPreviewOp, opset 23) is in the domain 'ai.onnx.preview', and fluxion "
                     "implements only ONNX's default domain (and ai.onnx.preview's FlexAttention)"),
              std::string::npos)
        << e;

    const fx::onnx::Model mod = load({.op = "Mod", .inputs = {"A", "B"}, .attributes = {{"fmod", std::int64_t{2}}}});
    e = message_of([&] { (void)mod({q, q}); });
    EXPECT_NE(e.find("node 'the_node' (Mod, opset 23): fmod=2"), std::string::npos) << e;
}

// Mod reads its operands on the host, so fx::compile refuses it by name where they are data; Attention,
// all on fluxion's ops, compiles and replays.
TEST(OnnxImportAttention, ModRefusesACompiledReplayAndAttentionCompiles) {
    const fx::onnx::Model mod = load({.op = "Mod", .inputs = {"X", "X"}, .attributes = {{"fmod", std::int64_t{1}}}});
    auto fwd_mod = fx::compile(mod);
    const std::string why = message_of([&] { (void)fwd_mod(fx::randn({3})); });
    EXPECT_NE(why.find("(Mod, opset 23) reads its operands (to take their remainders) on the host"), std::string::npos)
        << why;

    const fx::onnx::Model attention =
        load({.op = "Attention", .inputs = {"X", "X", "X"}, .attributes = {{"is_causal", std::int64_t{1}}}});
    auto fwd = fx::compile(attention);
    for (int i = 0; i < 2; ++i) {
        const fx::Tensor x = fx::randn({1, 2, 3, 4});
        EXPECT_LE(largest_difference(fwd(x), attention(x)), 1e-6);
    }
}

// Mod's two roundings on integers and floats, signs mixed (values checked by hand).
TEST(OnnxImportAttention, ModFloorsOrTruncatesTheQuotient) {
    const fx::onnx::Model floor_mod = load({.op = "Mod", .inputs = {"A", "B"}});
    const fx::onnx::Model trunc_mod =
        load({.op = "Mod", .inputs = {"A", "B"}, .attributes = {{"fmod", std::int64_t{1}}}});
    const fx::Tensor a = fx::tensor(std::vector<std::int64_t>{7, -7, 7, -7}),
                     b = fx::tensor(std::vector<std::int64_t>{3, 3, -3, -3});
    EXPECT_EQ(floor_mod({a, b})[0].to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2, -2, -1}));
    EXPECT_EQ(trunc_mod({a, b})[0].to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, -1, 1, -1}));
    const fx::Tensor af = fx::tensor({7.5f, -7.5f, 0.f, 1.f}), bf = fx::tensor({2.f, 2.f, -2.f, 0.f});
    const auto fl = floor_mod({af, bf})[0].to_vector<float>(), tr = trunc_mod({af, bf})[0].to_vector<float>();
    EXPECT_EQ(fl[0], 1.5f);
    EXPECT_EQ(fl[1], 0.5f);
    EXPECT_TRUE(fl[2] == 0 && std::signbit(fl[2]));  // zero takes the divisor's sign
    EXPECT_TRUE(std::isnan(fl[3]));
    EXPECT_EQ(tr[0], 1.5f);
    EXPECT_EQ(tr[1], -1.5f);
    EXPECT_TRUE(std::isnan(tr[3]));
    EXPECT_NE(message_of([&] {
                  (void)floor_mod({a, fx::zeros_like(b)});
              }).find("integer Mod by zero"),
              std::string::npos);
}
