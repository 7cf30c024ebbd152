// load.cpp — reading an ONNX model into fx::onnx::Model and running its graph: initialisers become
// tensors, nodes are checked against the operator table once, and a run walks the nodes in order,
// dropping each value after its last use.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>

#include "core/compile/recorder.hpp"
#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

[[noreturn]] void corrupt(const std::string& file, const std::string& why) {
    throw IOError("fx::onnx::load: " + file + " is not a well-formed ONNX model (corrupt or truncated?): " + why);
}

}  // namespace

DType dtype_of_onnx(int type, const std::string& what) {
    using P = ::onnx::TensorProto;
    switch (type) {
        case P::FLOAT: return DType::f32;
        case P::DOUBLE: return DType::f64;
        case P::FLOAT16: return DType::f16;
        case P::BFLOAT16: return DType::bf16;
        case P::INT64:
        case P::UINT32: return DType::i64;
        case P::INT32:
        case P::INT16:
        case P::INT8:
        case P::UINT16: return DType::i32;
        case P::UINT8: return DType::u8;
        case P::BOOL: return DType::boolean;
        default:
            throw DTypeError("fx::onnx: " + what + " has ONNX element type " +
                             (P::DataType_IsValid(type) ? P::DataType_Name(P::DataType(type)) : std::to_string(type)) +
                             ", which fluxion has no type for");
    }
}

namespace {

template <class T, class Field> Tensor from_field(const Field& field, const Shape& shape, DType dtype) {
    std::vector<T> v(field.begin(), field.end());
    return tensor(v, shape).to(dtype);
}

// Raw little-endian bytes of ONNX type `type` as a tensor of `dtype`.
Tensor from_raw(const std::string& raw, int type, const Shape& shape, DType dtype, const std::string& what) {
    using P = ::onnx::TensorProto;
    const std::int64_t n = numel(shape);
    auto widen = [&]<class T>(T) {
        if (raw.size() != std::size_t(n) * sizeof(T)) corrupt(what, "raw data of the wrong size");
        std::vector<T> v(static_cast<std::size_t>(n));
        if (n > 0) std::memcpy(v.data(), raw.data(), raw.size());
        std::vector<std::int64_t> w(v.begin(), v.end());
        return tensor(w, shape).to(dtype);
    };
    switch (type) {
        case P::INT8: return widen(std::int8_t{});
        case P::INT16: return widen(std::int16_t{});
        case P::UINT16: return widen(std::uint16_t{});
        case P::UINT32: return widen(std::uint32_t{});
        default: break;
    }
    Tensor t = empty(shape, {.dtype = dtype});
    if (raw.size() != std::size_t(n) * itemsize(dtype)) corrupt(what, "raw data of the wrong size");
    if (n > 0) std::memcpy(t.data_ptr(), raw.data(), raw.size());
    return t;
}

}  // namespace

Tensor tensor_from_proto(const ::onnx::TensorProto& p, const std::string& what) {
    using P = ::onnx::TensorProto;
    if (p.data_location() == P::EXTERNAL)
        throw IOError("fx::onnx::load: " + what + " keeps its data in an external file, which fluxion does not read");
    Shape shape(p.dims().begin(), p.dims().end());
    for (auto d : shape)
        if (d < 0) corrupt(what, "a negative dimension");
    const DType dtype = dtype_of_onnx(p.data_type(), what);
    if (p.has_raw_data()) return from_raw(p.raw_data(), p.data_type(), shape, dtype, what);
    const std::int64_t n = numel(shape);
    auto check = [&](int size) {
        if (size != n) corrupt(what, "holds " + std::to_string(size) + " values for shape " + to_string(shape));
    };
    switch (p.data_type()) {
        case P::FLOAT: check(p.float_data_size()); return from_field<float>(p.float_data(), shape, dtype);
        case P::DOUBLE: check(p.double_data_size()); return from_field<double>(p.double_data(), shape, dtype);
        case P::INT64: check(p.int64_data_size()); return from_field<std::int64_t>(p.int64_data(), shape, dtype);
        case P::UINT32: check(p.uint64_data_size()); return from_field<std::int64_t>(p.uint64_data(), shape, dtype);
        case P::FLOAT16:
        case P::BFLOAT16: {  // 16 bits in each int32
            check(p.int32_data_size());
            Tensor t = empty(shape, {.dtype = dtype});
            auto* out = t.data<std::uint16_t>();
            for (int i = 0; i < n; ++i) out[i] = static_cast<std::uint16_t>(p.int32_data(i));
            return t;
        }
        default: check(p.int32_data_size()); return from_field<std::int64_t>(p.int32_data(), shape, dtype);
    }
}

