// info.cpp — fx::info(): the CPU backend's own lines, then each GPU backend the registry found.
#include "fluxion/info.hpp"

#include <sstream>

#include "core/backend.hpp"
#include "fluxion/device.hpp"

namespace fluxion {

std::string info() {
    std::ostringstream out;
    out << "fluxion " << FLUXION_VERSION << "\n" << backend::cpu_description();
    for (const auto& name : supported_devices()) {
        // Flux's vendor names list devices of the backends below again.
        if (name == "CPU" || name == "AMDGPU" || name == "Metal") continue;
        std::string why;
        if (!functional(name, &why)) {
            out << name << ": not usable: " << why << "\n";
            continue;
        }
        for (const auto& d : devices(name)) out << d << "\n";
    }
    return out.str();
}

}  // namespace fluxion
