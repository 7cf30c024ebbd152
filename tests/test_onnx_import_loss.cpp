// test_onnx_import_loss.cpp — fx::onnx::load's loss, indexing, scan and Einsum operators
// (src/core/onnx/operators_{loss,indexing,scan,einsum}.cpp): gradients through an imported graph
// against finite differences (NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with class
// weights and an ignored label, GatherElements with repeated indices, ScatterElements with its
// reductions, Einsum, CumSum exclusive and reversed), and the messages of refusals and bad shapes. Their forward
// values are ONNX's node suite's (test_onnx_backend).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <utility>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "onnx_graph_writer.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using fx::testing::gradcheck;
using io_test::ScratchDir;

namespace {

using P = ::onnx::TensorProto;

using fx_test::Attribute;
using fx_test::write_node;
using fx_test::message_of;

const fx::Tensor labels = fx::tensor(std::vector<std::int64_t>{0, 2, 1, 3, 1, 2}, {2, 3});  // {N, d}; 1 is ignored

}  // namespace

TEST(OnnxImportLoss, NegativeLogLikelihoodGradientsWithWeightsAndIgnoredLabels) {
    ScratchDir dir;
    for (const std::string reduction : {"mean", "sum", "none"}) {
        write_node(dir / "nll.onnx", "NegativeLogLikelihoodLoss",
                   {{"input", P::FLOAT}, {"target", P::INT64}, {"weight", P::FLOAT}}, {"loss"},
                   {{"reduction", 0, reduction}, {"ignore_index", 1}});
        const fx::onnx::Model m = fx::onnx::load(dir / "nll.onnx");
        const fx::Tensor scale = fx::randn({2, 3});  // gives each sample's loss of `none` its own weight
        auto loss = [&](const fx::Tensor& x, const fx::Tensor& w) {
            const fx::Tensor l = m({fx::logsoftmax(x, 1), labels, w})[0];
            return reduction == "none" ? fx::sum(l * scale.to(l.dtype())) : l;
        };
        const fx::Tensor x = fx::randn({2, 4, 3}), w = fx::rand({4}) + 0.5;
        EXPECT_TRUE(gradcheck(loss, x, w)) << reduction;
        // The ignored samples count for nothing: their scores get no gradient.
        const auto [gx] = fx::gradient([&](const fx::Tensor& v) { return loss(v, w); }, x);
        const auto g = gx.to_vector<float>();
        for (int c = 0; c < 4; ++c) EXPECT_EQ(g[std::size_t(c * 3 + 2)], 0.0f) << reduction << " class " << c;
    }
}

TEST(OnnxImportLoss, SoftmaxCrossEntropyGradientsOfLossAndLogProb) {
    ScratchDir dir;
    write_node(dir / "sce.onnx", "SoftmaxCrossEntropyLoss",
               {{"scores", P::FLOAT}, {"labels", P::INT64}, {"weights", P::FLOAT}}, {"loss", "log_prob"},
               {{"reduction", 0, "mean"}, {"ignore_index", 1}});
    const fx::onnx::Model m = fx::onnx::load(dir / "sce.onnx");
    const fx::Tensor scale = fx::randn({2, 4, 3});
    auto both = [&](const fx::Tensor& x, const fx::Tensor& w) {
        const auto out = m({x, labels, w});
        return out[0] + fx::sum(out[1] * scale.to(out[1].dtype()));
    };
    const fx::Tensor x = fx::randn({2, 4, 3}), w = fx::rand({4}) + 0.5;
    EXPECT_TRUE(gradcheck(both, x, w));
    // Without weights and ignored labels it is fluxion's logitcrossentropy over the class axis.
    write_node(dir / "plain.onnx", "SoftmaxCrossEntropyLoss", {{"scores", P::FLOAT}, {"labels", P::INT64}}, {"loss"});
    const fx::Tensor targets = fx::tensor(std::vector<std::int64_t>{0, 2, 3, 3, 1, 2}, {2, 3});
    const float got = fx::onnx::load(dir / "plain.onnx")({x, targets})[0].item<float>();
    EXPECT_NEAR(got, fx::logitcrossentropy(x, targets, {.axis = 1}).item<float>(), 1e-5);
}

TEST(OnnxImportLoss, GatherElementsGradientSumsRepeatedIndices) {
    ScratchDir dir;
    write_node(dir / "g.onnx", "GatherElements", {{"data", P::FLOAT}, {"indices", P::INT64}}, {"y"}, {{"axis", 1}});
    const fx::onnx::Model m = fx::onnx::load(dir / "g.onnx");
    const fx::Tensor index = fx::tensor(std::vector<std::int64_t>{0, 0, -1, 2, 1, 1, 1, 0}, {2, 4});
    EXPECT_TRUE(gradcheck(
        [&](const fx::Tensor& x) {
            return fx::sum(fx::square(m({x, index})[0]));
        },
        fx::randn({2, 3})));
    const auto [g] = fx::gradient([&](const fx::Tensor& x) { return fx::sum(m({x, index})[0]); }, fx::randn({2, 3}));
    EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{2, 0, 2, 1, 3, 0}));
}

