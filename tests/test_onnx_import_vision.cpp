// test_onnx_import_vision.cpp — fx::onnx::load's detection and host operators
// (src/core/onnx/operators_{detection,misc}.cpp): RoiAlign's, DeformConv's, Col2Im's and
// MeanVarianceNormalization's gradients through an imported graph against finite differences (and
// on every other device against the CPU's),
// NonMaxSuppression, Unique and Det on small hand-checked cases, and the messages of refusals. Their
// forward values are ONNX's node suite's (test_onnx_backend).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "other_devices.hpp"
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

fx::Tensor ints(std::vector<std::int64_t> v, const fx::Shape& shape) { return fx::tensor(v, shape); }

}  // namespace

TEST(OnnxImportVision, RoiAlignGradientInXAgainstFiniteDifferences) {
    ScratchDir dir;
    // Two regions of two images, one reaching past the image's border.
    const fx::Tensor rois = fx::tensor(std::vector<float>{0.5f, 0.3f, 3.2f, 2.7f, 1.1f, -0.6f, 5.4f, 3.3f}, {2, 4});
    const fx::Tensor batch = ints({1, 0}, {2});
    for (const std::string mode : {"avg", "max"}) {
        write_node(dir / "r.onnx", "RoiAlign", {{"X", P::FLOAT}, {"rois", P::FLOAT}, {"batch_indices", P::INT64}},
                   {"Y"}, {{"mode", 0, mode}, {"output_height", 2}, {"output_width", 3}, {"sampling_ratio", 0}});
        const fx::onnx::Model m = fx::onnx::load(dir / "r.onnx");
        const fx::Tensor scale = fx::randn({2, 3, 2, 3});
        EXPECT_TRUE(gradcheck(
            [&](const fx::Tensor& x) {
                return fx::sum(m({x, rois, batch})[0] * scale.to(x.dtype()));
            },
            fx::randn({2, 3, 5, 6})))
            << mode;
    }
    // A constant image averages to its constant wherever the samples fall inside.
    write_node(dir / "c.onnx", "RoiAlign", {{"X", P::FLOAT}, {"rois", P::FLOAT}, {"batch_indices", P::INT64}}, {"Y"},
               {{"output_height", 2}, {"output_width", 2}});
    const fx::Tensor y = fx::onnx::load(dir / "c.onnx")(
        {fx::full({1, 1, 4, 4}, 3.0), fx::zeros({0, 4}), fx::tensor(std::vector<std::int64_t>{}, {0})})[0];
    EXPECT_EQ(y.shape(), (fx::Shape{0, 1, 2, 2}));
    const fx::Tensor inside = fx::tensor(std::vector<float>{1, 1, 3, 3}, {1, 4});
    for (float v :
         fx::onnx::load(dir / "c.onnx")({fx::full({1, 1, 4, 4}, 3.0), inside, ints({0}, {1})})[0].to_vector<float>())
        EXPECT_NEAR(v, 3.0f, 1e-6);
}

TEST(OnnxImportVision, Col2ImAndMeanVarianceNormalizationGradients) {
    ScratchDir dir;
    write_node(dir / "c.onnx", "Col2Im", {{"x", P::FLOAT}, {"image", P::INT64}, {"block", P::INT64}}, {"y"});
    const fx::onnx::Model col2im = fx::onnx::load(dir / "c.onnx");
    // A 3×3 image of 2×2 blocks: 4 blocks, the centre pixel in all four.
    const fx::Tensor image = ints({3, 3}, {2}), block = ints({2, 2}, {2});
    const fx::Tensor y = col2im({fx::ones({1, 4, 4}), image, block})[0];
    EXPECT_EQ(y.shape(), (fx::Shape{1, 1, 3, 3}));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
    const fx::Tensor scale = fx::randn({2, 2, 3, 3});
    EXPECT_TRUE(gradcheck(
        [&](const fx::Tensor& x) {
            return fx::sum(col2im({x, image, block})[0] * scale.to(x.dtype()));
        },
        fx::randn({2, 8, 4})));

    write_node(dir / "m.onnx", "MeanVarianceNormalization", {{"x", P::FLOAT}}, {"y"});
    const fx::onnx::Model mvn = fx::onnx::load(dir / "m.onnx");
    const fx::Tensor s2 = fx::randn({2, 3, 2, 2});
    EXPECT_TRUE(
        gradcheck([&](const fx::Tensor& x) { return fx::sum(mvn(x) * s2.to(x.dtype())); }, fx::randn({2, 3, 2, 2})));
}

