// checkpoint_format.cpp — a checkpoint's metadata and step counts, checked as they are read: every
// value comes from a file and is untrusted.
#include "core/io/checkpoint_format.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "fluxion/error.hpp"

namespace fluxion::detail {

std::map<std::string, std::string> checkpoint_metadata(double eta, const std::map<std::string, std::string>& extra) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", eta);  // enough digits to read back the same double
    std::map<std::string, std::string> metadata{{kCheckpointMarker, "1"}, {kCheckpointEta, text}};
    for (const auto& [key, value] : extra) metadata[kCheckpointExtra + key] = value;
    return metadata;
}

CheckpointMetadata read_checkpoint_metadata(const std::map<std::string, std::string>& metadata, const std::string& where) {
    const auto eta_text = metadata.find(kCheckpointEta);
    if (!metadata.count(kCheckpointMarker) || eta_text == metadata.end())
        throw IOError(where + "this is not a fluxion checkpoint (no \"" + kCheckpointMarker +
                      "\" metadata); a model saved with fx::save loads with fx::load");
    CheckpointMetadata out;
    const std::string& text = eta_text->second;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out.eta);
    if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(out.eta))
        throw IOError(where + "the metadata \"" + kCheckpointEta + "\" is \"" + text + "\", not a finite number");
    const std::string prefix = kCheckpointExtra;
    for (const auto& [key, value] : metadata)
        if (key.compare(0, prefix.size(), prefix) == 0) out.extra.emplace(key.substr(prefix.size()), value);
    return out;
}

std::int64_t read_step_count(std::span<const std::byte> bytes, const std::string& name, const std::string& where) {
    std::int64_t t = 0;
    if (bytes.size() != sizeof t)
        throw IOError(where + name + " holds " + std::to_string(bytes.size()) + " bytes, not a step count's " +
                      std::to_string(sizeof t) + "; the file is damaged. Nothing was loaded.");
    std::memcpy(&t, bytes.data(), sizeof t);
    if (t < 0)
        throw IOError(where + name + " is " + std::to_string(t) +
                      ", a negative step count; the file is damaged. Nothing was loaded.");
    return t;
}

}  // namespace fluxion::detail
