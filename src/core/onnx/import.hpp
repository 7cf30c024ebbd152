// import.hpp — fx::onnx::load's graph (include/fluxion/onnx.hpp): the nodes in their order, each
// with the operator that runs it, and the table of operators (src/core/onnx/operators_*.cpp).
#pragma once
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fluxion/onnx.hpp"

namespace fluxion::onnx::detail {

// One node as an operator sees it: its attributes, and errors that name it.
class Node {
public:
    Node(::onnx::NodeProto proto, std::int64_t opset, std::size_t index);

    const std::string& op() const { return proto_.op_type(); }
    std::int64_t opset() const { return opset_; }
    std::string label() const;    // "node 'conv1' (Conv, opset 17)"
    std::size_t outputs() const;  // how many of its outputs the graph names

    bool has(const char* attribute) const;
    std::int64_t i(const char* attribute, std::int64_t otherwise) const;
    float f(const char* attribute, float otherwise) const;
    std::string s(const char* attribute, const std::string& otherwise) const;
    std::vector<std::int64_t> ints(const char* attribute, std::vector<std::int64_t> otherwise = {}) const;
    Tensor t(const char* attribute) const;  // a tensor attribute, on the CPU

    // fx::Error: "fx::onnx: node 'conv1' (Conv, opset 17): <what>".
    [[noreturn]] void unsupported(const std::string& what) const;

    const ::onnx::NodeProto& proto() const { return proto_; }

    // The ONNX element type declared for input i (by the graph's inputs, initialisers or
    // value_info), or 0 where none is: fluxion holds int8, int16 and uint16 as i32 and uint32 as
    // i64, and the operators whose result depends on the width (bit shifts) read it here.
    int declared_type(std::size_t input) const { return input < declared_.size() ? declared_[input] : 0; }
    void declare_types(std::vector<int> types) { declared_ = std::move(types); }

    // For If, Loop and Scan: how many of its inputs, after those the node names, are values of the
    // enclosing graph that its graphs read by name (outer scope), appended by load.
    std::size_t outer_inputs() const { return outer_; }
    void read_outer(const std::vector<std::string>& names);

private:
    const ::onnx::AttributeProto* find(const char* attribute) const;
    ::onnx::NodeProto proto_;
    std::int64_t opset_;
    std::size_t index_;
    std::vector<int> declared_;
    std::size_t outer_ = 0;
};

// An operator: the node's outputs from its inputs (an absent optional input is an empty tensor).
using Operator = std::vector<Tensor> (*)(const Node& node, const std::vector<Tensor>& inputs);

// The operator of a function of one tensor without attributes (Neg, Tan, ...).
template <Tensor (*F)(const Tensor&)> std::vector<Tensor> unary(const Node&, const std::vector<Tensor>& in) {
    return {F(in[0])};
}

// The operator for `op` of the default domain, or nullptr.
Operator find_operator(const std::string& op);
// Whether `op` reads its inputs after the first on the host (shapes, axes, bounds): those are
// left where they are when the others move to the device of the data.
bool reads_host_arguments(const std::string& op);

// The parts of the table, one per file.
void add_elementwise_operators(std::map<std::string, Operator>& table);
void add_nn_operators(std::map<std::string, Operator>& table);
void add_shape_operators(std::map<std::string, Operator>& table);
void add_recurrent_operators(std::map<std::string, Operator>& table);
void add_resize_operators(std::map<std::string, Operator>& table);
void add_sampling_operators(std::map<std::string, Operator>& table);
void add_signal_operators(std::map<std::string, Operator>& table);
void add_math_operators(std::map<std::string, Operator>& table);
void add_loss_operators(std::map<std::string, Operator>& table);
void add_indexing_operators(std::map<std::string, Operator>& table);
void add_scan_operators(std::map<std::string, Operator>& table);
void add_einsum_operators(std::map<std::string, Operator>& table);
void add_attention_operators(std::map<std::string, Operator>& table);
void add_modulo_operators(std::map<std::string, Operator>& table);
void add_normalization_operators(std::map<std::string, Operator>& table);
void add_transformer_operators(std::map<std::string, Operator>& table);
void add_linear_attention_operators(std::map<std::string, Operator>& table);
void add_control_operators(std::map<std::string, Operator>& table);
void add_quantization_operators(std::map<std::string, Operator>& table);
void add_mel_operators(std::map<std::string, Operator>& table);
void add_tensor_scatter_operators(std::map<std::string, Operator>& table);
void add_training_operators(std::map<std::string, Operator>& table);  // ai.onnx.preview.training's
void add_detection_operators(std::map<std::string, Operator>& table);
void add_misc_operators(std::map<std::string, Operator>& table);

struct Step {
    Node node;
    Operator run;
    std::vector<std::string> frees;  // values last used by this node, dropped after it
};

struct Program {
    std::string file;  // for messages
    std::vector<std::string> inputs, outputs;
    std::vector<Step> steps;
    std::map<std::string, Tensor> host_constants;  // integer and boolean initialisers and constants
};

// A graph as a model of its own: a file's main graph (load), or a node's graph attribute
// (FlexAttention's score_mod, If's branches); `file` names it in messages. Its nodes run at `opset`.
// `outer` names values of the enclosing graph that it may read: the model takes them as inputs
// after its own.
Model subgraph(const ::onnx::GraphProto& g, std::int64_t opset, const std::string& file,
               const std::vector<std::string>& outer = {});
// The values a graph reads that neither it nor a graph inside it defines: those of its enclosing
// graph (outer scope), sorted.
std::vector<std::string> outer_names(const ::onnx::GraphProto& g);

// For an operator that reads `what` of its inputs' values on the host to decide what to compute:
// where those inputs may change from call to call with the same shapes (they derive from the
// graph's inputs or parameters, not only from constants and shapes), a compiled step's replay would
// repeat this call's decision, so fx::compile is refused with a message naming the node.
void values_read_on_host(const Node& n, const std::string& what);

// ---- helpers the operators share ----
Tensor tensor_from_proto(const ::onnx::TensorProto& p, const std::string& what);
// The ONNX element type's fluxion counterpart (those fluxion lacks widened where exact); DTypeError
// naming `what` for the others.
DType dtype_of_onnx(int type, const std::string& what);
std::vector<std::int64_t> host_ints(const Tensor& t);     // any integer or floating tensor's values
int axis_of(std::int64_t axis, int rank, const Node& n);  // negative axes count from the end; checked
Shape broadcast_shape(const Shape& a, const Shape& b);    // numpy's rule; ShapeError where they do not fit
// x with `before` and `after` elements of `value` added along `axis` (differentiable in x).
Tensor pad_axis(const Tensor& x, int axis, std::int64_t before, std::int64_t after, double value);
// x's elements at `flat` (indices into x in row-major order, computed on the host), shaped `shape`
// (differentiable in x).
Tensor gather_flat(const Tensor& x, const std::vector<std::int64_t>& flat, const Shape& shape);
// Values computed on the host, shaped `shape`, in like's element type on like's device.
Tensor on_like(const std::vector<double>& values, const Shape& shape, const Tensor& like);

}  // namespace fluxion::onnx::detail
