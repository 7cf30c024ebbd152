// operators_mel.cpp — ONNX's MelWeightMatrix: the triangular filters that map a DFT's
// num_spectrogram_bins (dft_length / 2 + 1) linear frequency bins onto num_mel_bins mel bins.
#include <cmath>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;

double mel_of(double hertz) { return 2595 * std::log10(1 + hertz / 700); }
double hertz_of(double mel) { return 700 * (std::pow(10.0, mel / 2595) - 1); }

// Built on the host from its scalar inputs (sizes and frequencies), as the window operators are.
Ts mel_weight_matrix(const Node& n, const Ts& in) {
    values_read_on_host(n, "its sizes and frequencies");
    const auto scalar = [&](std::size_t i) {
        if (in.at(i).numel() != 1) n.unsupported("input " + std::to_string(i) + " of more than one value");
        return in[i].to_vector<double>().at(0);
    };
    const auto bins = std::int64_t(scalar(0)), dft_length = std::int64_t(scalar(1));
    const auto sample_rate = std::int64_t(scalar(2));
    const double low = mel_of(scalar(3)), high = mel_of(scalar(4));
    if (bins < 1 || dft_length < 1 || sample_rate < 1)
        n.unsupported("num_mel_bins, dft_length and sample_rate below 1");
    const DType dtype = dtype_of_onnx(int(n.i("output_datatype", ::onnx::TensorProto::FLOAT)), n.label() + "'s output");
    const std::int64_t rows = dft_length / 2 + 1;
    // The filters' edges: bins + 2 points a step apart on the mel scale (the step divides the range
    // by bins + 2, as ONNX's definition does), as DFT bin indices rounded down.
    const double step = (high - low) / double(bins + 2);
    std::vector<std::int64_t> edge(std::size_t(bins + 2));
    for (std::size_t k = 0; k < edge.size(); ++k)
        edge[k] =
            std::int64_t(std::floor(double(dft_length + 1) * hertz_of(double(k) * step + low) / double(sample_rate)));
    std::vector<double> w(std::size_t(rows * bins), 0.0);
    const auto at = [&](std::int64_t row, std::int64_t col) -> double& {
        if (row < 0 || row >= rows) n.unsupported("an edge frequency past the DFT's bins");
        return w[std::size_t(row * bins + col)];
    };
    for (std::int64_t i = 0; i < bins; ++i) {
        const std::int64_t left = edge[std::size_t(i)], centre = edge[std::size_t(i + 1)],
                           right = edge[std::size_t(i + 2)];
        if (centre == left) at(centre, i) = 1;
        for (std::int64_t j = left; centre > left && j <= centre; ++j)
            at(j, i) = double(j - left) / double(centre - left);
        for (std::int64_t j = centre; j < right; ++j) at(j, i) = double(right - j) / double(right - centre);
    }
    return {tensor(w, {rows, bins}).to(dtype)};
}

}  // namespace

void add_mel_operators(std::map<std::string, Operator>& t) { t["MelWeightMatrix"] = mel_weight_matrix; }

}  // namespace fluxion::onnx::detail
