// operators_misc.cpp — ONNX's MeanVarianceNormalization (fluxion's ops), and the operators whose
// result follows from their input's values or bits, computed on the host as no fluxion op expresses
// them: NonZero and Unique (their output's size), Det (an LU factorisation) and BitCast (bits
// reinterpreted). The host ones return on their input's device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using I = std::int64_t;

std::vector<double> host_doubles(const Tensor& t) {
    return t.detach().contiguous().to(Device{}).to(DType::f64).to_vector<double>();
}

// (X − mean) / sqrt(variance + 1e-9), both over `axes` (the batch and spatial axes by default).
Ts mean_variance_normalization(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    auto axes = n.ints("axes", {0, 2, 3});
    for (auto& a : axes) a = axis_of(a, x.ndim(), n);
    std::sort(axes.begin(), axes.end());
    auto mean_over = [&axes](Tensor t) {
        for (auto a : axes) t = mean(t, int(a), true);
        return t;
    };
    const Tensor centred = x - mean_over(x);
    return {centred / sqrt(mean_over(centred * centred) + 1e-9)};
}

// {rank, count} i64: the indices of the non-zero elements in row-major order.
Ts non_zero(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    values_read_on_host(n, "its input (to find its non-zero elements)");
    const auto v = host_doubles(x);
    const int rank = x.ndim();
    std::vector<I> at;
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != 0) at.push_back(I(i));
    std::vector<I> out(std::size_t(rank) * at.size());
    for (std::size_t j = 0; j < at.size(); ++j) {
        I rest = at[j];
        for (int d = rank; d-- > 0;) {
            out[std::size_t(d) * at.size() + j] = rest % x.shape(d);
            rest /= x.shape(d);
        }
    }
    return {tensor(out, {I(rank), I(at.size())}).to(x.device())};
}

// The distinct elements (or slices along `axis`), sorted or in the order they first occur, with
// their first indices, each element's (slice's) index among them, and their counts.
Ts unique(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    values_read_on_host(n, "its input (to find its distinct values)");
    const bool sorted = n.i("sorted", 1) != 0;
    const bool along = n.has("axis");
    const int axis = along ? axis_of(n.i("axis", 0), x.ndim(), n) : 0;
    const Tensor flat = along ? x : x.reshape({x.numel()});
    // The slices as rows of host values: {count, size}.
    const I count = flat.ndim() == 0 ? 1 : flat.shape(axis);
    const Tensor rows = along ? transpose(flat, 0, axis).contiguous().reshape({count, -1}) : flat.reshape({count, 1});
    const auto v = host_doubles(rows);
    const std::size_t size = count == 0 ? 0 : v.size() / std::size_t(count);
    auto row_less = [&](I a, I b) {
        return std::lexicographical_compare(v.begin() + a * I(size), v.begin() + (a + 1) * I(size),
                                            v.begin() + b * I(size), v.begin() + (b + 1) * I(size));
    };
    auto row_equal = [&](I a, I b) {
        return std::equal(v.begin() + a * I(size), v.begin() + (a + 1) * I(size), v.begin() + b * I(size));
    };
    std::vector<I> order(static_cast<std::size_t>(count));
    std::iota(order.begin(), order.end(), I(0));
    std::stable_sort(order.begin(), order.end(), row_less);  // equal rows keep their order: the first leads
    // Each run of equal rows: its first occurrence, and each row's run.
    std::vector<I> first, counts, run_of(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < order.size(); ++i) {
        if (i == 0 || !row_equal(order[i - 1], order[i])) first.push_back(order[i]), counts.push_back(0);
        run_of[std::size_t(order[i])] = I(first.size()) - 1;
        ++counts.back();
    }
    std::vector<I> rank(first.size());  // each run's place in the output
    std::iota(rank.begin(), rank.end(), I(0));
    if (!sorted) {
        std::vector<I> by_first(first.size());
        std::iota(by_first.begin(), by_first.end(), I(0));
        std::sort(by_first.begin(), by_first.end(),
                  [&](I a, I b) { return first[std::size_t(a)] < first[std::size_t(b)]; });
        for (std::size_t p = 0; p < by_first.size(); ++p) rank[std::size_t(by_first[p])] = I(p);
    }
    const std::size_t k = first.size();
    std::vector<I> indices(k), counts_out(k), inverse(static_cast<std::size_t>(count));
    for (std::size_t r = 0; r < k; ++r) {
        indices[std::size_t(rank[r])] = first[r];
        counts_out[std::size_t(rank[r])] = counts[r];
    }
    for (std::size_t i = 0; i < std::size_t(count); ++i) inverse[i] = rank[std::size_t(run_of[i])];
    const Device d = x.device();
    const Tensor index = tensor(indices, {I(k)}).to(d);
    return {index_select(flat, axis, index), index, tensor(inverse, {count}).to(d), tensor(counts_out, {I(k)}).to(d)};
}

