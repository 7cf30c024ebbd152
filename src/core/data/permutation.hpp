// permutation.hpp — the shuffled order of one epoch, reproducible from (seed, epoch) on every
// platform: only fully specified parts of <random> are used (seed_seq, mt19937_64).
#pragma once
#include <cstdint>
#include <vector>

namespace fluxion::detail {

// A uniformly random permutation of 0 .. n-1.
std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed, std::uint64_t epoch);

}  // namespace fluxion::detail
