// graph.hpp — an ONNX graph being built by fx::onnx::save (include/fluxion/onnx.hpp): ONNX's own
// ModelProto, the rank of every value so far (for the operators whose choice depends on it), and
// the names taken, so that every node and value has its own.
#pragma once
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "fluxion/onnx.hpp"

namespace fluxion::onnx::detail {

inline constexpr std::int64_t kOpset = 17;

struct Graph {
    ::onnx::ModelProto model;
    ::onnx::GraphProto* graph = nullptr;
    std::map<std::string, int> ranks;  // value name -> rank

    // Appends a node of `op` on `inputs` named `name` (made unique), whose one output, named as the
    // node, has rank `rank`; returns that name. `set` adds the node's attributes.
    template <class Set>
    std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& name, int rank,
                     Set&& set) {
        ::onnx::NodeProto* n = add_node(op, inputs, name, rank);
        set(*n);
        return n->output(0);
    }
    std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& name, int rank) {
        return add_node(op, inputs, name, rank)->output(0);
    }
    // Adds `t` (f32, any device) as an initialiser named `name`; returns the name.
    std::string initializer(const Tensor& t, const std::string& name);
    std::string initializer(const std::vector<float>& values, const std::vector<std::int64_t>& dims,
                            const std::string& name);
    std::string initializer_i64(const std::vector<std::int64_t>& values, const std::vector<std::int64_t>& dims,
                                const std::string& name);
    // A node of several outputs, named `name` + each of `outputs`' suffixes with its rank.
    template <class Set>
    std::vector<std::string> nodes(const std::string& op, const std::vector<std::string>& inputs,
                                   const std::string& name, const std::vector<std::pair<std::string, int>>& outputs,
                                   Set&& set) {
        ::onnx::NodeProto* n = add_node(op, inputs, name, outputs[0].second);
        std::vector<std::string> names{n->output(0)};
        for (std::size_t i = 1; i < outputs.size(); ++i) {
            names.push_back(unique(n->name() + outputs[i].first));
            n->add_output(names.back());
            ranks[names.back()] = outputs[i].second;
        }
        set(*n);
        return names;
    }
    int rank(const std::string& value) const { return ranks.at(value); }
    // The shape of `value` by ONNX's own shape inference on the graph so far (the example input's
    // axes, -1 for the dynamic batch and for any axis it cannot tell).
    std::vector<std::int64_t> inferred_shape(const std::string& value) const;

private:
    ::onnx::NodeProto* add_node(const std::string& op, const std::vector<std::string>& inputs, const std::string& name,
                                int rank);
    std::string unique(const std::string& name);
    std::map<std::string, int> taken_;
};

// Attribute setters for Graph::node's `set`.
void attribute(::onnx::NodeProto& n, const std::string& name, std::int64_t v);
void attribute(::onnx::NodeProto& n, const std::string& name, float v);
void attribute(::onnx::NodeProto& n, const std::string& name, const std::vector<std::int64_t>& v);
void attribute(::onnx::NodeProto& n, const std::string& name, const std::string& v);

}  // namespace fluxion::onnx::detail
