// index.cpp — index_select and its gradient index_add (shaders index_select.comp, index_add.comp).
// The indices are read back and checked on the host first: an index out of range raises
// fluxion::ValueError as on the CPU, instead of reading or writing outside the tensor.
#include <algorithm>
#include <string>
#include <vector>

#include "fluxion/error.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

namespace {

void check_indices(int device, const char* op, const std::int64_t* idx, std::int64_t n_idx, std::int64_t bound) {
    std::vector<std::int64_t> host(static_cast<std::size_t>(n_idx));
    copy_to_host(device, host.data(), idx, host.size() * sizeof(std::int64_t));
    for (std::size_t j = 0; j < host.size(); ++j)
        if (host[j] < 0 || host[j] >= bound)
            throw ValueError(std::string(op) + " on Vulkan:" + std::to_string(device) + ": index " +
                             std::to_string(host[j]) + " at position " + std::to_string(j) + " is out of range [0, " +
                             std::to_string(bound) + ")");
}

void launch_index(int device, backend::Op which, const char* op, const char* kernel, DType t, std::int64_t total, std::int64_t n_other,
                  std::int64_t inner, std::int64_t n_idx, const void* src, std::size_t src_elements,
                  const std::int64_t* idx, void* dst, std::size_t dst_elements) {
    Launch launch(device, op);
    // index_select only moves elements; index_add adds them in its compute type.
    const std::string type =
        which == backend::Op::index_select ? bits_suffix(t, launch.ctx(), op) : suffix(t, launch.ctx(), op);
    require(launch.ctx(), which, t, op);
    check_count(std::max<std::int64_t>({total, std::int64_t(src_elements), std::int64_t(dst_elements)}), launch.ctx(), op);
    const std::size_t size = itemsize(t);
    const std::int32_t off0 = launch.buffer(src, src_elements * size, size, false);
    const std::int32_t off1 = launch.buffer(idx, std::size_t(n_idx) * 8, 8, false);
    const std::int32_t off2 = launch.buffer(dst, dst_elements * size, size, true);
    launch.param(std::int32_t(total));
    launch.param(std::int32_t(n_other));
    launch.param(std::int32_t(inner));
    launch.param(std::int32_t(n_idx));
    launch.param(off0);
    launch.param(off1);
    launch.param(off2);
    launch.run(std::string(kernel) + type, launch.groups(total));
}

}  // namespace

void index_select(int device, DType t, std::int64_t outer, std::int64_t n_src, std::int64_t inner, const void* src,
                  const std::int64_t* idx, std::int64_t n_idx, void* dst) {
    const std::int64_t total = outer * n_idx * inner;
    if (total <= 0) return;
    check_indices(device, "index_select", idx, n_idx, n_src);
    launch_index(device, backend::Op::index_select, "index_select", "index_select_", t, total, n_src, inner, n_idx, src,
                 std::size_t(outer * n_src * inner), idx, dst, std::size_t(total));
}

void index_add(int device, DType t, std::int64_t outer, std::int64_t n_dst, std::int64_t inner, const void* src,
               const std::int64_t* idx, std::int64_t n_idx, void* dst) {
    const std::int64_t total = outer * n_dst * inner;
    if (total <= 0 || n_idx <= 0) return;
    check_indices(device, "index_add", idx, n_idx, n_dst);
    launch_index(device, backend::Op::index_add, "index_add", "index_add_", t, total, n_dst, inner, n_idx, src,
                 std::size_t(outer * n_idx * inner), idx, dst, std::size_t(total));
}

}  // namespace fluxion::vulkan
