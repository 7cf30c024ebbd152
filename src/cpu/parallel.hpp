// parallel.hpp — the one way CPU kernels use threads: split a range of independent items into
// contiguous slices, one per OpenMP thread, or run it inline when it is too small to share.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "cpu/kernels.hpp"

namespace fluxion::backend::cpu {

// Calls body(begin, end) on slices covering [0, count). With `worth_threads` false (or one thread
// configured) the body runs inline, without the cost of entering an OpenMP region. The team is
// at most threads(), and at most the calling thread's OpenMP setting, which a helper thread (the
// DataLoader's prefetcher) lowers to 1 so that it does not start a second team.
template <class Body>
void parallel_for(int64_t count, bool worth_threads, Body&& body) {
    const int64_t team = worth_threads ? std::min<int64_t>({threads(), omp_get_max_threads(), count}) : 1;
    if (team <= 1) {
        if (count > 0) body(int64_t(0), count);
        return;
    }
#pragma omp parallel num_threads(int(team))
    {
        const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
        const int64_t begin = count * t / n, end = count * (t + 1) / n;
        if (begin < end) body(begin, end);
    }
}

}  // namespace fluxion::backend::cpu