// The determinant of each {M, M} matrix of {..., M, M}, by LU factorisation with partial pivoting.
Ts det(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    if (x.ndim() < 2 || x.shape(-1) != x.shape(-2))
        throw ShapeError("fx::onnx: " + n.label() + ": takes square matrices {..., M, M}, not " + to_string(x.shape()));
    if (!is_floating(x.dtype())) n.unsupported("a " + std::string(fluxion::name(x.dtype())) + " input");
    values_read_on_host(n, "its matrices (to factorise them)");
    auto a = host_doubles(x);
    const I m = x.shape(-1), matrices = m == 0 ? 0 : I(a.size()) / (m * m);
    const Shape batch(x.shape().begin(), x.shape().end() - 2);
    std::vector<double> out(std::size_t(numel(batch)), 1.0);
    for (I b = 0; b < matrices; ++b) {
        double* q = &a[std::size_t(b * m * m)];
        double d = 1.0;
        for (I c = 0; c < m && d != 0.0; ++c) {
            I p = c;
            for (I r = c + 1; r < m; ++r)
                if (std::abs(q[r * m + c]) > std::abs(q[p * m + c])) p = r;
            if (q[p * m + c] == 0.0) d = 0.0;
            if (d == 0.0) break;
            if (p != c) {
                for (I k = 0; k < m; ++k) std::swap(q[c * m + k], q[p * m + k]);
                d = -d;
            }
            d *= q[c * m + c];
            for (I r = c + 1; r < m; ++r) {
                const double f = q[r * m + c] / q[c * m + c];
                for (I k = c; k < m; ++k) q[r * m + k] -= f * q[c * m + k];
            }
        }
        out[std::size_t(b)] = d;
    }
    return {tensor(out, batch).to(x.dtype()).to(x.device())};
}

// ---- BitCast ----

// An ONNX element type's width in bits and kind, for the types fluxion holds exactly.
struct Bits {
    int width;
    bool floating, is_signed;
};

bool bits_of(int type, Bits& b) {
    using P = ::onnx::TensorProto;
    switch (type) {
        case P::FLOAT: b = {32, true, true}; return true;
        case P::DOUBLE: b = {64, true, true}; return true;
        case P::INT8: b = {8, false, true}; return true;
        case P::UINT8:
        case P::BOOL: b = {8, false, false}; return true;
        case P::INT16: b = {16, false, true}; return true;
        case P::UINT16: b = {16, false, false}; return true;
        case P::INT32: b = {32, false, true}; return true;
        case P::UINT32: b = {32, false, false}; return true;
        case P::INT64: b = {64, false, true}; return true;
        default: return false;
    }
}

// The ONNX type of a fluxion element type, where no declared one is known.
int onnx_type_of(DType t) {
    using P = ::onnx::TensorProto;
    switch (t) {
        case DType::f32: return P::FLOAT;
        case DType::f64: return P::DOUBLE;
        case DType::i32: return P::INT32;
        case DType::i64: return P::INT64;
        case DType::u8: return P::UINT8;
        case DType::boolean: return P::BOOL;
        case DType::f16: return P::FLOAT16;
        case DType::bf16: return P::BFLOAT16;
    }
    return 0;
}

// The same bits as another type of the same width: on the host, as no fluxion op reinterprets them.
Ts bit_cast(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const int from = n.declared_type(0) != 0 ? n.declared_type(0) : onnx_type_of(x.dtype());
    const int to = int(n.i("to", 0));
    Bits a{}, b{};
    if (!bits_of(from, a) || !bits_of(to, b))
        n.unsupported("a bit cast from ONNX type " + std::to_string(from) + " to " + std::to_string(to) +
                      " (16-bit floats and 64-bit unsigned integers are not reinterpreted)");
    if (a.width != b.width)
        throw DTypeError("fx::onnx: " + n.label() + ": BitCast takes types of one width, not " +
                         std::to_string(a.width) + " and " + std::to_string(b.width) + " bits");
    values_read_on_host(n, "its input's bits (to reinterpret them)");
    const DType out_type = dtype_of_onnx(to, n.label());
    const std::uint64_t mask = a.width == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << a.width) - 1;
    std::vector<std::uint64_t> bits;
    if (a.floating && a.width == 32)
        for (float f : x.detach().contiguous().to(Device{}).to_vector<float>()) {
            std::uint32_t u;
            std::memcpy(&u, &f, 4);
            bits.push_back(u);
        }
    else if (a.floating)
        for (double f : host_doubles(x)) {
            std::uint64_t u;
            std::memcpy(&u, &f, 8);
            bits.push_back(u);
        }
    else
        for (I v : host_ints(x)) bits.push_back(std::uint64_t(v) & mask);
    std::vector<float> singles;
    std::vector<double> doubles;
    std::vector<I> ints;
    for (std::uint64_t u : bits) {
        if (b.floating && b.width == 32) {
            float f;
            const std::uint32_t w = std::uint32_t(u);
            std::memcpy(&f, &w, 4);
            singles.push_back(f);
        } else if (b.floating) {
            double f;
            std::memcpy(&f, &u, 8);
            doubles.push_back(f);
        } else if (b.is_signed && b.width < 64 && (u >> (b.width - 1)) != 0) {
            ints.push_back(I(u) - (I(1) << b.width));  // the sign bit set: negative
        } else {
            ints.push_back(I(u));
        }
    }
    const Tensor y = !b.floating     ? tensor(ints, x.shape()).to(out_type)
                     : b.width == 32 ? tensor(singles, x.shape())
                                     : tensor(doubles, x.shape());
    return {y.to(x.device())};
}

}  // namespace

void add_misc_operators(std::map<std::string, Operator>& t) {
    t["MeanVarianceNormalization"] = mean_variance_normalization;
    t["NonZero"] = non_zero;
    t["Unique"] = unique;
    t["Det"] = det;
    t["BitCast"] = bit_cast;
}

}  // namespace fluxion::onnx::detail
