// test_onnx_import_control.cpp — fx::onnx::load's control flow (src/core/onnx/operators_control.cpp):
// a Scan (opsets 17 and 8) and a Loop whose bodies read a value of the enclosing graph (outer
// scope), their values checked by hand and their gradients through the imported graph against
// finite differences; If choosing each branch; fx::compile's refusal of a model whose branch depends
// on data; the refusals of an undefined outer value, an endless Loop and a short sequence_lens.
// Their other values are ONNX's node suite's (test_onnx_backend).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "onnx_graph_writer.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using fx::testing::gradcheck;
using io_test::ScratchDir;

namespace {

using G = ::onnx::GraphProto;

void node(G* g, const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op == "If" || op == "Loop" || op == "Scan" ? "the_node" : "");
    for (const auto& x : in) n->add_input(x);
    for (const auto& y : out) n->add_output(y);
}
void int_attribute(G* g, const std::string& name, std::int64_t v) {
    auto* a = g->mutable_node(g->node_size() - 1)->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
}
// The last node's graph attribute `name`, with the given inputs and outputs.
G* graph_attribute(G* g, const std::string& name, const std::vector<std::string>& in,
                   const std::vector<std::string>& out) {
    auto* a = g->mutable_node(g->node_size() - 1)->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::GRAPH);
    G* body = a->mutable_g();
    body->set_name(name);
    for (const auto& x : in) body->add_input()->set_name(x);
    for (const auto& y : out) body->add_output()->set_name(y);
    return body;
}
void scalar(G* g, const std::string& name, int type, std::int64_t v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    t->add_int64_data(v);
    if (type != ::onnx::TensorProto::INT64) {  // bool: held in int32_data
        t->clear_int64_data();
        t->add_int32_data(std::int32_t(v));
    }
}

fx::onnx::Model load(const ScratchDir& dir, const std::string& file, const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs, const std::function<void(G*)>& body,
                     std::int64_t opset = 17) {
    ::onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(opset);
    auto* g = m.mutable_graph();
    g->set_name("g");
    for (const auto& x : inputs) g->add_input()->set_name(x);
    body(g);
    for (const auto& y : outputs) g->add_output()->set_name(y);
    {
        std::ofstream out(dir / file, std::ios::binary);
        m.SerializeToOstream(&out);
    }
    return fx::onnx::load(dir / file);
}

using fx_test::message_of;

using fx_test::weighted_sum;

double largest_difference(const fx::Tensor& a, const fx::Tensor& b) {
    return fx::max(fx::abs(a.to(fx::DType::f64) - b.to(fx::DType::f64))).item<double>();
}

}  // namespace

// Scan over the rows of X, its state S summing them, each step's output (S + x_t) * W with W the
// enclosing graph's input: the final sum, and the rows of running sums times W.
TEST(OnnxImportControl, ScanReadsTheEnclosingGraphAndDifferentiates) {
    ScratchDir dir;
    const fx::onnx::Model m = load(dir, "scan.onnx", {"S", "X", "W"}, {"final", "rows"}, [](G* g) {
        node(g, "Scan", {"S", "X"}, {"final", "rows"});
        int_attribute(g, "num_scan_inputs", 1);
        G* body = graph_attribute(g, "body", {"s_in", "x_t"}, {"s_out", "y_t"});
        node(body, "Add", {"s_in", "x_t"}, {"s_out"});
        node(body, "Mul", {"s_out", "W"}, {"y_t"});  // W: of the enclosing graph
    });
    EXPECT_EQ(m.input_names(), (std::vector<std::string>{"S", "X", "W"}));
    const fx::Tensor s = fx::randn({3}), x = fx::randn({4, 3}), w = fx::randn({3});
    const auto ys = m({s, x, w});
    ASSERT_EQ(ys.size(), 2u);
    EXPECT_LE(largest_difference(ys[0], s + fx::sum(x, 0)), 1e-5);
    fx::Tensor running = s;
    for (int t = 0; t < 4; ++t) {
        running = running + x.select(0, t);
        EXPECT_LE(largest_difference(ys[1].select(0, t), running * w), 1e-5) << "row " << t;
    }
    EXPECT_TRUE(gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& b, const fx::Tensor& c) {
            return weighted_sum(m({a, b, c}));
        },
        s, x, w));
}