std::vector<std::int64_t> host_ints(const Tensor& t) { return t.to_vector<std::int64_t>(); }

int axis_of(std::int64_t axis, int rank, const Node& n) {
    if (axis < -rank || axis >= std::max(rank, 1))
        throw ValueError("fx::onnx: " + n.label() + ": axis " + std::to_string(axis) + " is out of range for rank " +
                         std::to_string(rank));
    return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// ---- Node ----
Node::Node(::onnx::NodeProto proto, std::int64_t opset, std::size_t index)
    : proto_(std::move(proto)), opset_(opset), index_(index) {}

std::string Node::label() const {
    // Appended piece by piece: GCC 12 warns of a memcpy overlap in "#" + std::to_string(...) that
    // is not there.
    std::string label = "node ";
    if (proto_.name().empty()) (label += '#') += std::to_string(index_);
    else ((label += '\'') += proto_.name()) += '\'';
    return label + " (" + op() + ", opset " + std::to_string(opset_) + ")";
}

std::size_t Node::outputs() const {
    std::size_t n = 0;
    for (int i = 0; i < proto_.output_size(); ++i)
        if (!proto_.output(i).empty()) n = std::size_t(i) + 1;
    return n;
}

const ::onnx::AttributeProto* Node::find(const char* attribute) const {
    for (const auto& a : proto_.attribute())
        if (a.name() == attribute) return &a;
    return nullptr;
}
bool Node::has(const char* attribute) const { return find(attribute) != nullptr; }
std::int64_t Node::i(const char* attribute, std::int64_t otherwise) const {
    const auto* a = find(attribute);
    return a ? a->i() : otherwise;
}
float Node::f(const char* attribute, float otherwise) const {
    const auto* a = find(attribute);
    return a ? a->f() : otherwise;
}
std::string Node::s(const char* attribute, const std::string& otherwise) const {
    const auto* a = find(attribute);
    return a ? a->s() : otherwise;
}
std::vector<std::int64_t> Node::ints(const char* attribute, std::vector<std::int64_t> otherwise) const {
    const auto* a = find(attribute);
    return a ? std::vector<std::int64_t>(a->ints().begin(), a->ints().end()) : otherwise;
}
Tensor Node::t(const char* attribute) const {
    const auto* a = find(attribute);
    if (!a) unsupported(std::string("the attribute ") + attribute + " is missing");
    return tensor_from_proto(a->t(), label() + "'s " + attribute);
}

void Node::read_outer(const std::vector<std::string>& names) {
    for (const auto& x : names) proto_.add_input(x);
    outer_ = names.size();
}

void Node::unsupported(const std::string& what) const { throw Error("fx::onnx: " + label() + ": " + what); }

Operator find_operator(const std::string& op) {
    static const std::map<std::string, Operator> table = [] {
        std::map<std::string, Operator> t;
        add_elementwise_operators(t);
        add_nn_operators(t);
        add_shape_operators(t);
        add_recurrent_operators(t);
        add_resize_operators(t);
        add_sampling_operators(t);
        add_signal_operators(t);
        add_math_operators(t);
        add_loss_operators(t);
        add_indexing_operators(t);
        add_scan_operators(t);
        add_einsum_operators(t);
        add_attention_operators(t);
        add_modulo_operators(t);
        add_normalization_operators(t);
        add_transformer_operators(t);
        add_linear_attention_operators(t);
        add_control_operators(t);
        add_quantization_operators(t);
        add_mel_operators(t);
        add_tensor_scatter_operators(t);
        add_training_operators(t);
        add_detection_operators(t);
        add_misc_operators(t);
        return t;
    }();
    const auto it = table.find(op);
    return it == table.end() ? nullptr : it->second;
}

namespace {
// Whether the node running on this thread reads only values fixed by the graph's constants and its
// inputs' shapes (set by Model::operator() around each node).
thread_local bool t_inputs_fixed = false;
}  // namespace

void values_read_on_host(const Node& n, const std::string& what) {
    if (!t_inputs_fixed)
        fluxion::detail::refuse_replay("fx::onnx: " + n.label() + " reads " + what +
                                       " on the host, which a compiled step's replay would not read again; run the "
                                       "model eagerly");
}

bool reads_host_arguments(const std::string& op) {
    static const std::set<std::string> ops = {
        "Reshape",    "Slice",    "Squeeze",    "Unsqueeze",       "Expand",          "Tile",
        "Pad",        "Clip",     "ReduceMean", "ReduceSum",       "ReduceMax",       "ReduceMin",
        "ReduceProd", "ReduceL1", "ReduceL2",   "ReduceSumSquare", "ReduceLogSumExp", "ConstantOfShape",
        "Range",      "Split",    "Gather",     "ReduceLogSum",    "Resize",          "Upsample",
        "DFT",        "STFT"};
    return ops.count(op) > 0;
}

namespace {

// The opset of the default domain; other domains' nodes are refused by name.
std::int64_t default_opset(const ::onnx::ModelProto& m) {
    for (const auto& o : m.opset_import())
        if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
    return 1;  // none imported (IR version 1, or only other domains, whose nodes are refused by name)
}

// Moves tensors that are on the host to the device of the first tensor that is not, so that data
// made by host-side shape arithmetic (ConstantOfShape, Range) meets the model's device.
void to_common_device(std::vector<Tensor>& xs, bool first_only) {
    const Tensor* on_device = nullptr;
    for (const auto& x : xs)
        if (x.defined() && !x.device().is_cpu()) on_device = &x;
    if (!on_device) return;
    const Device d = on_device->device();
    for (std::size_t i = 0; i < xs.size() && (!first_only || i == 0); ++i)
        if (xs[i].defined() && xs[i].device().is_cpu()) xs[i] = xs[i].to(d);
}

}  // namespace

}  // namespace fluxion::onnx::detail

