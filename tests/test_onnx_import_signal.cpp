// test_onnx_import_signal.cpp — ONNX's GridSample, AffineGrid, DFT and STFT imported: their forward
// passes are graded by ONNX's node suite (test_onnx_backend, on the CPU and every other device);
// here their gradients through the imported graph meet central finite differences, and modes that
// are not implemented are refused by name.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <variant>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "onnx_graph_writer.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using io_test::ScratchDir;

namespace {

using fx_test::message_of;
using Attribute = std::pair<std::string, std::variant<std::int64_t, std::string>>;

// A graph of one node `op` at `opset` reading the graph inputs `inputs` (in that order), written to
// `path`; its one output is Y.
void write_node(const std::filesystem::path& path, const std::string& op, std::int64_t opset,
                const std::vector<std::string>& inputs, const std::vector<Attribute>& attributes = {}) {
    fx_test::GraphWriter g(opset, 10);
    for (const auto& name : inputs) g.input(name);
    auto& n = g.node(op, inputs, {"Y"});
    for (const auto& [name, value] : attributes) std::visit([&](const auto& v) { fx_test::set(n, name, v); }, value);
    g.output("Y").write(path);
}

// Σ (model(inputs) · r)² for a fixed r, so that every output element's gradient counts differently.
fx::Tensor weighted(const fx::onnx::Model& m, const std::vector<fx::Tensor>& inputs) {
    const fx::Tensor y = m(inputs)[0];
    fx::seed(5);
    const fx::Tensor r = fx::randn(y.shape()).to(y.dtype());
    return fx::sum(fx::square(y * r));
}

}  // namespace

// Every mode and padding of GridSample differentiates in the image and (but for nearest) the grid,
// with sample points inside, on and beyond the borders.
TEST(OnnxImportSignal, GridSampleGradientsMatchFiniteDifferences) {
    ScratchDir dir;
    fx::seed(1);
    const fx::Tensor x = fx::randn({2, 3, 5, 4});
    const fx::Tensor grid = fx::rand({2, 3, 4, 2}) * 2.6 - 1.3;  // some points outside [-1, 1]
    for (const std::string mode : {"linear", "nearest", "cubic"})
        for (const std::string padding : {"zeros", "border", "reflection"})
            for (const std::int64_t align : {0, 1}) {
                SCOPED_TRACE(mode + ", " + padding + ", align_corners=" + std::to_string(align));
                const auto path = dir / (mode + padding + std::to_string(align) + ".onnx");
                write_node(path, "GridSample", 22, {"X", "grid"},
                           {{"mode", mode}, {"padding_mode", padding}, {"align_corners", align}});
                const fx::onnx::Model m = fx::onnx::load(path);
                EXPECT_EQ(m({x, grid})[0].shape(), (fx::Shape{2, 3, 3, 4}));
                if (mode == "nearest")
                    EXPECT_TRUE(fx::testing::gradcheck(
                        [&](const fx::Tensor& xs) { return weighted(m, {xs, grid.to(fx::DType::f64)}); }, x));
                else
                    EXPECT_TRUE(fx::testing::gradcheck(
                        [&](const fx::Tensor& xs, const fx::Tensor& gs) { return weighted(m, {xs, gs}); }, x, grid));
            }
}

TEST(OnnxImportSignal, VolumetricGridSampleAndAffineGridDifferentiate) {
    ScratchDir dir;
    fx::seed(2);
    write_node(dir / "g.onnx", "GridSample", 22, {"X", "grid"}, {{"mode", std::string("linear")}});
    const fx::onnx::Model sample = fx::onnx::load(dir / "g.onnx");
    const fx::Tensor x = fx::randn({1, 2, 3, 4, 5}), grid = fx::rand({1, 2, 3, 2, 3}) * 2.2 - 1.1;
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& xs, const fx::Tensor& gs) { return weighted(sample, {xs, gs}); }, x, grid));

    for (const std::int64_t align : {0, 1}) {
        write_node(dir / "a.onnx", "AffineGrid", 20, {"theta", "size"}, {{"align_corners", align}});
        const fx::onnx::Model affine = fx::onnx::load(dir / "a.onnx");
        const fx::Tensor theta = fx::randn({2, 2, 3});
        const fx::Tensor size = fx::tensor(std::vector<std::int64_t>{2, 3, 4, 5}, {4});
        const fx::Tensor g = affine({theta, size})[0];
        ASSERT_EQ(g.shape(), (fx::Shape{2, 4, 5, 2}));
        // The corner (h, w) = (0, 0) sits at (x, y) = (-1, -1) with corners aligned, half a pixel in without.
        const double cx = align ? -1.0 : -1.0 + 1.0 / 5, cy = align ? -1.0 : -1.0 + 1.0 / 4;
        const auto t = theta.to_vector<float>();
        EXPECT_NEAR(g.to_vector<float>()[0], t[0] * cx + t[1] * cy + t[2], 1e-5);
        EXPECT_TRUE(fx::testing::gradcheck([&](const fx::Tensor& th) { return weighted(affine, {th, size}); }, theta));
    }
}

