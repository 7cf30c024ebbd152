// print.cpp — tensors print as Julia's REPL prints arrays: a summary line, then the values,
// with the middle elided for large tensors.
#include <iomanip>
#include <ostream>
#include <sstream>

#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

constexpr std::int64_t kEdge = 3;     // rows/columns shown at each end of a long axis
constexpr std::int64_t kLong = 10;    // axes longer than this are elided

std::string format(double v, DType t) {
    std::ostringstream s;
    if (t == DType::boolean) s << (v != 0 ? "true" : "false");
    else if (is_integral(t)) s << static_cast<long long>(v);
    else s << std::setprecision(t == DType::f64 ? 8 : 6) << v;
    return s.str();
}

std::vector<std::int64_t> shown(std::int64_t n) {
    std::vector<std::int64_t> idx;
    if (n <= kLong) {
        for (std::int64_t i = 0; i < n; ++i) idx.push_back(i);
    } else {
        for (std::int64_t i = 0; i < kEdge; ++i) idx.push_back(i);
        idx.push_back(-1);  // the ellipsis
        for (std::int64_t i = n - kEdge; i < n; ++i) idx.push_back(i);
    }
    return idx;
}

// Columns are aligned by characters shown, not bytes: the ellipses are multi-byte UTF-8.
std::size_t display_width(const std::string& s) {
    std::size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

// Prints a matrix {rows, cols} of host values with columns aligned.
void print_matrix(std::ostream& os, const std::vector<double>& v, std::int64_t rows, std::int64_t cols, DType t) {
    auto ri = shown(rows), ci = shown(cols);
    std::vector<std::vector<std::string>> cells;
    std::vector<std::size_t> width(ci.size(), 0);
    for (auto r : ri) {
        std::vector<std::string> line;
        for (std::size_t j = 0; j < ci.size(); ++j) {
            std::string s = r < 0 ? (ci[j] < 0 ? "⋱" : "⋮") : ci[j] < 0 ? "…" : format(v[r * cols + ci[j]], t);
            width[j] = std::max(width[j], display_width(s));
            line.push_back(s);
        }
        cells.push_back(line);
    }
    for (std::size_t i = 0; i < cells.size(); ++i) {
        for (std::size_t j = 0; j < cells[i].size(); ++j)
            os << ' ' << std::string(width[j] - display_width(cells[i][j]), ' ') << cells[i][j];
        if (i + 1 < cells.size()) os << '\n';
    }
}

}  // namespace

std::string summary(const Tensor& t) {
    std::string dims;
    for (std::size_t i = 0; i < t.shape().size(); ++i) dims += (i ? "×" : "") + std::to_string(t.shape()[i]);
    if (t.ndim() == 0) dims = "0-dimensional";
    else if (t.ndim() == 1) dims = std::to_string(t.shape()[0]) + "-element";
    return dims + " Tensor<" + name(t.dtype()) + ", " + t.device().str() + ">";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    if (!t.defined()) return os << "Tensor(undefined)";
    os << summary(t) << ":";
    if (t.numel() == 0) return os;
    NoGrad no_grad;
    auto v = t.detach().to_vector<double>();
    if (t.ndim() == 0) return os << "\n " << format(v[0], t.dtype());
    if (t.ndim() == 1) {
        os << '\n';
        print_matrix(os, v, t.shape()[0], 1, t.dtype());
        return os;
    }
    std::int64_t rows = t.shape(-2), cols = t.shape(-1), plane = rows * cols;
    std::int64_t planes = t.numel() / plane;
    for (std::int64_t p = 0; p < planes; ++p) {
        if (t.ndim() > 2) {
            std::int64_t rest = p;
            std::vector<std::int64_t> idx;
            for (int d = t.ndim() - 3; d >= 0; --d) {
                idx.insert(idx.begin(), rest % t.shape()[d]);
                rest /= t.shape()[d];
            }
            // printed in array order: leading indices first
            std::string label = "[";
            for (auto i : idx) label += std::to_string(i) + ", ";
            label += ":, :]";
            os << "\n\n" << label << " =";
        }
        os << '\n';
        std::vector<double> m(v.begin() + p * plane, v.begin() + (p + 1) * plane);
        print_matrix(os, m, rows, cols, t.dtype());
        if (planes > 2 * kEdge && p == kEdge - 1) {
            os << "\n\n⋮";
            p = planes - kEdge - 1;
        }
    }
    return os;
}

}  // namespace fluxion
