// test_io_interop.cpp — files move between fluxion and PyTorch both ways: the same weights give the
// same outputs in torch.nn.Sequential(Linear, ReLU, Linear) and in fluxion (a FLUXION_FUNCTOR MLP,
// and fx::Chain of fx::Dense), and every dtype means the same values on both sides. The PyTorch
// side is tests/interop/torch_mlp.py, run with Debian's /usr/bin/python3; the tests skip where it
// cannot import torch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "test_io_support.hpp"

namespace {

using io_test::Linear;
using io_test::MLP;
using io_test::mlp;
using io_test::ScratchDir;

constexpr const char* kPython = "/usr/bin/python3";

bool torch_importable() {
    static const bool ok = std::system((std::string(kPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
    return ok;
}

std::string quoted(const std::filesystem::path& p) {
    std::string s(1, '\'');
    s.append(p.string()) += '\'';
    return s;
}

// Runs tests/interop/torch_mlp.py with `args`; the script's output goes to the test log.
void torch_mlp(const std::string& args) {
    const auto script = std::filesystem::path(FLUXION_SOURCE_DIR) / "tests" / "interop" / "torch_mlp.py";
    const std::string command = std::string(kPython) + " " + quoted(script) + " " + args;
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

class IOInterop : public ::testing::Test {
protected:
    void SetUp() override {
        if (!torch_importable()) GTEST_SKIP() << kPython << " cannot import torch (Debian's python3-torch)";
    }
};

void expect_close(const fx::Tensor& actual, const fx::Tensor& expected) {
    ASSERT_EQ(actual.shape(), expected.shape());
    const auto a = actual.to_vector<float>(), e = expected.to_vector<float>();
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-5 * (1 + std::abs(e[i]))) << "element " << i;
}

void expect_identical(const fx::Tensor& a, const fx::Tensor& b) {
    ASSERT_EQ(a.shape(), b.shape());
    EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

fx::Tensor save_inputs(const std::filesystem::path& path, const fx::Shape& shape) {
    const fx::Tensor x = fx::randn(shape);
    fx::save_state(path, std::map<std::string, fx::Tensor>{{"x", x}});
    return x;
}

TEST_F(IOInterop, FluxionWeightsGiveTheSameOutputsInPyTorch) {
    ScratchDir dir;
    const MLP model = mlp({4, 8, 3});
    fx::save(dir / "model.safetensors", model);
    const fx::Tensor x = save_inputs(dir / "x.safetensors", {5, 4});
    torch_mlp("run " + quoted(dir / "model.safetensors") + " " + quoted(dir / "x.safetensors") + " " +
              quoted(dir / "out.safetensors"));

    const auto out = fx::load_state(dir / "out.safetensors");
    expect_close(out.at("y"), model(x));
    // PyTorch read exactly the values fluxion wrote, in PyTorch's layout.
    expect_identical(out.at("state.0.weight"), model.layers[0].weight);
    expect_identical(out.at("state.0.bias"), model.layers[0].bias);
    expect_identical(out.at("state.2.weight"), model.layers[1].weight);
    expect_identical(out.at("state.2.bias"), model.layers[1].bias);
}

TEST_F(IOInterop, PyTorchWeightsGiveTheSameOutputsInFluxion) {
    ScratchDir dir;
    MLP model = mlp({4, 8, 3});
    std::string names;
    for (const auto& [name, t] : fx::state(model)) names.append(" ").append(name);
    const fx::Tensor x = save_inputs(dir / "x.safetensors", {7, 4});
    torch_mlp("export " + quoted(dir / "torch.safetensors") + " " + quoted(dir / "x.safetensors") + " " +
              quoted(dir / "y.safetensors") + " 4 8 3 --names" + names);

    EXPECT_TRUE(fx::load(dir / "torch.safetensors", model).complete());
    expect_close(model(x), fx::load_state(dir / "y.safetensors").at("y"));
}

TEST_F(IOInterop, ChainOfDenseMatchesSequentialBothWays) {
    ScratchDir dir;
    const auto chain = fx::Chain(fx::Dense(4, 8), fx::relu, fx::Dense(8, 3));
    fx::save(dir / "chain.safetensors", chain);
    const fx::Tensor x = save_inputs(dir / "x.safetensors", {5, 4});
    torch_mlp("run " + quoted(dir / "chain.safetensors") + " " + quoted(dir / "x.safetensors") + " " +
              quoted(dir / "out.safetensors"));
    expect_close(fx::load_state(dir / "out.safetensors").at("y"), chain(x));

    auto loaded = fx::Chain(fx::Dense(4, 8), fx::relu, fx::Dense(8, 3));
    std::string names;
    for (const auto& [name, t] : fx::state(loaded)) names.append(" ").append(name);
    EXPECT_EQ(names, " layers.0.weight layers.0.bias layers.2.weight layers.2.bias");
    torch_mlp("export " + quoted(dir / "torch.safetensors") + " " + quoted(dir / "x.safetensors") + " " +
              quoted(dir / "y.safetensors") + " 4 8 3 --names" + names);
    EXPECT_TRUE(fx::load(dir / "torch.safetensors", loaded).complete());
    expect_close(loaded(x), fx::load_state(dir / "y.safetensors").at("y"));
}

// A map-keyed model has PyTorch's own names ("0.weight", "2.weight"): a torch file loads as is.
TEST_F(IOInterop, PyTorchNamesLoadIntoAModelWithTheSameNames) {
    ScratchDir dir;
    std::map<std::string, Linear> model{{"0", Linear(4, 8)}, {"2", Linear(8, 3)}};
    const fx::Tensor x = save_inputs(dir / "x.safetensors", {3, 4});
    torch_mlp("export " + quoted(dir / "torch.safetensors") + " " + quoted(dir / "x.safetensors") + " " +
              quoted(dir / "y.safetensors") + " 4 8 3");

    fx::load(dir / "torch.safetensors", model);
    const fx::Tensor y = model.at("2")(fx::relu(model.at("0")(x)));
    expect_close(y, fx::load_state(dir / "y.safetensors").at("y"));
}

TEST_F(IOInterop, EveryDTypeMeansTheSameValuesInPyTorch) {
    ScratchDir dir;
    const fx::Tensor f = fx::tensor({1.5f, -2.25f, 3.0e-5f, 65504.0f, -0.0f, 1.0e-8f}, {2, 3});
    const std::map<std::string, fx::Tensor> state{
        {"f32", f},
        {"f64", f.to(fx::DType::f64) / 3.0},
        {"i32", fx::tensor(std::vector<std::int32_t>{-7, 0, 2147483647}, {3})},
        {"i64", fx::tensor(std::vector<std::int64_t>{-1, std::int64_t{1} << 40}, {2})},
        {"u8", fx::tensor(std::vector<std::uint8_t>{0, 128, 255}, {3})},
        {"bool", fx::gt(f, fx::zeros({2, 3}))},
        {"f16", f.to(fx::DType::f16)},
        {"bf16", f.to(fx::DType::bf16)},
        {"scalar", fx::scalar(2.5)},
        {"empty", fx::zeros({0, 2})},
    };
    fx::save_state(dir / "all.safetensors", state);
    torch_mlp("dtypes " + quoted(dir / "all.safetensors") + " " + quoted(dir / "f64.safetensors"));

    const auto as_f64 = fx::load_state(dir / "f64.safetensors");
    for (const auto& [name, t] : state) {
        SCOPED_TRACE(name);
        EXPECT_EQ(as_f64.at(name).shape(), t.shape());
        EXPECT_EQ(as_f64.at(name).to_vector<double>(), t.to_vector<double>());
    }
}

}  // namespace