// DFT forward, inverse, one-sided and its inverse (irfft), and STFT with a window, each differentiated
// in its input (and the window).
TEST(OnnxImportSignal, DftAndStftGradientsMatchFiniteDifferences) {
    ScratchDir dir;
    fx::seed(3);
    const fx::Tensor real = fx::randn({2, 7, 1}), complex = fx::randn({2, 7, 2});
    struct Case {
        std::int64_t inverse, onesided;
        fx::Tensor x;
        fx::Shape out;
    };
    for (const Case& c : {Case{0, 0, complex, {2, 7, 2}}, Case{0, 0, real, {2, 7, 2}}, Case{0, 1, real, {2, 4, 2}},
                          Case{1, 0, complex, {2, 7, 2}}, Case{1, 1, complex, {2, 12, 1}}}) {
        SCOPED_TRACE("inverse=" + std::to_string(c.inverse) + ", onesided=" + std::to_string(c.onesided));
        write_node(dir / "d.onnx", "DFT", 17, {"X"}, {{"inverse", c.inverse}, {"onesided", c.onesided}});
        const fx::onnx::Model m = fx::onnx::load(dir / "d.onnx");
        EXPECT_EQ(m(c.x).shape(), c.out);
        EXPECT_TRUE(fx::testing::gradcheck([&](const fx::Tensor& xs) { return weighted(m, {xs}); }, c.x));
    }
    // A forward transform undone by the inverse gives the signal back.
    write_node(dir / "f.onnx", "DFT", 17, {"X"});
    write_node(dir / "i.onnx", "DFT", 17, {"X"}, {{"inverse", 1}});
    const fx::Tensor back = fx::onnx::load(dir / "i.onnx")(fx::onnx::load(dir / "f.onnx")(complex));
    EXPECT_LE(fx::max(fx::abs(back - complex)).item<float>(), 1e-5);

    write_node(dir / "s.onnx", "STFT", 17, {"signal", "frame_step", "window"});
    const fx::onnx::Model stft = fx::onnx::load(dir / "s.onnx");
    const fx::Tensor signal = fx::randn({2, 16, 1}), window = fx::rand({6});
    const fx::Tensor step = fx::tensor(std::vector<std::int64_t>{3}, {});
    EXPECT_EQ(stft({signal, step, window})[0].shape(), (fx::Shape{2, 4, 4, 2}));
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Tensor& s, const fx::Tensor& w) { return weighted(stft, {s, step, w}); }, signal, window));
}

// GridSample chooses its taps on the host from the grid's values: with the grid a parameter (or an
// input), a compiled replay would keep the first call's taps, so fx::compile refuses the model by
// name (the eager model runs).
TEST(OnnxImportSignal, CompilingAGridSampleModelIsRefusedByName) {
    ScratchDir dir;
    fx_test::GraphWriter g(22, 10);
    g.input("X").initializer("grid", {-0.5f, 0.25f, 0.75f, -1.0f, 0.1f, 0.2f, 0.9f, 0.3f}, {1, 2, 2, 2});
    g.node("GridSample", {"X", "grid"}, {"Y"});
    g.output("Y").write(dir / "g.onnx");
    const fx::onnx::Model model = fx::onnx::load(dir / "g.onnx");
    const fx::Tensor x = fx::randn({1, 3, 4, 4});
    EXPECT_EQ(model(x).shape(), (fx::Shape{1, 3, 2, 2}));
    auto fwd = fx::compile(model);
    const std::string why = message_of([&] { fwd(x); });
    EXPECT_NE(why.find("(GridSample, opset 22) reads its sample points (to choose its taps) on the host"), std::string::npos)
        << why;
}

TEST(OnnxImportSignal, UnimplementedModesAreNamedWithTheirNode) {
    ScratchDir dir;
    write_node(dir / "g.onnx", "GridSample", 22, {"X", "grid"}, {{"mode", std::string("lanczos")}});
    const fx::onnx::Model m = fx::onnx::load(dir / "g.onnx");
    const std::string why = message_of([&] { m({fx::randn({1, 1, 2, 2}), fx::randn({1, 2, 2, 2})}); });
    EXPECT_NE(why.find("(GridSample, opset 22): mode=lanczos"), std::string::npos) << why;

    write_node(dir / "d.onnx", "DFT", 17, {"X"}, {{"onesided", 1}});
    const fx::onnx::Model d = fx::onnx::load(dir / "d.onnx");
    const std::string complex = message_of([&] { d(fx::randn({1, 4, 2})); });
    EXPECT_NE(complex.find("(DFT, opset 17): onesided=1 on a complex input"), std::string::npos) << complex;
}
