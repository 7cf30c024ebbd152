// device.cpp — device selection (DESIGN 3.4), the preference file, synchronisation, allowscalar.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/registry.hpp"
#include "fluxion/device.hpp"
#include "fluxion/error.hpp"

namespace fluxion {
namespace {

constexpr const char* kPreferencesFile = "LocalPreferences.toml";
std::atomic<bool> g_allow_scalar{false};

// The value of `gpu_backend = "..."` in the [fluxion] section of LocalPreferences.toml, if any.
std::optional<std::string> read_preference() {
    std::ifstream in(kPreferencesFile);
    if (!in) return std::nullopt;
    std::string line;
    bool in_section = false;
    while (std::getline(in, line)) {
        auto first = line.find_first_not_of(" \t");
        if (first == std::string::npos || line[first] == '#') continue;
        if (line[first] == '[') {
            in_section = line.find("[fluxion]") == first;
            continue;
        }
        if (!in_section || line.compare(first, 11, "gpu_backend") != 0) continue;
        auto q1 = line.find('"'), q2 = line.rfind('"');
        if (q1 != std::string::npos && q2 > q1) return line.substr(q1 + 1, q2 - q1 - 1);
    }
    return std::nullopt;
}

void info(bool verbose, const std::string& message) {
    if (verbose) std::cerr << "[ Info: " << message << "\n";
}

Device choose_device(bool verbose) {
    const auto& all = detail::backends();
    auto usable = [&](const std::string& name, const char* source) -> std::optional<Device> {
        const auto* e = detail::find_backend(name);
        if (!e) {
            std::cerr << "[ Warning: " << source << " asks for backend \"" << name
                      << "\", which fluxion does not know; falling back. Known: see fx::supported_devices().\n";
            return std::nullopt;
        }
        if (!e->functional) {
            std::cerr << "[ Warning: " << source << " asks for backend " << name << ", which is not functional ("
                      << e->why << "); falling back.\n";
            return std::nullopt;
        }
        info(verbose, "Using backend " + name + " set in " + source + ".");
        return Device{name, 0};
    };
    if (const char* env = std::getenv("FLUXION_GPU_BACKEND"); env && *env)
        if (auto d = usable(env, "FLUXION_GPU_BACKEND")) return *d;
    if (auto pref = read_preference())
        if (auto d = usable(*pref, kPreferencesFile)) return *d;
    for (const auto& e : all) {
        if (e.name == "CPU") break;
        if (e.functional) {
            info(verbose, "Using backend " + e.name + ", the first functional one (" + e.why + ").");
            return Device{e.name, 0};
        }
        info(verbose, "Backend " + e.name + " passed over: " + e.why + ".");
    }
    info(verbose, "Using the CPU.");
    return Device{};
}

}  // namespace

const char* name(DeviceKind kind) {
    switch (kind) {
        case DeviceKind::discrete_gpu: return "discrete GPU";
        case DeviceKind::integrated_gpu: return "integrated GPU";
        case DeviceKind::virtual_gpu: return "virtual GPU";
        case DeviceKind::cpu: return "CPU";
        case DeviceKind::other: return "other";
    }
    return "unknown kind";
}

std::string Device::str() const { return is_cpu() ? type : type + ":" + std::to_string(index); }

Device get_device(GetDeviceOptions options) {
    static std::once_flag once;
    static Device chosen;
    if (options.verbose) return choose_device(true);
    std::call_once(once, [] { chosen = choose_device(false); });
    return chosen;
}

Device get_device(const std::string& backend, int index) {
    if (backend == "CPU") {
        if (index != 0) throw DeviceError("get_device: the CPU has only index 0, not " + std::to_string(index));
        return Device{};
    }
    const auto& table = detail::backend_for(Device{backend, 0});
    int count = table.device_count();
    if (index < 0 || index >= count)
        throw DeviceError("get_device: " + backend + " device " + std::to_string(index) + " does not exist; " +
                          std::to_string(count) + " " + backend + " device(s) are visible (indices 0 to " +
                          std::to_string(count - 1) + "; CUDA_VISIBLE_DEVICES may hide others)");
    return Device{backend, index};
}

bool functional(const std::string& backend) {
    const auto* e = detail::find_backend(backend);
    return e && e->functional;
}

std::vector<std::string> supported_devices() {
    std::vector<std::string> names;
    for (const auto& e : detail::backends()) names.push_back(e.name);
    return names;
}

void gpu_backend(const std::string& backend) {
    std::vector<std::string> lines;
    {
        std::ifstream in(kPreferencesFile);
        for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    // Replace the key inside [fluxion], or add the section.
    bool in_section = false, written = false;
    std::ostringstream out;
    std::string entry = "gpu_backend = \"" + backend + "\"";
    for (const auto& line : lines) {
        auto first = line.find_first_not_of(" \t");
        bool header = first != std::string::npos && line[first] == '[';
        if (header && in_section && !written) {
            out << entry << "\n";
            written = true;
        }
        if (header) in_section = line.find("[fluxion]") == first;
        if (in_section && !header && first != std::string::npos && line.compare(first, 11, "gpu_backend") == 0) {
            if (!written) out << entry << "\n";
            written = true;
            continue;
        }
        out << line << "\n";
    }
    if (!written) out << (in_section ? "" : "[fluxion]\n") << entry << "\n";
    auto tmp = std::string(kPreferencesFile) + ".tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << out.str();
        if (!f.flush()) throw IOError(std::string("gpu_backend: cannot write ") + tmp);
    }
    std::filesystem::rename(tmp, kPreferencesFile);
    std::cerr << "[ Info: New GPU backend set: " << backend << ". Restart the program for it to take effect.\n";
}

std::vector<DeviceInfo> devices(const std::string& backend) {
    std::vector<DeviceInfo> out;
    const auto* e = detail::find_backend(backend);
    if (!e || !e->functional) return out;
    for (int i = 0; i < e->table->device_count(); ++i) {
        DeviceInfo d;
        d.device = Device{backend, backend == "CPU" ? 0 : i};
        backend::DeviceProperties p{};
        e->table->device_properties(i, &p);
        d.name = p.name;
        d.vendor = p.vendor;
        d.kind = p.kind;
        d.total_memory = p.total_bytes;
        d.free_memory = p.free_bytes;
        out.push_back(d);
    }
    return out;
}

void synchronize(const Device& device) { detail::backend_for(device).synchronize(device.index); }
void synchronize() { synchronize(get_device()); }

void allowscalar(bool allowed) { g_allow_scalar = allowed; }
bool scalar_allowed() { return g_allow_scalar; }

}  // namespace fluxion
