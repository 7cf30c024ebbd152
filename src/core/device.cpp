// device.cpp — device selection by priority (docs/ARCHITECTURE.md, "Devices and plugins"),
// Flux's vendor names, capability queries, printing, synchronisation, allowscalar. The preference
// file is preferences.cpp's.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>

#include "core/preferences.hpp"
#include "core/registry.hpp"
#include "fluxion/device.hpp"
#include "fluxion/error.hpp"

namespace fluxion {
namespace {

std::atomic<bool> g_allow_scalar{false};
std::atomic<bool> g_allow_tf32{false};

void info(bool verbose, const std::string& message) {
    if (verbose) std::cerr << "[ Info: " << message << "\n";
}

void warn(const std::string& message) { std::cerr << "[ Warning: " << message << "\n"; }

// The first device of a functional backend that is not cpu-kind, if any.
std::optional<int> first_gpu(const detail::BackendEntry& e) {
    for (int i = 0; i < e.table->device_count(); ++i) {
        backend::DeviceProperties p{};
        e.table->device_properties(i, &p);
        if (p.kind != DeviceKind::cpu) return i;
    }
    return std::nullopt;
}

// The device a backend or vendor name stands for when it is named (variable or preference): its
// first GPU, else its first device even if cpu-kind; nothing, with a warning, if it cannot be used.
std::optional<Device> named(const std::string& name, const std::string& source, bool verbose) {
    if (name == "CPU") {
        info(verbose, "Using the CPU, set in " + source + ".");
        return Device{};
    }
    std::string why;
    if (!functional(name, &why)) {
        warn(source + " asks for \"" + name + "\", which is not usable (" + why + "); falling back.");
        return std::nullopt;
    }
    Device d;
    if (const auto* e = detail::find_backend(name)) {
        d = Device{e->name, first_gpu(*e).value_or(0)};
    } else {
        const auto* v = detail::find_vendor_name(name);
        d = Device{v->name, v->indices.front()};
    }
    info(verbose, "Using " + d.str() + ", set in " + source + ".");
    return d;
}

// The functional backend of highest priority with a device that is not cpu-kind, else the CPU.
Device by_priority(bool verbose) {
    std::optional<Device> chosen;
    for (const auto& e : detail::backends()) {
        if (e.table == &backend::cpu_backend()) break;
        if (!e.functional) {
            info(verbose, "Backend " + e.name + " passed over: " + e.why + ".");
            continue;
        }
        if (chosen) {
            info(verbose, "Backend " + e.name + " passed over: its priority, " + std::to_string(e.table->priority) +
                              ", is lower than " + chosen->type + "'s.");
            continue;
        }
        if (auto i = first_gpu(e)) {
            chosen = Device{e.name, *i};
            info(verbose, "Using " + chosen->str() + ": " + e.name + " is the functional backend of highest priority (" +
                              std::to_string(e.table->priority) + ") with a GPU (" + e.why + ").");
        } else {
            info(verbose, "Backend " + e.name + " passed over: cpu-kind device skipped (its devices emulate a GPU on "
                          "the CPU, where the CPU backend is faster); name it to use it: FLUXION_GPU_BACKEND=" +
                              e.name + " or fx::gpu_backend(\"" + e.name + "\").");
        }
    }
    if (!chosen) info(verbose, "Using the CPU.");
    return chosen.value_or(Device{});
}

Device choose_device(bool verbose) {
    if (const char* env = std::getenv("FLUXION_GPU_BACKEND"); env && *env)
        if (auto d = named(env, "FLUXION_GPU_BACKEND", verbose)) return *d;
    if (auto pref = detail::gpu_backend_preference())
        if (auto d = named(*pref, detail::kPreferencesFile, verbose)) return *d;
    return by_priority(verbose);
}

std::string gib(std::size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(std::size_t{1} << 30));
    return text;
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

std::ostream& operator<<(std::ostream& out, const Device& device) {
    backend::DeviceProperties p{};
    try {
        p = detail::properties(device);
    } catch (const DeviceError&) {
        return out << device.str();
    }
    out << device.str() << " (";
    if (const auto* v = detail::find_vendor_name(device.type)) out << v->served_by->name << ": ";
    return out << p.name << ")";
}

std::ostream& operator<<(std::ostream& out, DeviceKind kind) { return out << name(kind); }

std::ostream& operator<<(std::ostream& out, const DeviceInfo& d) {
    return out << d.device.str() << ": " << d.name << " (" << (d.vendor.empty() ? "unknown vendor" : d.vendor) << ", "
               << d.kind << ", " << gib(d.total_memory) << ", " << gib(d.free_memory) << " free)";
}

Device get_device(GetDeviceOptions options) {
    static std::once_flag once;
    static Device chosen;
    if (options.verbose) return choose_device(true);
    std::call_once(once, [] { chosen = choose_device(false); });
    return chosen;
}

Device get_device(const std::string& backend, int index) {
    const std::string asked = backend + ":" + std::to_string(index);
    if (backend == "CPU") {
        if (index != 0) throw DeviceError("get_device: the CPU has only index 0, not " + std::to_string(index));
        return Device{};
    }
    const auto* e = detail::find_backend(backend);
    if (const auto* v = e ? nullptr : detail::find_vendor_name(backend)) {
        if (!v->served_by) throw DeviceError("get_device: " + asked + " is not usable: " + v->why);
        if (std::find(v->indices.begin(), v->indices.end(), index) == v->indices.end()) {
            std::string list;
            for (int i : v->indices) list += (list.empty() ? "" : ", ") + std::string(v->name) + ":" + std::to_string(i);
            throw DeviceError("get_device: " + asked + " does not exist: " + v->served_by->name + ":" +
                              std::to_string(index) + " is not a GPU of vendor " + v->vendor + "; those are " + list);
        }
        return Device{v->name, index};
    }
    if (!e) throw DeviceError("get_device: " + asked + " is unknown: " + detail::unknown_backend(backend));
    if (!e->functional) throw DeviceError("get_device: " + asked + " is not usable: " + e->why);
    const int count = e->table->device_count();
    if (index < 0 || index >= count)
        throw DeviceError("get_device: " + e->name + " device " + std::to_string(index) + " does not exist; " +
                          std::to_string(count) + " " + e->name + " device(s) are visible (indices 0 to " +
                          std::to_string(count - 1) + "; CUDA_VISIBLE_DEVICES may hide others)");
    return Device{e->name, index};
}

Device get_device(const std::string& backend) {
    const auto* v = detail::find_backend(backend) ? nullptr : detail::find_vendor_name(backend);
    return get_device(backend, v && v->served_by ? v->indices.front() : 0);
}

bool functional(const std::string& backend, std::string* why) {
    std::string reason;
    bool ok = false;
    if (const auto* e = detail::find_backend(backend)) {
        ok = e->functional;
        reason = e->why;
    } else if (const auto* v = detail::find_vendor_name(backend)) {
        ok = v->served_by != nullptr;
        reason = ok ? "served by " + v->served_by->name : v->why;
    } else {
        reason = detail::unknown_backend(backend);
    }
    if (why && !ok) *why = reason;
    return ok;
}

std::vector<std::string> supported_devices() {
    std::vector<std::string> names;
    for (const auto& e : detail::backends())
        if (e.table != &backend::cpu_backend()) names.push_back(e.name);
    for (const auto& v : detail::vendor_name_list())
        if (!detail::find_backend(v)) names.push_back(v);
    names.push_back("CPU");
    return names;
}

void gpu_backend(const std::string& backend) {
    detail::set_gpu_backend_preference(backend);
    std::cerr << "[ Info: New GPU backend set: " << backend << ". Restart the program for it to take effect.\n";
}

bool supports(const Device& device, Op op, DType t, std::string* why) {
    const backend::Backend& table = detail::backend_for(device);
    if (!table.supports) return true;
    char reason[512] = {0};
    const bool ok = table.supports(device.index, op, t, reason, sizeof reason);
    if (why && !ok) *why = reason;
    return ok;
}

std::vector<DeviceInfo> devices(const std::string& backend) {
    std::vector<DeviceInfo> out;
    std::vector<Device> listed;
    if (const auto* v = detail::find_vendor_name(backend)) {
        for (int i : v->indices) listed.push_back(Device{v->name, i});
    } else if (const auto* e = detail::find_backend(backend); e && e->functional) {
        for (int i = 0; i < e->table->device_count(); ++i) listed.push_back(Device{e->name, i});
    }
    for (const auto& d : listed) {
        const backend::DeviceProperties p = detail::properties(d);
        out.push_back({d, p.name, p.vendor, p.kind, p.total_bytes, p.free_bytes});
    }
    return out;
}

void synchronize(const Device& device) { detail::backend_for(device).synchronize(device.index); }
void synchronize() { synchronize(get_device()); }

void allowscalar(bool allowed) { g_allow_scalar = allowed; }
bool scalar_allowed() { return g_allow_scalar; }

void allow_tf32(bool allowed) {
    // Each plugin with a reduced-precision f32 path exports the switch (cuda/exports.hpp).
    for (const auto& b : detail::backends())
        if (auto set = reinterpret_cast<void (*)(bool)>(detail::plugin_symbol(b, "fluxion_allow_tf32"))) set(allowed);
    g_allow_tf32 = allowed;
}
bool tf32_allowed() { return g_allow_tf32; }

}  // namespace fluxion
