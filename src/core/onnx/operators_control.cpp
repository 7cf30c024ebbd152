// operators_control.cpp — ONNX's control flow: If, Loop and Scan. Each graph attribute runs as a
// model of its own (subgraph), given the node's inputs and the enclosing graph's values it reads
// (appended to the node's inputs by load), on fluxion's ops, so the whole differentiates: a Loop's
// carried values and a Scan's states are ordinary tensors from step to step.
#include <algorithm>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;

const ::onnx::GraphProto& body(const Node& n, const char* attribute) {
    for (const auto& a : n.proto().attribute())
        if (a.name() == attribute && a.has_g()) return a.g();
    n.unsupported(std::string("the graph attribute ") + attribute + " is missing");
}

// The model of graph `attribute`, reading the node's outer values after its own inputs.
Model body_model(const Node& n, const char* attribute) {
    const auto& p = n.proto();
    const std::vector<std::string> outer(p.input().end() - std::ptrdiff_t(n.outer_inputs()), p.input().end());
    return subgraph(body(n, attribute), n.opset(), n.label() + "'s " + attribute, outer);
}

// The node's own inputs (those before the outer values), and its outer values.
Ts own(const Node& n, const Ts& in) { return {in.begin(), in.end() - std::ptrdiff_t(n.outer_inputs())}; }
Ts outer(const Node& n, const Ts& in) { return {in.end() - std::ptrdiff_t(n.outer_inputs()), in.end()}; }

Ts run(const Model& m, Ts formal, const Ts& outer_values) {
    formal.insert(formal.end(), outer_values.begin(), outer_values.end());
    return m(formal);
}

// A one-element trip count or condition's value, read on the host.
std::int64_t host_scalar(const Node& n, const Tensor& t, const char* what) {
    if (!t.defined() || t.numel() != 1)
        n.unsupported(std::string(what) + " has " + (t.defined() ? std::to_string(t.numel()) : "no") +
                      " elements; it takes one");
    return host_ints(t)[0];
}

Tensor scalar_i64(std::int64_t v) { return tensor(std::vector<std::int64_t>{v}, Shape{}).to(DType::i64); }
Tensor scalar_bool(bool v) { return tensor(std::vector<std::int64_t>{v ? 1 : 0}, Shape{}).to(DType::boolean); }

// ---- If: the branch its condition (read on the host) chooses ----
Ts if_(const Node& n, const Ts& in) {
    values_read_on_host(n, "its condition");
    const bool cond = host_scalar(n, in.at(0), "its condition") != 0;
    const Ts ys = run(body_model(n, cond ? "then_branch" : "else_branch"), {}, outer(n, in));
    if (ys.size() < n.outputs())
        n.unsupported("its " + std::string(cond ? "then_branch" : "else_branch") + " gives " +
                      std::to_string(ys.size()) + " outputs; the node has " + std::to_string(n.outputs()));
    return ys;
}

// ---- Loop: body(iteration, condition, carried...) -> (condition, carried..., scanned...) ----
Ts loop(const Node& n, const Ts& in) {
    values_read_on_host(n, "its trip count and condition");
    const Ts args = own(n, in);
    const Ts outside = outer(n, in);
    const bool counted = args.size() > 0 && args[0].defined();
    const bool conditioned = args.size() > 1 && args[1].defined();
    if (!counted && !conditioned) n.unsupported("it has neither a trip count nor a condition (an endless loop)");
    const std::int64_t trips = counted ? host_scalar(n, args[0], "its trip count") : 0;
    bool cond = !conditioned || host_scalar(n, args[1], "its condition") != 0;
    const Model m = body_model(n, "body");
    Ts carried(args.begin() + std::min<std::ptrdiff_t>(2, std::ptrdiff_t(args.size())), args.end());
    std::vector<Ts> scanned;
    for (std::int64_t i = 0; (!counted || i < trips) && cond; ++i) {
        Ts formal{scalar_i64(i), scalar_bool(cond)};
        formal.insert(formal.end(), carried.begin(), carried.end());
        const Ts ys = run(m, formal, outside);
        if (ys.size() < 1 + carried.size())
            n.unsupported("its body gives " + std::to_string(ys.size()) + " outputs; it takes at least " +
                          std::to_string(1 + carried.size()));
        cond = host_scalar(n, ys[0], "its body's condition") != 0;
        std::copy(ys.begin() + 1, ys.begin() + 1 + std::ptrdiff_t(carried.size()), carried.begin());
        scanned.resize(ys.size() - 1 - carried.size());
        for (std::size_t k = 0; k < scanned.size(); ++k) scanned[k].push_back(ys[1 + carried.size() + k]);
    }
    Ts out = carried;
    const std::size_t scans = n.outputs() > carried.size() ? n.outputs() - carried.size() : 0;
    for (std::size_t k = 0; k < scans; ++k) {
        if (k >= scanned.size() || scanned[k].empty())
            n.unsupported("it ran no iteration, so its scan output " + std::to_string(k) + " has no known shape");
        out.push_back(stack(scanned[k], 0));
    }
    return out;
}

// ---- Scan: the body over slices of the scan inputs, states carried from step to step ----
struct ScanAxes {
    std::vector<std::int64_t> input_axes, input_reverse, output_axes, output_reverse;
};

