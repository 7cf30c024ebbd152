// permutation.cpp — Fisher–Yates shuffling with an unbiased bounded draw. std::shuffle and
// std::uniform_int_distribution are avoided because their algorithms differ between standard
// libraries, which would make a seed mean different orders on different systems.
#include "core/data/permutation.hpp"

#include <numeric>
#include <random>
#include <utility>

namespace fluxion::detail {
namespace {

// Uniform on [0, bound): rejects the low 2^64 mod bound values so every residue is equally likely.
std::uint64_t below(std::mt19937_64& rng, std::uint64_t bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        const std::uint64_t x = rng();
        if (x >= threshold) return x % bound;
    }
}

}  // namespace

std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed, std::uint64_t epoch) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), std::int64_t{0});
    std::seed_seq words{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                        static_cast<std::uint32_t>(epoch), static_cast<std::uint32_t>(epoch >> 32)};
    std::mt19937_64 rng(words);
    for (std::int64_t i = n - 1; i > 0; --i) {
        const auto j = static_cast<std::int64_t>(below(rng, static_cast<std::uint64_t>(i) + 1));
        std::swap(order[i], order[j]);
    }
    return order;
}

}  // namespace fluxion::detail