// Scan of opset 8: a batch axis first, each entry scanned on its own; sequence_lens shorter than the
// inputs are refused by name.
TEST(OnnxImportControl, ScanOfOpset8ScansEachBatchEntryAndDifferentiates) {
    ScratchDir dir;
    const fx::onnx::Model m = load(
        dir, "scan8.onnx", {"L", "S", "X"}, {"final", "rows"},
        [](G* g) {
            node(g, "Scan", {"L", "S", "X"}, {"final", "rows"});
            int_attribute(g, "num_scan_inputs", 1);
            G* body = graph_attribute(g, "body", {"s_in", "x_t"}, {"s_out", "y_t"});
            node(body, "Mul", {"s_in", "x_t"}, {"s_out"});
            node(body, "Identity", {"s_out"}, {"y_t"});
        },
        8);
    const fx::Tensor s = fx::randn({2, 3}), x = fx::randn({2, 4, 3});
    const fx::Tensor full = fx::tensor(std::vector<std::int64_t>{4, 4}, {2}).to(fx::DType::i32);
    const auto ys = m({full, s, x});
    ASSERT_EQ(ys[1].shape(), (fx::Shape{2, 4, 3}));
    for (int b = 0; b < 2; ++b) {
        fx::Tensor product = s.select(0, b);
        for (int t = 0; t < 4; ++t) product = product * x.select(0, b).select(0, t);
        EXPECT_LE(largest_difference(ys[0].select(0, b), product), 1e-5) << "entry " << b;
    }
    EXPECT_TRUE(gradcheck(
        [&](const fx::Tensor& a, const fx::Tensor& c) {
            return weighted_sum(m({full, a, c}));
        },
        s, x));
    const fx::Tensor shorter = fx::tensor(std::vector<std::int64_t>{4, 2}, {2}).to(fx::DType::i32);
    const std::string why = message_of([&] { (void)m({shorter, s, x}); });
    EXPECT_NE(why.find("(Scan, opset 8): sequence_lens shorter than the scan inputs' length"), std::string::npos)
        << why;
}

// Loop three times (trip count and condition constants): Y <- Y * X with X of the enclosing graph,
// each step's Y scanned out.
TEST(OnnxImportControl, LoopReadsTheEnclosingGraphAndDifferentiates) {
    ScratchDir dir;
    const fx::onnx::Model m = load(dir, "loop.onnx", {"Y", "X"}, {"last", "steps"}, [](G* g) {
        scalar(g, "three", ::onnx::TensorProto::INT64, 3);
        scalar(g, "yes", ::onnx::TensorProto::BOOL, 1);
        node(g, "Loop", {"three", "yes", "Y"}, {"last", "steps"});
        G* body = graph_attribute(g, "body", {"i", "cond_in", "y_in"}, {"cond_out", "y_out", "y_scan"});
        node(body, "Identity", {"cond_in"}, {"cond_out"});
        node(body, "Mul", {"y_in", "X"}, {"y_out"});
        node(body, "Identity", {"y_out"}, {"y_scan"});
    });
    const fx::Tensor y = fx::randn({2, 3}), x = fx::randn({2, 3});
    const auto ys = m({y, x});
    ASSERT_EQ(ys.size(), 2u);
    EXPECT_LE(largest_difference(ys[0], y * x * x * x), 1e-5);
    ASSERT_EQ(ys[1].shape(), (fx::Shape{3, 2, 3}));
    EXPECT_LE(largest_difference(ys[1].select(0, 1), y * x * x), 1e-5);
    EXPECT_TRUE(gradcheck([&](const fx::Tensor& a, const fx::Tensor& b) { return weighted_sum(m({a, b})); }, y, x));
}

// If: X + X where the condition holds, X * X where not, both branches reading X of the enclosing graph.
fx::onnx::Model if_model(const ScratchDir& dir) {
    return load(dir, "if.onnx", {"C", "X"}, {"Y"}, [](G* g) {
        node(g, "If", {"C"}, {"Y"});
        node(graph_attribute(g, "then_branch", {}, {"sum"}), "Add", {"X", "X"}, {"sum"});
        node(graph_attribute(g, "else_branch", {}, {"square"}), "Mul", {"X", "X"}, {"square"});
    });
}

