// command_line.cpp — the examples' parser. Numbers are read with std::from_chars, so a value is
// taken only when it is exactly a number's text: no sign, no spaces, nothing after it, and a value
// too large for its option is refused, never cut down.
#include "command_line.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <system_error>

namespace examples {

Option value(std::string name, std::function<void(const std::string&)> set) {
    return {std::move(name), Option::Kind::value, std::move(set)};
}

Option positional(std::string name, std::function<void(const std::string&)> set) {
    return {std::move(name), Option::Kind::positional, std::move(set)};
}

Option toggle(std::string name, bool& on) {
    return {std::move(name), Option::Kind::toggle, [&on](const std::string&) { on = true; }};
}

Option count(std::string name, int& target) {
    return value(name, [name, &target](const std::string& v) {
        target = static_cast<int>(positive(name, v, std::numeric_limits<int>::max()));
    });
}

Option count(std::string name, std::int64_t& target) {
    return value(name, [name, &target](const std::string& v) { target = positive(name, v); });
}

Option count(std::string name, std::optional<std::int64_t>& target) {
    return value(name, [name, &target](const std::string& v) { target = positive(name, v); });
}

Option number(std::string name, double& target) {
    return value(name, [name, &target](const std::string& v) { target = positive_number(name, v); });
}

Option text(std::string name, std::string& target) {
    return value(std::move(name), [&target](const std::string& v) { target = v; });
}

Option text(std::string name, std::optional<std::string>& target) {
    return value(std::move(name), [&target](const std::string& v) { target = v; });
}

Option text(std::string name, std::filesystem::path& target) {
    return value(std::move(name), [&target](const std::string& v) { target = v; });
}

Option text(std::string name, std::optional<std::filesystem::path>& target) {
    return value(std::move(name), [&target](const std::string& v) { target = v; });
}

bool parse(int argc, const char* const* argv, const std::vector<Option>& options) {
    auto next_positional = options.begin();
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") return false;
        const auto named = std::find_if(options.begin(), options.end(), [&](const Option& o) {
            return o.kind != Option::Kind::positional && o.name == arg;
        });
        if (named != options.end()) {
            if (named->kind == Option::Kind::toggle) {
                named->set("");
                continue;
            }
            if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
            named->set(argv[++i]);
            continue;
        }
        next_positional = std::find_if(next_positional, options.end(),
                                       [](const Option& o) { return o.kind == Option::Kind::positional; });
        if (next_positional == options.end()) throw std::invalid_argument("unknown option: " + arg);
        next_positional->set(arg);
        ++next_positional;
    }
    return true;
}

std::int64_t positive(const std::string& name, const std::string& text, std::int64_t most) {
    std::int64_t n = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
    const bool digits = !text.empty() && text.front() != '-' && end == text.data() + text.size();
    if (error == std::errc::result_out_of_range && digits)
        throw std::invalid_argument(name + " is at most " + std::to_string(most) + ", got '" + text + "'");
    if (error != std::errc() || !digits || n < 1)
        throw std::invalid_argument(name + " expects a positive whole number, got '" + text + "'");
    if (n > most) throw std::invalid_argument(name + " is at most " + std::to_string(most) + ", got '" + text + "'");
    return n;
}

double positive_number(const std::string& name, const std::string& text) {
    double x = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (error != std::errc() || end != text.data() + text.size() || !(x > 0) || !std::isfinite(x))
        throw std::invalid_argument(name + " expects a positive number, got '" + text + "'");
    return x;
}

int main_with(const char* program, const char* usage, int argc, const char* const* argv,
              const std::vector<Option>& options, const std::function<int()>& run, const std::function<void()>& check) {
    try {
        if (!parse(argc, argv, options)) {
            std::cout << usage;
            return 0;
        }
        if (check) check();
    } catch (const std::invalid_argument& e) {
        std::cerr << program << ": " << e.what() << "\n\n" << usage;
        return 2;
    }
    try {
        return run();
    } catch (const std::exception& e) {  // fx::Error names the operation itself
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace examples
