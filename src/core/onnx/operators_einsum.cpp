// operators_einsum.cpp — ONNX's Einsum as fluxion's ops: each operand's repeated labels become its
// diagonal and its labels used nowhere else are summed; then the operands are multiplied two at a
// time as one batched matmul (batch labels, the left's own, the contracted, the right's own), and
// the result is permuted to the output's order. Explicit and implicit outputs, ellipses, and
// broadcasting of size-1 axes between operands.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using Labels = std::vector<int>;  // a letter's code, or 256 + k for the k-th axis of an ellipsis

// An operand: its tensor and one label per axis.
struct Term {
    Tensor x;
    Labels labels;
};

[[noreturn]] void refuse(const Node& n, const std::string& equation, const std::string& why) {
    n.unsupported("equation '" + equation + "': " + why);
}

// The labels of one side of the equation; an ellipsis stands for `ellipsis` axes, aligned at the end.
Labels parse(const Node& n, const std::string& equation, const std::string& side, int ellipsis) {
    Labels out;
    for (std::size_t i = 0; i < side.size(); ++i) {
        if (side.compare(i, 3, "...") == 0) {
            for (int k = 0; k < ellipsis; ++k) out.push_back(256 + k);
            i += 2;
        } else if (std::isalpha(static_cast<unsigned char>(side[i]))) {
            out.push_back(side[i]);
        } else {
            refuse(n, equation, std::string("the character '") + side[i] + "'");
        }
    }
    return out;
}
int letters(const std::string& side) {
    return int(
        std::count_if(side.begin(), side.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); }));
}

std::int64_t product(const Tensor& x, const std::vector<int>& axes) {
    std::int64_t k = 1;
    for (int a : axes) k *= x.shape(a);
    return k;
}

// The diagonal of axes a < b (of equal size), as the last axis in place of both.
Tensor diagonal(const Tensor& x, int a, int b) {
    std::vector<int> order;
    for (int i = 0; i < x.ndim(); ++i)
        if (i != a && i != b) order.push_back(i);
    order.push_back(a), order.push_back(b);
    Tensor y = x.permute(order);
    const std::int64_t d = x.shape(a);
    Shape s(y.shape().begin(), y.shape().end() - 2);
    s.push_back(d * d);
    const Tensor steps = arange(0, double(d * d), double(d + 1), {.dtype = DType::i64, .device = x.device()});
    return index_select(y.reshape(s), y.ndim() - 2, steps);
}

// Takes repeated labels' diagonals and sums labels that `keep` does not hold.
Term reduce(const Node& n, const std::string& equation, Term t, const std::set<int>& keep) {
    for (bool again = true; again;) {
        again = false;
        for (std::size_t a = 0; a < t.labels.size() && !again; ++a)
            for (std::size_t b = a + 1; b < t.labels.size() && !again; ++b)
                if (t.labels[a] == t.labels[b]) {
                    if (t.x.shape(int(a)) != t.x.shape(int(b)))
                        refuse(n, equation, "a repeated label of different sizes");
                    const int label = t.labels[a];
                    t.x = diagonal(t.x, int(a), int(b));
                    t.labels.erase(t.labels.begin() + std::ptrdiff_t(b));
                    t.labels.erase(t.labels.begin() + std::ptrdiff_t(a));
                    t.labels.push_back(label);
                    again = true;
                }
    }
    for (std::size_t a = t.labels.size(); a-- > 0;)
        if (!keep.count(t.labels[a])) {
            t.x = sum(t.x, int(a));
            t.labels.erase(t.labels.begin() + std::ptrdiff_t(a));
        }
    return t;
}

int index_of(const Labels& ls, int label) { return int(std::find(ls.begin(), ls.end(), label) - ls.begin()); }