TEST(OnnxImportVision, DeformConvGradientsInEveryInput) {
    ScratchDir dir;
    write_node(dir / "d.onnx", "DeformConv",
               {{"X", P::FLOAT}, {"W", P::FLOAT}, {"offset", P::FLOAT}, {"B", P::FLOAT}, {"mask", P::FLOAT}}, {"Y"},
               {{"group", 2}, {"offset_group", 2}});
    const fx::onnx::Model m = fx::onnx::load(dir / "d.onnx");
    // Offsets of a quarter-pixel's fractions keep every sample away from the pixel grid's kinks.
    const fx::Tensor offset = fx::rand({1, 2 * 4 * 2, 3, 3}) * 0.5 + 0.25, scale = fx::randn({1, 4, 3, 3});
    EXPECT_TRUE(gradcheck(
        [&](const fx::Tensor& x, const fx::Tensor& w, const fx::Tensor& o, const fx::Tensor& b, const fx::Tensor& k) {
            return fx::sum(m({x, w, o, b, k})[0] * scale.to(x.dtype()));
        },
        fx::randn({1, 4, 4, 4}), fx::randn({4, 2, 2, 2}), offset, fx::randn({4}), fx::rand({1, 8, 3, 3})));
    // With zero offsets and no mask it is Conv.
    write_node(dir / "z.onnx", "DeformConv", {{"X", P::FLOAT}, {"W", P::FLOAT}, {"offset", P::FLOAT}}, {"Y"});
    const fx::Tensor x = fx::randn({1, 2, 4, 4}), w = fx::randn({3, 2, 2, 2});
    const auto got = fx::onnx::load(dir / "z.onnx")({x, w, fx::zeros({1, 8, 3, 3})})[0].to_vector<float>();
    const auto want = fx::conv2d(x, w).to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

// The differentiable ones on every other device (Vulkan on lavapipe here): the outputs and the
// gradients in every input the CPU's.
TEST(OnnxImportVision, RoiAlignAndDeformConvGradientsOnOtherDevices) {
    ScratchDir dir;
    write_node(dir / "r.onnx", "RoiAlign", {{"X", P::FLOAT}, {"rois", P::FLOAT}, {"batch_indices", P::INT64}}, {"Y"},
               {{"mode", 0, "avg"}, {"output_height", 2}, {"output_width", 3}});
    write_node(dir / "d.onnx", "DeformConv",
               {{"X", P::FLOAT}, {"W", P::FLOAT}, {"offset", P::FLOAT}, {"B", P::FLOAT}, {"mask", P::FLOAT}}, {"Y"},
               {{"group", 2}, {"offset_group", 2}});
    const fx::onnx::Model roi = fx::onnx::load(dir / "r.onnx"), deform = fx::onnx::load(dir / "d.onnx");
    const fx::Tensor rois = fx::tensor(std::vector<float>{0.5f, 0.3f, 3.2f, 2.7f, 1.1f, -0.6f, 5.4f, 3.3f}, {2, 4});
    const fx::Tensor batch = ints({1, 0}, {2}), image = fx::randn({2, 3, 5, 6}), s1 = fx::randn({2, 3, 2, 3});
    const std::vector<fx::Tensor> in = {fx::randn({1, 4, 4, 4}), fx::randn({4, 2, 2, 2}),
                                        fx::rand({1, 16, 3, 3}) * 0.5 + 0.25, fx::randn({4}), fx::rand({1, 8, 3, 3})};
    const fx::Tensor s2 = fx::randn({1, 4, 3, 3});
    auto both = [&](const fx::Device& d) {
        const auto [gi] = fx::gradient(
            [&](const fx::Tensor& x) {
                return fx::sum(roi({x, rois.to(d), batch.to(d)})[0] * s1.to(d));
            },
            image.to(d));
        const auto [g0, g1, g2, g3, g4] = fx::gradient(
            [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c, const fx::Tensor& e,
                const fx::Tensor& f) {
                return fx::sum(deform({a, b, c, e, f})[0] * s2.to(d));
            },
            in[0].to(d), in[1].to(d), in[2].to(d), in[3].to(d), in[4].to(d));
        return std::vector<fx::Tensor>{gi, g0, g1, g2, g3, g4};
    };
    const auto want = both(fx::Device{});
    for (const auto& d : fx::testing::other_devices()) {
        SCOPED_TRACE(d.str());
        const auto got = both(d);
        for (std::size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(got[i].device(), d) << "gradient " << i;
            const auto a = got[i].to(fx::Device{}).to_vector<float>(), b = want[i].to_vector<float>();
            ASSERT_EQ(a.size(), b.size());
            for (std::size_t k = 0; k < a.size(); ++k)
                EXPECT_NEAR(a[k], b[k], 1e-4 * std::max(1.0f, std::abs(b[k]))) << i;
        }
    }
}

TEST(OnnxImportVision, NonMaxSuppressionKeepsTheBestOfOverlappingBoxes) {
    ScratchDir dir;
    write_node(dir / "n.onnx", "NonMaxSuppression",
               {{"boxes", P::FLOAT}, {"scores", P::FLOAT}, {"most", P::INT64}, {"iou", P::FLOAT}, {"score", P::FLOAT}},
               {"selected"});
    const fx::onnx::Model m = fx::onnx::load(dir / "n.onnx");
    // Boxes 0 and 1 overlap with IoU 64/117 ≈ 0.55 (corners given in either order); box 2 is apart.
    const fx::Tensor boxes = fx::tensor(std::vector<float>{0, 0, 10, 10, 11, 11, 2, 2, 20, 20, 25, 25}, {1, 3, 4});
    const fx::Tensor scores = fx::tensor(std::vector<float>{0.8f, 0.9f, 0.7f}, {1, 1, 3});
    auto run = [&](std::int64_t most, float iou, float score) {
        return m({boxes, scores, ints({most}, {1}), fx::tensor(std::vector<float>{iou}, {1}),
                  fx::tensor(std::vector<float>{score}, {1})})[0];
    };
    const fx::Tensor all = run(10, 0.5f, 0.0f);
    EXPECT_EQ(all.shape(), (fx::Shape{2, 3}));
    EXPECT_EQ(all.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0, 1, 0, 0, 2}));
    EXPECT_EQ(run(10, 0.7f, 0.0f).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0, 1, 0, 0, 0, 0, 0, 2}));
    EXPECT_EQ(run(1, 0.5f, 0.0f).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0, 1}));
    EXPECT_EQ(run(10, 0.5f, 0.75f).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0, 1}));
}

