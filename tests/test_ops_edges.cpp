// test_ops_edges.cpp — ops at the edges of their domain, where random differential testing
// against PyTorch found crashes or wrong answers (issue 15). The expected values are PyTorch 1.13's,
// quoted with the expression that gives them.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;

// torch.sum(torch.tensor(1.5), 0) == tensor(1.5), and likewise for dim -1 and keepdim=True; the
// gradient of the one element is 1 (and argmax/argmin give 0).
TEST(OpsEdges, ReducingA0dTensorAlongAxis0GivesItsValue) {
    for (int axis : {0, -1})
        for (bool keep : {false, true}) {
            SCOPED_TRACE("axis " + std::to_string(axis) + (keep ? ", keepdims" : ""));
            Tensor x = fx::scalar(1.5);
            for (const Tensor& r : {fx::sum(x, axis, keep), fx::mean(x, axis, keep), fx::max(x, axis, keep),
                                    fx::min(x, axis, keep), fx::logsumexp(x, axis, keep)}) {
                EXPECT_EQ(r.ndim(), 0);
                EXPECT_EQ(r.item(), 1.5);
            }
            for (const Tensor& r : {fx::argmax(x, axis, keep), fx::argmin(x, axis, keep)}) {
                EXPECT_EQ(r.ndim(), 0);
                EXPECT_EQ(r.dtype(), fx::DType::i64);
                EXPECT_EQ(r.item(), 0.0);
            }
            auto [g] = fx::gradient(
                [&](const Tensor& a) {
                    return fx::sum(a, axis, keep) + fx::mean(a, axis, keep) + fx::max(a, axis, keep) +
                           fx::min(a, axis, keep) + fx::logsumexp(a, axis, keep);
                },
                x);
            EXPECT_EQ(g.ndim(), 0);
            EXPECT_DOUBLE_EQ(g.item(), 5.0);
        }
}

TEST(OpsEdges, AnyOtherAxisOfA0dTensorIsAClearError) {
    Tensor x = fx::scalar(1.5);
    for (int axis : {1, -2}) {
        EXPECT_THROW(fx::sum(x, axis), fx::ValueError);
        EXPECT_THROW(fx::argmin(x, axis), fx::ValueError);
        EXPECT_THROW(fx::logsumexp(x, axis), fx::ValueError);
    }
    try {
        fx::max(x, 1);
        FAIL() << "max(x, 1) of a 0-d tensor did not throw";
    } catch (const fx::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("max: axis 1 is out of range for a tensor with 0 dimension(s)"),
                  std::string::npos)
            << e.what();
    }
    // Axes that do not exist on a 0-d tensor for ops that index along them.
    EXPECT_THROW(x.shape(0), fx::ValueError);
    EXPECT_THROW(x.select(0, 0), fx::ValueError);
    EXPECT_THROW(x.slice(0, 0, 1), fx::ValueError);
    EXPECT_THROW(fx::concat({x, x}, 0), fx::ValueError);
    // torch.softmax(torch.tensor(1.5), -1) == tensor(1.)
    EXPECT_EQ(fx::softmax(x, -1).item(), 1.0);
    EXPECT_EQ(fx::logsoftmax(x, 0).item(), 0.0);
}