namespace fluxion::onnx {

using detail::Program;

Tensor load_tensor(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IOError("fx::onnx::load_tensor: cannot open " + path.string());
    ::onnx::TensorProto p;
    if (!p.ParseFromIstream(&in)) throw IOError("fx::onnx::load_tensor: " + path.string() + " is not an ONNX tensor");
    return detail::tensor_from_proto(p, path.string());
}

namespace detail {

std::vector<std::string> outer_names(const ::onnx::GraphProto& g) {
    std::set<std::string> own, read;
    for (const auto& v : g.input()) own.insert(v.name());
    for (const auto& v : g.initializer()) own.insert(v.name());
    for (const auto& n : g.node()) {
        for (const auto& y : n.output()) own.insert(y);
        for (const auto& x : n.input())
            if (!x.empty()) read.insert(x);
        for (const auto& a : n.attribute()) {
            if (a.has_g())
                for (const auto& x : outer_names(a.g())) read.insert(x);
            for (const auto& body : a.graphs())
                for (const auto& x : outer_names(body)) read.insert(x);
        }
    }
    std::vector<std::string> names;
    std::set_difference(read.begin(), read.end(), own.begin(), own.end(), std::back_inserter(names));
    return names;
}

Model subgraph(const ::onnx::GraphProto& g, std::int64_t opset, const std::string& file,
               const std::vector<std::string>& outer) {
    Model m;
    auto program = std::make_shared<Program>();
    program->file = file;
    std::set<std::string> defined;
    for (const auto& init : g.initializer()) {
        Tensor t = detail::tensor_from_proto(init, file + "'s initialiser '" + init.name() + "'");
        if (is_floating(t.dtype())) m.initializers[init.name()] = t;
        else program->host_constants[init.name()] = t;
        defined.insert(init.name());
    }
    for (const auto& v : g.input())
        if (!defined.count(v.name())) program->inputs.push_back(v.name());
    program->inputs.insert(program->inputs.end(), outer.begin(), outer.end());
    for (const auto& v : program->inputs) defined.insert(v);

    std::map<std::string, int> declared;  // the element types the graph declares
    for (const auto& init : g.initializer()) declared[init.name()] = init.data_type();
    for (const auto* values : {&g.input(), &g.value_info()})
        for (const auto& v : *values)
            if (v.type().has_tensor_type()) declared[v.name()] = v.type().tensor_type().elem_type();

    std::map<std::string, std::size_t> last_use;
    for (int k = 0; k < g.node_size(); ++k) {
        const auto& n = g.node(k);
        detail::Node node(n, opset, std::size_t(k));
        std::vector<int> types;
        for (const auto& x : n.input()) types.push_back(declared.count(x) ? declared.at(x) : 0);
        node.declare_types(std::move(types));
        // Control flow's graphs read the enclosing graph's values by name: they become the node's
        // inputs too, so that they are checked, kept alive and passed like any other.
        if (n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan") {
            std::set<std::string> names;
            for (const auto& a : n.attribute())
                if (a.has_g())
                    for (const auto& x : outer_names(a.g())) names.insert(x);
            node.read_outer({names.begin(), names.end()});
        }
        // Of the preview domains, FlexAttention and the training optimisers, under their domain's name
        // (they are no default-domain operators).
        const bool preview = n.domain() == "ai.onnx.preview" || n.domain() == "ai.onnx.preview.training";
        const std::string op = preview ? n.domain() + "." + n.op_type() : n.op_type();
        if ((!n.domain().empty() && n.domain() != "ai.onnx" && !preview) || (preview && !detail::find_operator(op)))
            throw Error("fx::onnx::load: " + file + ": " + node.label() + " is in the domain '" + n.domain() +
                        "', and fluxion implements only ONNX's default domain (and ai.onnx.preview's FlexAttention) "
                        "and ai.onnx.preview.training's Adagrad, Momentum and Adam");
        for (const auto& x : node.proto().input()) {
            if (x.empty()) continue;
            if (!defined.count(x))
                detail::corrupt(file, node.label() + " reads '" + x + "', which nothing defines before it");
            last_use[x] = program->steps.size();
        }
        const detail::Operator run = detail::find_operator(op);
        if (!run)
            throw Error("fx::onnx::load: " + file + ": " + node.label() + " is an operator fluxion does not implement");
        if (n.op_type() == "Constant") {  // its value is known now: held as a constant
            const Tensor c = run(node, {})[0];
            if (is_floating(c.dtype())) m.constants[n.output(0)] = c;
            else program->host_constants[n.output(0)] = c;
            defined.insert(n.output(0));
            continue;
        }
        for (const auto& y : n.output())
            if (!y.empty()) defined.insert(y);
        program->steps.push_back({std::move(node), run, {}});
    }
    // BatchNormalization's running mean and variance are state, not parameters (as BatchNorm's).
    for (const auto& step : program->steps) {
        if (step.node.op() != "BatchNormalization") continue;
        for (int i = 3; i < 5 && i < step.node.proto().input_size(); ++i)
            if (auto it = m.initializers.find(step.node.proto().input(i)); it != m.initializers.end())
                m.statistics.insert(m.initializers.extract(it));
    }
    for (const auto& v : g.output()) {
        if (!defined.count(v.name())) detail::corrupt(file, "the output '" + v.name() + "' is never computed");
        program->outputs.push_back(v.name());
        last_use.erase(v.name());
    }
    for (const auto& [name, step] : last_use)
        if (!m.initializers.count(name) && !m.statistics.count(name) && !m.constants.count(name) &&
            !program->host_constants.count(name))
            program->steps[step].frees.push_back(name);
    m.program = std::move(program);
    return m;
}

}  // namespace detail

Model load(const std::filesystem::path& path) {
    const std::string file = path.string();
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IOError("fx::onnx::load: cannot open " + file);
    ::onnx::ModelProto proto;
    if (!proto.ParseFromIstream(&in)) detail::corrupt(file, "its protocol buffer does not parse");
    if (!proto.has_graph()) detail::corrupt(file, "it has no graph");
    return detail::subgraph(proto.graph(), detail::default_opset(proto), file);
}

const std::vector<std::string>& Model::input_names() const { return program->inputs; }
const std::vector<std::string>& Model::output_names() const { return program->outputs; }

std::vector<Tensor> Model::operator()(const std::vector<Tensor>& inputs) const {
    const Program& p = *program;
    if (inputs.size() != p.inputs.size())
        throw ValueError("fx::onnx::Model (" + p.file + "): given " + std::to_string(inputs.size()) +
                         " inputs; the graph takes " + std::to_string(p.inputs.size()));
    std::map<std::string, Tensor> values;
    for (std::size_t i = 0; i < inputs.size(); ++i) values[p.inputs[i]] = inputs[i];
    // Values fixed by the graph's constants and the inputs' shapes alone (shape arithmetic), which
    // a compiled replay may take as traced: for values_read_on_host.
    std::set<std::string> fixed;
    auto is_fixed = [&](const std::string& name) {
        return name.empty() || fixed.count(name) || p.host_constants.count(name) || constants.count(name);
    };
    auto value = [&](const std::string& name) -> Tensor {
        if (name.empty()) return {};
        if (auto it = values.find(name); it != values.end()) return it->second;
        if (auto it = initializers.find(name); it != initializers.end()) return it->second;
        if (auto it = statistics.find(name); it != statistics.end()) return it->second.detach();  // no gradient
        if (auto it = constants.find(name); it != constants.end()) return it->second;
        return p.host_constants.at(name);
    };
    for (const auto& step : p.steps) {
        const auto& proto = step.node.proto();
        std::vector<Tensor> xs;
        for (const auto& x : proto.input()) xs.push_back(value(x));
        detail::to_common_device(xs, detail::reads_host_arguments(step.node.op()));
        const bool shape_only = step.node.op() == "Shape" || step.node.op() == "Size";
        // Kept here too: a node that runs a graph of its own (FlexAttention's score_mod) sets the flag
        // for that graph's nodes.
        const bool inputs_fixed = shape_only || std::all_of(proto.input().begin(), proto.input().end(), is_fixed);
        // If decides on its condition alone; its branches' values are data like any other.
        detail::t_inputs_fixed = step.node.op() == "If" ? is_fixed(proto.input(0)) : inputs_fixed;
        std::vector<Tensor> ys = step.run(step.node, xs);
        if (inputs_fixed)
            for (const auto& y : proto.output()) fixed.insert(y);
        for (int i = 0; i < proto.output_size(); ++i) {
            if (proto.output(i).empty()) continue;
            if (std::size_t(i) >= ys.size() || !ys[std::size_t(i)].defined())
                step.node.unsupported("its output " + std::to_string(i) + " ('" + proto.output(i) +
                                      "') is not computed by fluxion");
            values[proto.output(i)] = ys[std::size_t(i)];
        }
        for (const auto& name : step.frees) values.erase(name);
    }
    // Outputs made on the host (Shape, Size, Range, integer Div) join the model's device: that of
    // its inputs, else of its parameters, as every other output is.
    std::optional<Device> device;
    for (const auto& x : inputs)
        if (!device && x.defined() && !x.device().is_cpu()) device = x.device();
    for (const auto* held : {&initializers, &statistics, &constants})
        for (const auto& [name, t] : *held)
            if (!device && !t.device().is_cpu()) device = t.device();
    std::vector<Tensor> out;
    for (const auto& name : p.outputs) {
        Tensor y = value(name);
        out.push_back(device && y.defined() && y.device().is_cpu() ? y.to(*device) : y);
    }
    return out;
}

Tensor Model::operator()(const Tensor& x) const {
    if (program->inputs.size() != 1 || program->outputs.size() != 1)
        throw ValueError("fx::onnx::Model (" + program->file + "): the graph takes " +
                         std::to_string(program->inputs.size()) + " inputs and gives " +
                         std::to_string(program->outputs.size()) + " outputs; call it on a std::vector of tensors");
    return (*this)(std::vector<Tensor>{x})[0];
}

}  // namespace fluxion::onnx
