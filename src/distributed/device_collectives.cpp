// device_collectives.cpp — finding the NCCL plugin beside libfluxion-distributed.so, once.
#include "distributed/device_collectives.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>

namespace fluxion::distributed::detail {
namespace {

const DeviceCollectives* load_nccl_plugin() {
    Dl_info self{};
    if (!dladdr(reinterpret_cast<const void*>(&load_nccl_plugin), &self) || !self.dli_fname) return nullptr;
    const auto path = std::filesystem::path(self.dli_fname).parent_path() / "libfluxion-nccl.so";
    std::string why;
    if (void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        if (auto entry = reinterpret_cast<decltype(&fluxion_device_collectives)>(
                dlsym(library, "fluxion_device_collectives")))
            return entry();
        why = "it has no fluxion_device_collectives";
    } else {
        why = dlerror();
    }
    if (rank() == 0)
        std::fprintf(stderr, "fx::distributed: NCCL is not usable (%s); CUDA tensors go through host memory\n",
                     why.c_str());
    return nullptr;
}

}  // namespace

const DeviceCollectives* device_collectives(const Device& device) {
    if (device.type != "CUDA") return nullptr;
    static std::once_flag once;
    static const DeviceCollectives* nccl = nullptr;
    std::call_once(once, [] { nccl = load_nccl_plugin(); });
    return nccl;
}

}  // namespace fluxion::distributed::detail
