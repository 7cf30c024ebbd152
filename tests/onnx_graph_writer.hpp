// onnx_graph_writer.hpp — small ONNX graphs for the import tests, written with ONNX's own protocol
// buffers: inputs, initialisers, nodes with attributes, outputs; then a file fx::onnx::load reads.
//
//   fx_test::GraphWriter g(22);
//   auto& n = g.input("X").node("LpPool", {"X"}, {"Y"});
//   fx_test::set(n, "kernel_shape", std::vector<std::int64_t>{2, 2});
//   const fx::onnx::Model m = g.output("Y").load(dir / "lp.onnx");
#pragma once
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace fx_test {

class GraphWriter {
public:
    explicit GraphWriter(std::int64_t opset, std::int64_t ir_version = 8) {
        m_.set_ir_version(ir_version);
        auto* o = m_.add_opset_import();
        o->set_domain("");
        o->set_version(opset);
        m_.mutable_graph()->set_name("graph");
    }
    // Imports another domain's operators (ai.onnx.preview.training, ...).
    GraphWriter& domain(const std::string& name, std::int64_t version = 1) {
        auto* o = m_.add_opset_import();
        o->set_domain(name);
        o->set_version(version);
        return *this;
    }
    GraphWriter& input(const std::string& name, int type = ::onnx::TensorProto::FLOAT) {
        auto* v = m_.mutable_graph()->add_input();
        v->set_name(name);
        v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
        return *this;
    }
    // Initialisers of shape `shape` ({n} when empty).
    GraphWriter& initializer(const std::string& name, const std::vector<float>& values, fluxion::Shape shape = {}) {
        auto* t = add_initializer(name, ::onnx::TensorProto::FLOAT, shape, values.size());
        for (float v : values) t->add_float_data(v);
        return *this;
    }
    GraphWriter& initializer_i64(const std::string& name, const std::vector<std::int64_t>& values,
                                 fluxion::Shape shape = {}) {
        auto* t = add_initializer(name, ::onnx::TensorProto::INT64, shape, values.size());
        for (auto v : values) t->add_int64_data(v);
        return *this;
    }
    GraphWriter& initializer_bool(const std::string& name, const std::vector<bool>& values,
                                  fluxion::Shape shape = {}) {
        auto* t = add_initializer(name, ::onnx::TensorProto::BOOL, shape, values.size());
        for (bool v : values) t->add_int32_data(v);
        return *this;
    }
    // Values of any element type, given as doubles: ONNX keeps FLOAT in float_data, INT64 in
    // int64_data, and the narrower integers and BOOL in int32_data.
    GraphWriter& initializer(const std::string& name, int type, const std::vector<double>& values,
                             fluxion::Shape shape = {}) {
        auto* t = add_initializer(name, type, shape, values.size());
        for (double v : values) add_value(t, type, v);
        return *this;
    }
    // A 0-d initialiser of any element type.
    GraphWriter& scalar(const std::string& name, int type, double value) {
        auto* t = m_.mutable_graph()->add_initializer();
        t->set_name(name);
        t->set_data_type(type);
        add_value(t, type, value);
        return *this;
    }
    ::onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& in,
                            const std::vector<std::string>& out, const std::string& domain = "") {
        auto* n = m_.mutable_graph()->add_node();
        n->set_op_type(op);
        n->set_domain(domain);
        std::string name = "n";  // not "n" + ...: GCC 12 then warns of a memcpy overlap that is not there
        name += std::to_string(m_.graph().node_size());
        n->set_name(name);
        for (const auto& s : in) n->add_input(s);
        for (const auto& s : out) n->add_output(s);
        return *n;
    }
    GraphWriter& output(const std::string& name) {
        m_.mutable_graph()->add_output()->set_name(name);
        return *this;
    }
    ::onnx::ModelProto& proto() { return m_; }
    void write(const std::filesystem::path& path) const {
        std::ofstream out(path, std::ios::binary);
        ASSERT_TRUE(m_.SerializeToOstream(&out)) << path;
    }
    fluxion::onnx::Model load(const std::filesystem::path& path) const {
        write(path);
        return fluxion::onnx::load(path);
    }

private:
    static void add_value(::onnx::TensorProto* t, int type, double v) {
        if (type == ::onnx::TensorProto::FLOAT) t->add_float_data(float(v));
        else if (type == ::onnx::TensorProto::INT64) t->add_int64_data(std::int64_t(v));
        else t->add_int32_data(std::int32_t(v));
    }
    ::onnx::TensorProto* add_initializer(const std::string& name, int type, const fluxion::Shape& shape,
                                         std::size_t count) {
        auto* t = m_.mutable_graph()->add_initializer();
        t->set_name(name);
        t->set_data_type(type);
        if (shape.empty()) t->add_dims(std::int64_t(count));
        for (auto d : shape) t->add_dims(d);
        return t;
    }
    ::onnx::ModelProto m_;
};

// A node's attribute, by the C++ type of its value.
inline void set(::onnx::NodeProto& n, const std::string& name, std::int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(::onnx::AttributeProto::INT), a->set_i(v);
}
inline void set(::onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(::onnx::AttributeProto::FLOAT), a->set_f(v);
}
inline void set(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(::onnx::AttributeProto::STRING), a->set_s(v);
}
inline void set(::onnx::NodeProto& n, const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(::onnx::AttributeProto::INTS);
    for (auto e : v) a->add_ints(e);
}
inline void set(::onnx::NodeProto& n, const std::string& name, const ::onnx::GraphProto& g) {
    auto* a = n.add_attribute();
    a->set_name(name), a->set_type(::onnx::AttributeProto::GRAPH);
    *a->mutable_g() = g;
}

// An attribute of write_node's node: an integer, or a string where `s` is not empty.
struct Attribute {
    std::string name;
    std::int64_t i = 0;
    std::string s = {};
};

// A graph of one node `op`, named "the_node" (opset 22), on the named inputs of the given element
// types, giving `outputs`.
inline void write_node(const std::filesystem::path& path, const std::string& op,
                       const std::vector<std::pair<std::string, int>>& inputs, const std::vector<std::string>& outputs,
                       const std::vector<Attribute>& attributes = {}) {
    GraphWriter g(22);
    std::vector<std::string> names;
    for (const auto& [name, type] : inputs) g.input(name, type), names.push_back(name);
    auto& n = g.node(op, names, outputs);
    n.set_name("the_node");  // named in the refusals' messages
    for (const auto& y : outputs) g.output(y);
    for (const auto& a : attributes) {
        if (a.s.empty()) set(n, a.name, a.i);
        else set(n, a.name, a.s);
    }
    g.write(path);
}

// A scalar of every output, each weighted by a fixed pattern, so that no gradient through an
// imported graph is symmetric by luck.
inline fluxion::Tensor weighted_sum(const std::vector<fluxion::Tensor>& ys) {
    fluxion::Tensor total;
    for (const auto& y : ys) {
        const fluxion::Tensor w =
            fluxion::sin(fluxion::arange(0, double(y.numel()), 1, {.dtype = y.dtype()}) * 0.7 + 0.3).reshape(y.shape());
        const fluxion::Tensor s = fluxion::sum(y * w);
        total = total.defined() ? total + s : s;
    }
    return total;
}

// The message of the fx::Error that f throws, or "no error".
inline std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const fluxion::Error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace fx_test
