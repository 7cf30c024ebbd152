// operators_tensor_scatter.cpp — ONNX's TensorScatter: a key/value cache with an update written
// into it along the sequence axis, at each batch entry's write index (linear or circular).
#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;

// Each element of the result gathered from the cache or the update (concatenated flat), by indices
// computed on the host from write_indices: differentiable in both, on their device.
Ts tensor_scatter(const Node& n, const Ts& in) {
    const Tensor &past = in.at(0), &update = in.at(1);
    const int rank = int(past.ndim());
    const int axis = axis_of(n.i("axis", -2), rank, n);
    const std::string mode = n.s("mode", "linear");
    if (mode != "linear" && mode != "circular") n.unsupported("mode='" + mode + "' (it is linear or circular)");
    if (axis == 0) n.unsupported("axis 0 (the batch's)");
    if (update.ndim() != rank)
        n.unsupported("an update of rank " + std::to_string(update.ndim()) + " for a cache of rank " +
                      std::to_string(rank));
    for (int d = 0; d < rank; ++d)
        if (d != axis && update.shape(d) != past.shape(d))
            n.unsupported("an update of shape " + to_string(update.shape()) + " for a cache of shape " +
                          to_string(past.shape()) + " (they differ only along the axis)");
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= past.shape(d);
    for (int d = axis + 1; d < rank; ++d) inner *= past.shape(d);
    const std::int64_t batch = past.shape(0), per_batch = outer / batch;
    const std::int64_t max_len = past.shape(axis), len = update.shape(axis);
    std::vector<std::int64_t> write(std::size_t(batch), 0);
    if (in.size() > 2 && in[2].defined()) {
        values_read_on_host(n, "write_indices");
        write = host_ints(in[2]);
        if (std::int64_t(write.size()) != batch)
            n.unsupported(std::to_string(write.size()) + " write_indices for a batch of " + std::to_string(batch));
    }
    std::vector<std::int64_t> source(std::size_t(past.numel()));
    for (std::size_t i = 0; i < source.size(); ++i) source[i] = std::int64_t(i);
    for (std::int64_t a = 0; a < outer; ++a) {
        const std::int64_t w = write[std::size_t(a / per_batch)];
        for (std::int64_t j = 0; j < len; ++j) {
            std::int64_t c = w + j;
            if (mode == "circular") c = ((c % max_len) + max_len) % max_len;
            if (c < 0 || c >= max_len)
                throw ValueError("fx::onnx: " + n.label() + ": write index " + std::to_string(w) + " plus " +
                                 std::to_string(j) + " is outside the cache's " + std::to_string(max_len) +
                                 " positions (mode='linear')");
            for (std::int64_t q = 0; q < inner; ++q)
                source[std::size_t((a * max_len + c) * inner + q)] = past.numel() + (a * len + j) * inner + q;
        }
    }
    const Tensor both = concat({past.reshape({past.numel()}), update.reshape({update.numel()})}, 0);
    return {gather_flat(both, source, past.shape())};
}

}  // namespace

void add_tensor_scatter_operators(std::map<std::string, Operator>& t) { t["TensorScatter"] = tensor_scatter; }

}  // namespace fluxion::onnx::detail
