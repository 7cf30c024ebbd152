// fluxion/layers/show.hpp — printing layers and models as Flux does, with their parameter counts:
//
//   Dense(10 => 5, σ)  # 55 parameters
//   Chain(
//     Dense(10 => 5, σ),  # 55 parameters
//     Dense(5 => 2),      # 12 parameters
//     softmax,
//   )                     # Total: 4 arrays, 67 parameters, 268 bytes.
//
// Tensors that optimisers leave alone (BatchNorm's running statistics, fields outside
// FLUXION_TRAINABLE) are counted separately as "non-trainable". A layer prints itself by a member
// `std::string describe() const` (one line); a layer holding layers by `void show(detail::Shower&) const`.
#pragma once
#include <concepts>
#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "fluxion/functor.hpp"

namespace fluxion {
namespace detail {

struct ParamCount {
    std::int64_t arrays = 0, params = 0;              // trainable
    std::int64_t other_arrays = 0, other_params = 0;  // non-trainable
    std::int64_t bytes = 0;                           // all of them
};

template <class T> ParamCount count_params(const T& x) {
    std::set<std::string> trainable;
    visit_trainable(x, [&](const std::string& path, const Tensor& t) {
        if (t.defined()) trainable.insert(path);
    });
    ParamCount c;
    visit_tensors(x, [&](const std::string& path, const Tensor& t) {
        if (!t.defined()) return;
        c.bytes += t.numel() * static_cast<std::int64_t>(itemsize(t.dtype()));
        if (trainable.count(path)) ++c.arrays, c.params += t.numel();
        else ++c.other_arrays, c.other_params += t.numel();
    });
    return c;
}

std::string layer_comment(const ParamCount& c);  // "55 parameters", "..., plus 6 non-trainable", or ""
std::string total_comment(const ParamCount& c);  // "Total: 4 arrays, 67 parameters, 268 bytes."

// Collects the lines of a model, one per layer, with their comments.
class Shower {
public:
    struct Line {
        std::string text, comment;
    };

    template <class L> void layer(const L& l) {
        if constexpr (requires { l.show(*this); }) l.show(*this);
        else item(l.describe(), layer_comment(count_params(l)));
    }
    void open(const std::string& name);                                 // "Chain(" and indent
    void item(const std::string& text, const std::string& comment = "");  // one line, ending in ","
    void close();                                                       // ")" and unindent

    std::vector<Line> lines;

private:
    int depth_ = 0;
};

// Writes the lines with their comments aligned in one column.
void write_lines(std::ostream& os, const std::vector<Shower::Line>& lines);

}  // namespace detail

template <class L>
concept Showable = requires(const L& l, detail::Shower& s) { l.show(s); } ||
                   requires(const L& l) { { l.describe() } -> std::convertible_to<std::string>; };

template <Showable L> std::ostream& operator<<(std::ostream& os, const L& layer) {
    if constexpr (requires(detail::Shower& s) { layer.show(s); }) {
        detail::Shower s;
        layer.show(s);
        s.lines.back().comment = detail::total_comment(detail::count_params(layer));
        detail::write_lines(os, s.lines);
    } else {
        os << layer.describe();
        auto comment = detail::layer_comment(detail::count_params(layer));
        if (!comment.empty()) os << "  # " << comment;
    }
    return os;
}

}  // namespace fluxion
