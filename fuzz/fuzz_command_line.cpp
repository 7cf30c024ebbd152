// fuzz_command_line.cpp — libFuzzer target for the examples' command-line parser
// (examples/command_line.cpp). The input is an argv, its arguments separated by NUL bytes. Any
// arguments must be read or refused with std::invalid_argument, never crash or read past argv; a
// whole number is taken exactly when it is the decimal digits of one from 1 to the option's largest
// (never cut down to fit), and a number exactly when it is the text of a finite one above 0.
// Built by fuzz/CMakeLists.txt with clang's -fsanitize=fuzzer,address; see that file for how to run it.
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "command_line.hpp"

namespace {

// The value of `text` if it is nothing but decimal digits and fits in int64, by hand.
std::optional<std::int64_t> digits_value(const std::string& text) {
    if (text.empty()) return std::nullopt;
    std::int64_t n = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        if (__builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, c - '0', &n)) return std::nullopt;
    }
    return n;
}

bool all_digits(const std::string& text) {
    return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

void check_positive(const std::string& text, std::int64_t most) {
    const auto expected = digits_value(text);
    const bool valid = expected && *expected >= 1 && *expected <= most;
    try {
        const std::int64_t n = examples::positive("--n", text, most);
        if (!valid || n != *expected) std::abort();
    } catch (const std::invalid_argument& e) {
        if (valid) std::abort();
        const std::string m = e.what();
        // Too large is said as such, for digits that are a number past the largest; else what it expects.
        if (m.rfind("--n is at most ", 0) != 0 && m.rfind("--n expects a positive whole number, got '", 0) != 0) std::abort();
        const bool too_large = all_digits(text) && (!expected || *expected > most) && text.find_first_not_of('0') != std::string::npos;
        if (too_large != (m.rfind("--n is at most ", 0) == 0)) std::abort();
    }
}

void check_positive_number(const std::string& text) {
    try {
        const double x = examples::positive_number("--eta", text);
        if (!(x > 0) || !std::isfinite(x)) std::abort();
        // Exactly the text of that number: what strtod reads from it, all of it, with no sign or space first.
        if (text.empty() || text.front() == '+' || text.front() == '-' || std::isspace(static_cast<unsigned char>(text.front())))
            std::abort();
        char* end = nullptr;
        errno = 0;
        const double back = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size() || back != x) std::abort();
    } catch (const std::invalid_argument& e) {
        if (std::string(e.what()).rfind("--eta expects a positive number, got '", 0) != 0) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> args{"example"};
    std::string current;
    for (std::size_t i = 0; i < size; ++i) {
        if (data[i] == 0) {
            args.push_back(current);
            current.clear();
        } else {
            current += static_cast<char>(data[i]);
        }
    }
    args.push_back(current);
    if (args.size() > 64) return 0;
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    const int argc = static_cast<int>(argv.size());
    argv.push_back(nullptr);

    for (std::size_t i = 1; i < args.size(); ++i) {
        check_positive(args[i], std::numeric_limits<int>::max());
        check_positive(args[i], std::numeric_limits<std::int64_t>::max());
        check_positive_number(args[i]);
    }

    // An example's options; every value taken must be an argument as it was given.
    int epochs = 8;
    std::int64_t batchsize = 64;
    std::optional<std::int64_t> limit;
    double eta = 2e-3;
    std::optional<std::string> device;
    bool eager = false;
    std::string runs;
    const std::vector<examples::Option> options{
        examples::count("--epochs", epochs), examples::count("--batchsize", batchsize),
        examples::count("--limit", limit), examples::number("--eta", eta), examples::text("--device", device),
        examples::toggle("--eager", eager), examples::positional("runs", [&](const std::string& v) { runs = v; })};
    try {
        if (!examples::parse(argc, argv.data(), options)) return 0;  // --help
        auto given = [&](const std::string& flag, const std::string& value) {
            for (std::size_t i = 1; i + 1 < args.size(); ++i)
                if (args[i] == flag && args[i + 1] == value) return true;
            return false;
        };
        if (epochs < 1 || batchsize < 1 || (limit && *limit < 1) || !(eta > 0) || !std::isfinite(eta)) std::abort();
        if (device && !given("--device", *device)) std::abort();
        bool eager_given = false;
        for (std::size_t i = 1; i < args.size(); ++i) eager_given |= args[i] == "--eager";
        if (eager && !eager_given) std::abort();
    } catch (const std::invalid_argument&) {
        // a clear refusal
    }
    return 0;
}
