// show.cpp — the text of model printing: counts with Flux's digit grouping, aligned comments.
#include "fluxion/layers/show.hpp"

#include <algorithm>
#include <cstdio>

namespace fluxion::detail {
namespace {

// 100480 -> "100_480", as Flux writes parameter counts.
std::string grouped(std::int64_t n) {
    std::string digits = std::to_string(n), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += '_';
        out += digits[i];
    }
    return out;
}

std::string bytes_text(std::int64_t bytes) {
    if (bytes < 1024) return std::to_string(bytes) + " bytes";
    const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = double(bytes);
    int u = -1;
    while (v >= 1024 && u < 3) v /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f %s", v, units[u]);
    return buf;
}

// Columns on a terminal: UTF-8 continuation bytes take none.
std::size_t width(const std::string& s) {
    return std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

}  // namespace

std::string layer_comment(const ParamCount& c) {
    if (c.params == 0 && c.other_params == 0) return "";
    std::string s = grouped(c.params) + " parameters";
    if (c.other_arrays > 0) s += ", plus " + grouped(c.other_params) + " non-trainable";
    return s;
}

std::string total_comment(const ParamCount& c) {
    std::string s = "Total: " + grouped(c.arrays) + (c.other_arrays > 0 ? " trainable arrays, " : " arrays, ") +
                    grouped(c.params) + " parameters, ";
    if (c.other_arrays > 0)
        s += "plus " + grouped(c.other_arrays) + " non-trainable, " + grouped(c.other_params) + " parameters, ";
    return s + bytes_text(c.bytes) + ".";
}

void Shower::open(const std::string& name) {
    lines.push_back({std::string(2 * depth_, ' ') + name + "(", ""});
    ++depth_;
}

void Shower::item(const std::string& text, const std::string& comment) {
    lines.push_back({std::string(2 * depth_, ' ') + text + ",", comment});
}

void Shower::close() {
    --depth_;
    lines.push_back({std::string(2 * depth_, ' ') + (depth_ > 0 ? ")," : ")"), ""});
}

void write_lines(std::ostream& os, const std::vector<Shower::Line>& lines) {
    std::size_t column = 0;
    for (const auto& l : lines)
        if (!l.comment.empty()) column = std::max(column, width(l.text));
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const auto& l = lines[i];
        os << l.text;
        if (!l.comment.empty()) os << std::string(column - width(l.text) + 2, ' ') << "# " << l.comment;
        if (i + 1 < lines.size()) os << '\n';
    }
}

}  // namespace fluxion::detail
