// command_line.hpp — the examples' one command-line parser and main() wrapper: options by name,
// each with its value checked, --help, and the exit codes (0 done, 1 failed, 2 a bad option).
// Plain C++, no fluxion: the fuzzer builds it alone (fuzz/fuzz_command_line.cpp).
//
//   Options o;
//   return examples::main_with("sequence_lstm", kUsage, argc, argv,
//       {examples::count("--epochs", o.epochs), examples::text("--out", o.out), examples::toggle("--eager", o.eager)},
//       [&] { return train(o); });
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace examples {

// One option: "--name VALUE", a "--name" toggle, or a positional argument (its name for messages).
struct Option {
    enum class Kind { value, toggle, positional };
    std::string name;
    Kind kind = Kind::value;
    std::function<void(const std::string& value)> set;  // throws std::invalid_argument to refuse; "" for a toggle
};

Option value(std::string name, std::function<void(const std::string&)> set);
Option positional(std::string name, std::function<void(const std::string&)> set);
Option toggle(std::string name, bool& on);
// Positive whole numbers (at most what the target holds), positive finite numbers, any text.
Option count(std::string name, int& target);
Option count(std::string name, std::int64_t& target);
Option count(std::string name, std::optional<std::int64_t>& target);
Option number(std::string name, double& target);
Option text(std::string name, std::string& target);
Option text(std::string name, std::optional<std::string>& target);
Option text(std::string name, std::filesystem::path& target);
Option text(std::string name, std::optional<std::filesystem::path>& target);

// Reads argv[1..argc) in order into `options`; false where --help or -h comes first. An argument
// that names no option goes to the next positional one. Throws std::invalid_argument at the first
// problem: "unknown option: X" (no positional left either), "X needs a value", or what a value's
// check says.
bool parse(int argc, const char* const* argv, const std::vector<Option>& options);

// `text` as a whole number from 1 to `most`, exactly its decimal digits; else std::invalid_argument
// naming `name` ("--epochs expects a positive whole number, got '0'").
std::int64_t positive(const std::string& name, const std::string& text,
                      std::int64_t most = std::numeric_limits<std::int64_t>::max());
// `text` as a finite number above 0, exactly its text; else std::invalid_argument naming `name`.
double positive_number(const std::string& name, const std::string& text);

// An example's main(): parses argv into `options` (`check` then sees the whole; it throws
// std::invalid_argument for a bad combination), then returns run()'s exit code. A bad option prints
// "PROGRAM: reason", a blank line and `usage` to stderr and gives 2; --help prints `usage` and
// gives 0; an exception from run prints "error: " and its text to stderr and gives 1.
int main_with(const char* program, const char* usage, int argc, const char* const* argv,
              const std::vector<Option>& options, const std::function<int()>& run,
              const std::function<void()>& check = {});

}  // namespace examples