TEST(OnnxImportVision, UniqueAndDetOnSmallCases) {
    ScratchDir dir;
    write_node(dir / "u.onnx", "Unique", {{"x", P::FLOAT}}, {"y", "indices", "inverse", "counts"}, {{"sorted", 0}});
    const auto u =
        fx::onnx::load(dir / "u.onnx")(std::vector<fx::Tensor>{fx::tensor(std::vector<float>{2, 1, 1, 3, 4, 3}, {6})});
    EXPECT_EQ(u[0].to_vector<float>(), (std::vector<float>{2, 1, 3, 4}));
    EXPECT_EQ(u[1].to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 3, 4}));
    EXPECT_EQ(u[2].to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 1, 2, 3, 2}));
    EXPECT_EQ(u[3].to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2, 2, 1}));
    write_node(dir / "d.onnx", "Det", {{"x", P::FLOAT}}, {"y"});
    const fx::Tensor d =
        fx::onnx::load(dir / "d.onnx")(fx::tensor(std::vector<float>{1, 2, 3, 4, 0, 1, 1, 0}, {2, 2, 2}));
    EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{-2, -1}));
}

TEST(OnnxImportVision, RefusalsNameTheNodeAndWhat) {
    ScratchDir dir;
    write_node(dir / "r.onnx", "RoiAlign", {{"X", P::FLOAT}, {"rois", P::FLOAT}, {"batch_indices", P::INT64}}, {"Y"},
               {{"mode", 0, "median"}});
    const fx::onnx::Model m = fx::onnx::load(dir / "r.onnx");
    const std::string e = message_of([&] { m({fx::zeros({1, 1, 4, 4}), fx::zeros({1, 4}), ints({0}, {1})}); });
    EXPECT_NE(e.find("node 'the_node' (RoiAlign, opset 22)"), std::string::npos) << e;
    EXPECT_NE(e.find("mode=median"), std::string::npos) << e;
    // BitCast between widths is refused.
    write_node(dir / "b.onnx", "BitCast", {{"x", P::FLOAT}}, {"y"}, {{"to", P::INT64}});
    const std::string b = message_of([&] { fx::onnx::load(dir / "b.onnx")(fx::zeros({2})); });
    EXPECT_NE(b.find("BitCast takes types of one width, not 32 and 64 bits"), std::string::npos) << b;
    // NonZero's output follows its input's values: fx::compile refuses it by name rather than replaying.
    write_node(dir / "z.onnx", "NonZero", {{"x", P::FLOAT}}, {"y"});
    const fx::onnx::Model nonzero = fx::onnx::load(dir / "z.onnx");
    auto compiled = fx::compile(nonzero);
    const std::string z = message_of([&] { (void)compiled(fx::tensor(std::vector<float>{0, 1, 0, 2}, {4})); });
    EXPECT_NE(z.find("(NonZero, opset 22) reads its input (to find its non-zero elements) on the host"),
              std::string::npos)
        << z;
}
