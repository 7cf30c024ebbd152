// device.cpp — the device entries of the table: whether CUDA is usable, the devices, synchronising.
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

void device_info(int device, char* name, std::size_t name_size, std::size_t* total, std::size_t* free) {
    select_device(device);
    cudaDeviceProp prop{};
    FLUXION_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    copy_text(prop.name, name, name_size);
    std::size_t free_bytes = 0, total_bytes = 0;
    FLUXION_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (total) *total = total_bytes;
    if (free) *free = free_bytes;
}

void synchronize(int device) { FLUXION_CUDA_CHECK(cudaStreamSynchronize(activate(device).stream)); }

}  // namespace fluxion::cuda