// One scan over `scans` (sliced along their axes), from `states`: the final states, then the
// scan outputs stacked along their axes.
Ts scan_once(const Node& n, const Model& m, Ts states, const Ts& scans, const ScanAxes& a, const Ts& outside) {
    std::int64_t length = -1;
    std::vector<int> axes;
    for (std::size_t j = 0; j < scans.size(); ++j) {
        const int axis = axis_of(a.input_axes[j], scans[j].ndim(), n);
        axes.push_back(axis);
        if (length >= 0 && scans[j].shape(axis) != length)
            throw ShapeError("fx::onnx: " + n.label() + ": its scan inputs have lengths " + std::to_string(length) +
                             " and " + std::to_string(scans[j].shape(axis)) + " along their scan axes");
        length = scans[j].shape(axis);
    }
    std::vector<Ts> outputs;
    for (std::int64_t t = 0; t < length; ++t) {
        Ts formal = states;
        for (std::size_t j = 0; j < scans.size(); ++j)
            formal.push_back(scans[j].select(axes[j], a.input_reverse[j] ? length - 1 - t : t));
        const Ts ys = run(m, formal, outside);
        if (ys.size() < states.size())
            n.unsupported("its body gives " + std::to_string(ys.size()) + " outputs; it carries " +
                          std::to_string(states.size()) + " states");
        std::copy(ys.begin(), ys.begin() + std::ptrdiff_t(states.size()), states.begin());
        outputs.resize(ys.size() - states.size());
        for (std::size_t k = 0; k < outputs.size(); ++k) outputs[k].push_back(ys[states.size() + k]);
    }
    const std::size_t wanted = n.outputs() > states.size() ? n.outputs() - states.size() : 0;
    for (std::size_t k = 0; k < wanted; ++k) {
        if (k >= outputs.size() || outputs[k].empty())
            n.unsupported("its scan inputs have length 0, so its scan output " + std::to_string(k) +
                          " has no known shape");
        Ts steps = outputs[k];
        if (k < a.output_reverse.size() && a.output_reverse[k]) std::reverse(steps.begin(), steps.end());
        const std::int64_t axis = k < a.output_axes.size() ? a.output_axes[k] : 0;
        states.push_back(stack(steps, axis_of(axis, steps[0].ndim() + 1, n)));
    }
    return states;
}

std::vector<std::int64_t> per_input(const Node& n, const char* attribute, std::size_t count) {
    std::vector<std::int64_t> v = n.ints(attribute, std::vector<std::int64_t>(count, 0));
    if (v.size() != count)
        n.unsupported(std::string("its ") + attribute + " has " + std::to_string(v.size()) + " entries; it takes " +
                      std::to_string(count));
    return v;
}

Ts scan(const Node& n, const Ts& in) {
    const Ts args = own(n, in);
    const Ts outside = outer(n, in);
    const std::int64_t m_scans = n.i("num_scan_inputs", -1);
    const bool batched = n.opset() < 9;  // opset 8: a batch axis first, and sequence_lens before the states
    const std::size_t first = batched ? 1 : 0;
    if (m_scans < 1 || std::size_t(m_scans) + first > args.size())
        n.unsupported("its num_scan_inputs (" + std::to_string(m_scans) + ") does not fit its " +
                      std::to_string(args.size()) + " inputs");
    const Ts states(args.begin() + std::ptrdiff_t(first), args.end() - m_scans);
    const Ts scans(args.end() - m_scans, args.end());
    const std::size_t outputs = n.outputs() > states.size() ? n.outputs() - states.size() : 0;
    const Model m = body_model(n, "body");
    ScanAxes a;
    if (!batched) {
        a.input_axes = per_input(n, "scan_input_axes", scans.size());
        a.input_reverse = per_input(n, "scan_input_directions", scans.size());
        a.output_axes = per_input(n, "scan_output_axes", outputs);
        a.output_reverse = per_input(n, "scan_output_directions", outputs);
        return scan_once(n, m, states, scans, a, outside);
    }
    // Opset 8: each batch entry scans on its own (along axis 1 of the batch), the results stacked.
    a.input_axes.assign(scans.size(), 0);
    a.input_reverse = per_input(n, "directions", scans.size());
    a.output_axes.assign(outputs, 0);
    a.output_reverse.assign(outputs, 0);
    for (const auto& x : scans)
        if (x.ndim() < 2)
            n.unsupported("its scan input of shape " + to_string(x.shape()) + " has no batch and sequence axes");
    const std::int64_t batch = scans[0].shape(0);
    if (args[0].defined()) {
        values_read_on_host(n, "its sequence_lens");
        for (auto len : host_ints(args[0]))
            if (len != scans[0].shape(1)) n.unsupported("sequence_lens shorter than the scan inputs' length");
    }
    std::vector<Ts> per_batch;
    for (std::int64_t b = 0; b < batch; ++b) {
        Ts s, x;
        for (const auto& t : states) s.push_back(t.select(0, b));
        for (const auto& t : scans) x.push_back(t.select(0, b));
        per_batch.push_back(scan_once(n, m, s, x, a, outside));
    }
    Ts out;
    for (std::size_t k = 0; k < per_batch[0].size(); ++k) {
        Ts parts;
        for (const auto& r : per_batch) parts.push_back(r[k]);
        out.push_back(stack(parts, 0));
    }
    return out;
}

}  // namespace

void add_control_operators(std::map<std::string, Operator>& t) {
    t["If"] = if_;
    t["Loop"] = loop;
    t["Scan"] = scan;
}

}  // namespace fluxion::onnx::detail
