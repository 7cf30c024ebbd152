// graph.cpp — building and writing the ONNX model: names, initialisers, the graph's input and
// output with their dynamic batch axis, and ONNX's checker before the file is written.
#include "core/onnx/graph.hpp"

#include <cxxabi.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cstdlib>
#include <memory>

#include "core/io/atomic_file.hpp"

namespace fluxion::onnx::detail {
namespace {

void set_type(::onnx::ValueInfoProto& v, const std::string& name, const Shape& shape, int batch_axis) {
    v.set_name(name);
    auto* t = v.mutable_type()->mutable_tensor_type();
    t->set_elem_type(::onnx::TensorProto::FLOAT);
    auto* s = t->mutable_shape();
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (static_cast<int>(i) == batch_axis) s->add_dim()->set_dim_param("batch");
        else s->add_dim()->set_dim_value(shape[i]);
    }
}

}  // namespace

std::string join(const std::string& path, const std::string& name) { return path.empty() ? name : path + "." + name; }

std::string Graph::unique(const std::string& name) {
    const int n = taken_[name]++;
    return n == 0 ? name : name + "_" + std::to_string(n);
}

::onnx::NodeProto* Graph::add_node(const std::string& op, const std::vector<std::string>& inputs,
                                   const std::string& name, int rank) {
    ::onnx::NodeProto* n = graph->add_node();
    n->set_op_type(op);
    n->set_name(unique(name));
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(n->name());
    ranks[n->name()] = rank;
    return n;
}

std::vector<std::int64_t> Graph::inferred_shape(const std::string& value) const {
    ::onnx::ModelProto m;
    m.set_ir_version(model.ir_version());
    *m.mutable_opset_import() = model.opset_import();
    ::onnx::GraphProto* g = m.mutable_graph();
    *g->mutable_input() = graph->input();
    *g->mutable_node() = graph->node();
    for (const auto& t : graph->initializer()) {  // the weights' shapes without their values, which inference never reads
        ::onnx::TensorProto* c = g->add_initializer();
        if (t.data_type() != ::onnx::TensorProto::FLOAT || t.raw_data().size() <= 16) {
            *c = t;  // shapes, axes and Resize's scales: read by Reshape's and Resize's inference
            continue;
        }
        c->set_name(t.name());
        c->set_data_type(t.data_type());
        *c->mutable_dims() = t.dims();
    }
    ::onnx::shape_inference::InferShapes(m);
    auto dims = [](const ::onnx::ValueInfoProto& v) {
        std::vector<std::int64_t> d;
        for (const auto& dim : v.type().tensor_type().shape().dim()) d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
        return d;
    };
    for (const auto& v : g->value_info())
        if (v.name() == value) return dims(v);
    for (const auto& v : g->input())
        if (v.name() == value) return dims(v);
    return std::vector<std::int64_t>(std::size_t(rank(value)), -1);
}

std::string Graph::initializer(const Tensor& t, const std::string& name) {
    if (t.dtype() != DType::f32)
        throw DTypeError("fx::onnx::save: " + name + " is " + std::string(fluxion::name(t.dtype())) + "; the export writes f32 models");
    return initializer(t.to_vector<float>(), t.shape(), name);
}

std::string Graph::initializer(const std::vector<float>& values, const std::vector<std::int64_t>& dims,
                               const std::string& name) {
    ::onnx::TensorProto* p = graph->add_initializer();
    p->set_name(unique(name));
    p->set_data_type(::onnx::TensorProto::FLOAT);
    for (auto d : dims) p->add_dims(d);
    p->set_raw_data(values.data(), values.size() * sizeof(float));  // little-endian, as ONNX stores it
    ranks[p->name()] = static_cast<int>(dims.size());
    return p->name();
}

std::string Graph::initializer_i64(const std::vector<std::int64_t>& values, const std::vector<std::int64_t>& dims,
                                   const std::string& name) {
    ::onnx::TensorProto* p = graph->add_initializer();
    p->set_name(unique(name));
    p->set_data_type(::onnx::TensorProto::INT64);
    for (auto d : dims) p->add_dims(d);
    for (auto v : values) p->add_int64_data(v);
    ranks[p->name()] = static_cast<int>(dims.size());
    return p->name();
}

void attribute(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
}

void attribute(::onnx::NodeProto& n, const std::string& name, std::int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
}

void attribute(::onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
}

void attribute(::onnx::NodeProto& n, const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
}

std::shared_ptr<Graph> new_graph(const Tensor& example_input) {
    if (!example_input.defined()) throw ValueError("fx::onnx::save: the example input is an empty tensor");
    if (example_input.dtype() != DType::f32)
        throw DTypeError("fx::onnx::save: the example input is " + std::string(name(example_input.dtype())) +
                         "; the export writes f32 models");
    if (example_input.ndim() < 2)
        throw ShapeError("fx::onnx::save: the example input has shape " + to_string(example_input.shape()) +
                         "; expected a batch {N, ...} (its first axis becomes the dynamic batch axis)");
    auto g = std::make_shared<Graph>();
    g->model.set_ir_version(8);  // ONNX 1.10+, opset 15-17
    g->model.set_producer_name("fluxion");
    auto* opset = g->model.add_opset_import();
    opset->set_domain("");
    opset->set_version(kOpset);
    g->graph = g->model.mutable_graph();
    g->graph->set_name("fluxion");
    set_type(*g->graph->add_input(), "input", example_input.shape(), 0);
    g->ranks["input"] = example_input.ndim();
    return g;
}

const std::string& input_name(const Graph&) {
    static const std::string name = "input";
    return name;
}

void write(Graph& g, const std::vector<Output>& outputs, const std::filesystem::path& path) {
    for (const auto& o : outputs) {
        if (!o.example.defined() || o.example.ndim() <= o.batch_axis)
            throw ShapeError("fx::onnx::save: the model's output " + o.name + " has no batch axis");
        // Each output gets its own name through an Identity.
        const std::string y = g.node("Identity", {o.value}, o.name, o.example.ndim());
        if (y != o.name)
            throw ValueError("fx::onnx::save: a layer path is named \"" + o.name + "\"; the graph's output needs it");
        set_type(*g.graph->add_output(), y, o.example.shape(), o.batch_axis);
    }
    try {
        ::onnx::checker::check_model(g.model);
    } catch (const std::exception& e) {
        throw Error(std::string("fx::onnx::save: ONNX's checker refuses the graph: ") + e.what());
    }
    std::string bytes;
    if (!g.model.SerializeToString(&bytes))
        throw Error("fx::onnx::save: the model is too large for one ONNX file (2 GiB)");
    fluxion::detail::AtomicFile file(path, "fx::onnx::save");
    file.write(bytes.data(), bytes.size());
    file.commit();
}

void unsupported(const std::type_info& type, const std::string& path) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
    throw Error(std::string("fx::onnx::save: ") + (status == 0 ? name.get() : type.name()) + " at " +
                (path.empty() ? "the model's root" : "'" + path + "'") + " has no ONNX export");
}

}  // namespace fluxion::onnx::detail
