// device.cpp — the device entries of the table: whether CUDA is usable, the devices, synchronising.
// (What the kernels support is in supports.cpp.)
#include <algorithm>
#include <cstring>

#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "cuda/kernels.hpp"

namespace fluxion::cuda {

namespace {
void copy_text(const char* text, char* out, std::size_t out_size) {
    if (!out || out_size == 0) return;
    const std::size_t n = std::min(std::strlen(text), out_size - 1);
    std::memcpy(out, text, n);
    out[n] = '\0';
}
}  // namespace

bool functional(char* why, std::size_t why_size) {
    const Probe& p = probe();
    if (p.device_count > 0) return true;
    copy_text(p.reason.c_str(), why, why_size);
    return false;
}

int device_count() { return probe().device_count; }

void device_properties(int device, backend::DeviceProperties* out) {
    select_device_to_list(device);
    cudaDeviceProp prop{};
    FLUXION_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    *out = {};
    copy_text(prop.name, out->name, sizeof out->name);
    copy_text("NVIDIA", out->vendor, sizeof out->vendor);
    out->kind = prop.integrated ? backend::DeviceKind::integrated_gpu : backend::DeviceKind::discrete_gpu;
    FLUXION_CUDA_CHECK(cudaMemGetInfo(&out->free_bytes, &out->total_bytes));
}

void synchronize(int device) { FLUXION_CUDA_CHECK(cudaStreamSynchronize(activate(device).stream)); }

}  // namespace fluxion::cuda
