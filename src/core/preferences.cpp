// preferences.cpp — reads and writes LocalPreferences.toml with toml++.
#include "core/preferences.hpp"

#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "fluxion/error.hpp"

namespace fluxion::detail {
namespace {

std::string where(const toml::source_region& at) {
    return std::string(kPreferencesFile) + ":" + std::to_string(at.begin.line);
}

// The parsed file, or an empty table when there is none.
toml::table read_file() {
    if (!std::filesystem::exists(kPreferencesFile)) return {};
    try {
        return toml::parse_file(kPreferencesFile);
    } catch (const toml::parse_error& e) {
        throw IOError(where(e.source()) + ": malformed TOML: " + std::string(e.description()) +
                      "; fix or delete the file (fx::gpu_backend rewrites it)");
    }
}

// The [fluxion] section; throws if `fluxion` is something other than a table.
toml::table* fluxion_section(toml::table& file) {
    toml::node* section = file.get("fluxion");
    if (!section) return nullptr;
    if (!section->is_table())
        throw IOError(where(section->source()) + ": `fluxion` must be a section, [fluxion], holding gpu_backend");
    return section->as_table();
}

}  // namespace

std::optional<std::string> gpu_backend_preference() {
    toml::table file = read_file();
    const toml::table* section = fluxion_section(file);
    if (!section) return std::nullopt;
    const toml::node* value = section->get("gpu_backend");
    if (!value) return std::nullopt;
    if (!value->is_string())
        throw IOError(where(value->source()) + ": [fluxion] gpu_backend must be a string such as \"CUDA\"");
    return value->as_string()->get();
}

void set_gpu_backend_preference(const std::string& backend) {
    toml::table file = read_file();
    if (toml::table* section = fluxion_section(file))
        section->insert_or_assign("gpu_backend", backend);
    else
        file.insert("fluxion", toml::table{{"gpu_backend", backend}});
    std::ostringstream text;
    text << toml::toml_formatter(file, toml::format_flags::none) << "\n";
    // toml++ 3.3 writes keys holding ', a tab or a line break without quotes, which is not TOML
    // (found by fuzz/fuzz_preferences.cpp): never replace a readable file with one that is not.
    try {
        (void)toml::parse(text.view());
    } catch (const toml::parse_error& e) {
        throw IOError(std::string("gpu_backend: cannot rewrite ") + kPreferencesFile +
                      ": toml++ would write it as invalid TOML (" + std::string(e.description()) +
                      "; a key holding ', a tab or a line break is written without quotes). The file is left as "
                      "it is: set gpu_backend in its [fluxion] section by hand, or rename that key");
    }
    const std::string tmp = std::string(kPreferencesFile) + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << text.view();
        if (!out.flush()) throw IOError(std::string("gpu_backend: cannot write ") + tmp);
    }
    std::filesystem::rename(tmp, kPreferencesFile);
}

}  // namespace fluxion::detail