// a·b as one batched matmul; the result's labels: batch, a's own, b's own. A shared label of size
// 1 in one operand and n in the other broadcasts, as in numpy's einsum.
Term contract(const Node& n, const std::string& equation, Term a, Term b, const std::set<int>& keep) {
    Shape as = a.x.shape(), bs = b.x.shape();
    for (std::size_t i = 0; i < a.labels.size(); ++i) {
        const auto j = std::size_t(index_of(b.labels, a.labels[i]));
        if (j == b.labels.size() || as[i] == bs[j]) continue;
        if (as[i] != 1 && bs[j] != 1)
            throw ShapeError("fx::onnx: " + n.label() + ": equation '" + equation + "': operands of sizes " +
                             std::to_string(as[i]) + " and " + std::to_string(bs[j]) + " along " +
                             (a.labels[i] < 256 ? std::string("label '") + char(a.labels[i]) + "'" : "the ellipsis"));
        as[i] = bs[j] = std::max(as[i], bs[j]);
    }
    a.x = a.x.expand(as), b.x = b.x.expand(bs);
    std::vector<int> batch, left, right, inner;
    for (int l : a.labels) {
        const bool shared = index_of(b.labels, l) < int(b.labels.size());
        (shared ? (keep.count(l) ? batch : inner) : left).push_back(l);
    }
    for (int l : b.labels)
        if (index_of(a.labels, l) == int(a.labels.size())) right.push_back(l);
    auto axes = [](const Term& t, std::initializer_list<const std::vector<int>*> groups) {
        std::vector<int> out;
        for (const auto* g : groups)
            for (int l : *g) out.push_back(index_of(t.labels, l));
        return out;
    };
    const auto ab = axes(a, {&batch}), al = axes(a, {&left}), ak = axes(a, {&inner});
    const auto bk = axes(b, {&inner}), br = axes(b, {&right});
    std::vector<int> a_order = ab, b_order = axes(b, {&batch});
    a_order.insert(a_order.end(), al.begin(), al.end()), a_order.insert(a_order.end(), ak.begin(), ak.end());
    b_order.insert(b_order.end(), bk.begin(), bk.end()), b_order.insert(b_order.end(), br.begin(), br.end());
    const std::int64_t B = product(a.x, ab), L = product(a.x, al), K = product(a.x, ak), R = product(b.x, br);
    const Tensor y = matmul(a.x.permute(a_order).reshape({B, L, K}), b.x.permute(b_order).reshape({B, K, R}));
    Shape shape;
    Term out;
    for (int i : ab) shape.push_back(a.x.shape(i));
    for (int i : al) shape.push_back(a.x.shape(i));
    for (int i : br) shape.push_back(b.x.shape(i));
    out.labels = batch;
    out.labels.insert(out.labels.end(), left.begin(), left.end());
    out.labels.insert(out.labels.end(), right.begin(), right.end());
    out.x = y.reshape(shape);
    return out;
}

Ts einsum(const Node& n, const Ts& in) {
    std::string equation;
    for (char c : n.s("equation", ""))
        if (c != ' ') equation.push_back(c);
    const auto arrow = equation.find("->");
    const std::string lhs = equation.substr(0, arrow);
    std::vector<std::string> sides;
    for (std::size_t at = 0;;) {
        const auto comma = lhs.find(',', at);
        sides.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    if (sides.size() != in.size())
        throw ValueError("fx::onnx: " + n.label() + ": equation '" + equation + "' names " +
                         std::to_string(sides.size()) + " operands; the node has " + std::to_string(in.size()));
    std::vector<Term> terms;
    int ellipsis = 0;
    for (std::size_t i = 0; i < sides.size(); ++i) {
        const bool has = sides[i].find("...") != std::string::npos;
        const int e = in[i].ndim() - letters(sides[i]);
        if (e < 0 || (!has && e != 0))
            throw ShapeError("fx::onnx: " + n.label() + ": equation '" + equation + "' gives operand " +
                             std::to_string(i) + " " + std::to_string(letters(sides[i])) + " axes; it has shape " +
                             to_string(in[i].shape()));
        ellipsis = std::max(ellipsis, e);
        terms.push_back({in[i], {}});
    }
    for (std::size_t i = 0; i < sides.size(); ++i) {  // an operand's ellipsis holds the last of the axes
        Labels ls = parse(n, equation, sides[i], ellipsis);
        const int e = in[i].ndim() - letters(sides[i]);
        const auto first = std::find(ls.begin(), ls.end(), 256);
        if (first != ls.end()) ls.erase(first, first + (ellipsis - e));
        terms[i].labels = ls;
    }
    Labels output;
    if (arrow != std::string::npos) {
        output = parse(n, equation, equation.substr(arrow + 2), ellipsis);
    } else {  // implicit: the ellipsis, then the letters used once, in alphabetical order
        std::map<int, int> uses;
        for (const auto& t : terms)
            for (int l : t.labels) ++uses[l];
        for (int k = 0; k < ellipsis; ++k) output.push_back(256 + k);
        for (const auto& [l, u] : uses)
            if (l < 256 && u == 1) output.push_back(l);
    }
    // Fold the operands left to right, keeping the labels the output or a later operand needs.
    auto needed = [&](std::size_t after) {
        std::set<int> keep(output.begin(), output.end());
        for (std::size_t j = after; j < terms.size(); ++j) keep.insert(terms[j].labels.begin(), terms[j].labels.end());
        return keep;
    };
    Term y = reduce(n, equation, terms[0], needed(1));
    for (std::size_t i = 1; i < terms.size(); ++i) {
        const std::set<int> keep = needed(i + 1);
        std::set<int> with_y = keep;
        with_y.insert(y.labels.begin(), y.labels.end());
        const Term t = reduce(n, equation, terms[i], with_y);
        std::set<int> with_t = keep;
        with_t.insert(t.labels.begin(), t.labels.end());
        y = contract(n, equation, reduce(n, equation, y, with_t), t, keep);
    }
    std::vector<int> order;
    for (int l : output) {
        const int at = index_of(y.labels, l);
        if (at == int(y.labels.size())) refuse(n, equation, "an output label no operand has");
        order.push_back(at);
    }
    if (order.size() != y.labels.size()) refuse(n, equation, "a label repeated in the output");
    return {order.empty() ? y.x : y.x.permute(order)};
}

}  // namespace

void add_einsum_operators(std::map<std::string, Operator>& t) { t["Einsum"] = einsum; }

}  // namespace fluxion::onnx::detail