TEST(OnnxImportLoss, CumSumGradientExclusiveAndReversed) {
    ScratchDir dir;
    write_node(dir / "c.onnx", "CumSum", {{"x", P::FLOAT}, {"axis", P::INT64}}, {"y"},
               {{"exclusive", 1}, {"reverse", 1}});
    const fx::onnx::Model m = fx::onnx::load(dir / "c.onnx");
    const fx::Tensor axis = fx::tensor(std::vector<std::int64_t>{1}, {});
    const fx::Tensor x = fx::tensor(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
    EXPECT_EQ(m({x, axis})[0].to_vector<float>(), (std::vector<float>{14, 12, 9, 5, 0, 34, 27, 19, 10, 0}));
    const fx::Tensor scale = fx::randn({2, 5});
    EXPECT_TRUE(gradcheck([&](const fx::Tensor& v) { return fx::sum(m({v, axis})[0] * scale.to(v.dtype())); }, x));
}

TEST(OnnxImportLoss, ScatterGradientsReachDataAndUpdates) {
    ScratchDir dir;
    const fx::Tensor index = fx::tensor(std::vector<std::int64_t>{1, 0, 1, 2, 2, 2}, {2, 3});  // repeated per row
    for (const std::string reduction : {"none", "add", "mul", "max"}) {
        write_node(dir / "s.onnx", "ScatterElements",
                   {{"data", P::FLOAT}, {"indices", P::INT64}, {"updates", P::FLOAT}}, {"y"},
                   {{"axis", 1}, {"reduction", 0, reduction}});
        const fx::onnx::Model m = fx::onnx::load(dir / "s.onnx");
        const fx::Tensor scale = fx::randn({2, 4});
        auto f = [&](const fx::Tensor& data, const fx::Tensor& updates) {
            return fx::sum(m({data, index, updates})[0] * scale.to(data.dtype()));
        };
        EXPECT_TRUE(gradcheck(f, fx::randn({2, 4}), fx::randn({2, 3}))) << reduction;
    }
    // ScatterND: each indexed row takes its update, the row not named keeps data's.
    write_node(dir / "nd.onnx", "ScatterND", {{"data", P::FLOAT}, {"indices", P::INT64}, {"updates", P::FLOAT}}, {"y"});
    const fx::Tensor rows = fx::tensor(std::vector<std::int64_t>{2, 0}, {2, 1});
    const fx::Tensor y = fx::onnx::load(dir / "nd.onnx")(
        {fx::zeros({3, 2}), rows, fx::tensor(std::vector<float>{1, 2, 3, 4}, {2, 2})})[0];
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 4, 0, 0, 1, 2}));
}

TEST(OnnxImportLoss, EinsumGradientsOfBatchedMatmulAndDiagonal) {
    ScratchDir dir;
    write_node(dir / "mm.onnx", "Einsum", {{"a", P::FLOAT}, {"b", P::FLOAT}}, {"y"}, {{"equation", 0, "bij,bjk->bik"}});
    const fx::onnx::Model mm = fx::onnx::load(dir / "mm.onnx");
    const fx::Tensor a = fx::randn({2, 3, 4}), b = fx::randn({2, 4, 5}), scale = fx::randn({2, 3, 5});
    const auto y = mm({a, b})[0].to_vector<float>(), want = fx::matmul(a, b).to_vector<float>();
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-5) << i;
    EXPECT_TRUE(gradcheck(
        [&](const fx::Tensor& p, const fx::Tensor& q) {
            return fx::sum(mm({p, q})[0] * scale.to(p.dtype()));
        },
        a, b));
    // A repeated label is the diagonal, a label left out of the output is summed: "...ii,i->..." is
    // Σ_i x[..., i, i]·w[i].
    write_node(dir / "d.onnx", "Einsum", {{"x", P::FLOAT}, {"w", P::FLOAT}}, {"y"}, {{"equation", 0, "...ii,i->..."}});
    const fx::onnx::Model d = fx::onnx::load(dir / "d.onnx");
    const fx::Tensor x = fx::randn({2, 3, 3}), w = fx::randn({3});
    EXPECT_NEAR(d({x, w})[0].to_vector<float>()[1],
                x.at({1, 0, 0}) * w.at({0}) + x.at({1, 1, 1}) * w.at({1}) + x.at({1, 2, 2}) * w.at({2}), 1e-5);
    EXPECT_TRUE(gradcheck(
        [&](const fx::Tensor& p, const fx::Tensor& q) {
            return fx::sum(fx::square(d({p, q})[0]));
        },
        x, w));
}

TEST(OnnxImportLoss, RefusedAttributesAreNamed) {
    ScratchDir dir;
    write_node(dir / "nll.onnx", "NegativeLogLikelihoodLoss", {{"input", P::FLOAT}, {"target", P::INT64}}, {"loss"},
               {{"reduction", 0, "max"}});
    const fx::onnx::Model m = fx::onnx::load(dir / "nll.onnx");
    const std::string message = message_of([&] {
        (void)m({fx::randn({2, 3}), fx::tensor(std::vector<std::int64_t>{0, 1}, {2})});
    });
    EXPECT_NE(message.find("node 'the_node' (NegativeLogLikelihoodLoss, opset 22): reduction='max'"), std::string::npos)
        << message;
    write_node(dir / "e.onnx", "Einsum", {{"a", P::FLOAT}, {"b", P::FLOAT}}, {"y"}, {{"equation", 0, "ij,ij->ij"}});
    const fx::onnx::Model e = fx::onnx::load(dir / "e.onnx");
    const fx::Tensor a = fx::randn({2, 3}), row = fx::randn({1, 3});
    EXPECT_EQ(e({a, row})[0].to_vector<float>(), (a * row).to_vector<float>());  // a size-1 axis broadcasts
    const std::string sizes = message_of([&] { (void)e({a, fx::randn({3, 3})}); });
    EXPECT_NE(sizes.find("equation 'ij,ij->ij': operands of sizes 2 and 3 along label 'i'"), std::string::npos)
        << sizes;
}