TEST(OnnxImportControl, IfChoosesEachBranch) {
    ScratchDir dir;
    const fx::onnx::Model m = if_model(dir);
    const fx::Tensor x = fx::randn({4});
    const fx::Tensor yes = fx::tensor(std::vector<std::int64_t>{1}, {}).to(fx::DType::boolean);
    const fx::Tensor no = fx::tensor(std::vector<std::int64_t>{0}, {}).to(fx::DType::boolean);
    EXPECT_LE(largest_difference(m({yes, x})[0], x + x), 1e-6);
    EXPECT_LE(largest_difference(m({no, x})[0], x * x), 1e-6);
    EXPECT_TRUE(gradcheck([&](const fx::Tensor& a) { return weighted_sum(m({no, a})); }, x));
}

// A condition of the data: a compiled replay would repeat the first call's branch, so fx::compile
// refuses the model by name. A condition of constants compiles.
TEST(OnnxImportControl, CompileRefusesABranchOnData) {
    ScratchDir dir;
    // The condition: whether X's sum is not zero.
    const fx::onnx::Model m = load(dir, "if_data.onnx", {"X"}, {"Z"}, [](G* g) {
        node(g, "ReduceSum", {"X"}, {"s"});
        int_attribute(g, "keepdims", 0);
        node(g, "Cast", {"s"}, {"c"});
        int_attribute(g, "to", ::onnx::TensorProto::BOOL);
        node(g, "If", {"c"}, {"Y"});
        node(graph_attribute(g, "then_branch", {}, {"sum"}), "Add", {"X", "X"}, {"sum"});
        node(graph_attribute(g, "else_branch", {}, {"square"}), "Mul", {"X", "X"}, {"square"});
        node(g, "Relu", {"Y"}, {"Z"});
    });
    const fx::Tensor x = fx::randn({4});
    EXPECT_LE(largest_difference(m(x), fx::relu(x + x)), 1e-6);
    auto fwd = fx::compile(m);
    const std::string why = message_of([&] { (void)fwd(x); });
    EXPECT_NE(why.find("node 'the_node' (If, opset 17) reads its condition on the host"), std::string::npos) << why;

    const fx::onnx::Model constant = load(dir, "if_constant.onnx", {"X"}, {"Z"}, [](G* g) {
        scalar(g, "yes", ::onnx::TensorProto::BOOL, 1);
        node(g, "If", {"yes"}, {"Y"});
        node(graph_attribute(g, "then_branch", {}, {"sum"}), "Add", {"X", "X"}, {"sum"});
        node(graph_attribute(g, "else_branch", {}, {"square"}), "Mul", {"X", "X"}, {"square"});
        node(g, "Relu", {"Y"}, {"Z"});
    });
    auto fwd_constant = fx::compile(constant);
    for (int i = 0; i < 2; ++i) {
        const fx::Tensor x = fx::randn({4});
        EXPECT_LE(largest_difference(fwd_constant(x), fx::relu(x + x)), 1e-6);
    }
}

// A body reading a value nothing defines is refused at load, naming it.
TEST(OnnxImportControl, AnUndefinedOuterValueIsRefusedAtLoad) {
    ScratchDir dir;
    const std::string why = message_of([&] {
        (void)load(dir, "bad.onnx", {"C"}, {"Y"}, [](G* g) {
            node(g, "If", {"C"}, {"Y"});
            node(graph_attribute(g, "then_branch", {}, {"a"}), "Identity", {"nowhere"}, {"a"});
            node(graph_attribute(g, "else_branch", {}, {"b"}), "Identity", {"nowhere"}, {"b"});
        });
    });
    EXPECT_NE(why.find("(If, opset 17) reads 'nowhere', which nothing defines before it"), std::string::npos) << why;
}

// A Loop with neither a trip count nor a condition would never end: refused by name at its run.
TEST(OnnxImportControl, AnEndlessLoopIsRefused) {
    ScratchDir dir;
    const fx::onnx::Model m = load(dir, "endless.onnx", {"Y"}, {"last"}, [](G* g) {
        node(g, "Loop", {"", "", "Y"}, {"last"});
        G* body = graph_attribute(g, "body", {"i", "cond_in", "y_in"}, {"cond_out", "y_out"});
        node(body, "Identity", {"cond_in"}, {"cond_out"});
        node(body, "Identity", {"y_in"}, {"y_out"});
    });
    const std::string why = message_of([&] { (void)m(fx::randn({2})); });
    EXPECT_NE(why.find("node 'the_node' (Loop, opset 17): it has neither a trip count nor a condition"),
              std::string::npos)
        << why;
}
