// preferences.hpp — the `gpu_backend` preference in LocalPreferences.toml (working directory),
// in Flux's layout: a [fluxion] section holding `gpu_backend = "CUDA"`.
#pragma once
#include <optional>
#include <string>

namespace fluxion::detail {

inline constexpr const char* kPreferencesFile = "LocalPreferences.toml";

// The [fluxion] gpu_backend, if the file and the key exist. Throws IOError naming the file, the
// line and the reason when the file is not valid TOML or the value is not a string.
std::optional<std::string> gpu_backend_preference();

// Sets [fluxion] gpu_backend, keeping every other key and section. The file is written anew from
// its parsed form (comments are not kept, as with Julia's Preferences.jl); a malformed file is
// reported as above and left as it is.
void set_gpu_backend_preference(const std::string& backend);

}  // namespace fluxion::detail
