// parallel.hpp — the one way CPU kernels use threads: split a range of independent items into
// contiguous slices, one per OpenMP thread, or run it inline when it is too small to share.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cpu/kernels.hpp"

namespace fluxion::backend::cpu {

// The threads that `work` units are worth, PyTorch's rule (at::parallel_for): one up to `grain`
// units, then one per started `grain`. On 16 cores an op of 40,000 elements takes 2 threads, not
// 16: every thread of a region adds its wake-up and its share of the closing barrier, which cost
// more than the few thousand elements it would take.
inline int64_t team_for(double work, double grain = double(kParallelMin)) {
    return work > grain ? int64_t(std::min(std::ceil(work / grain), 1024.0)) : 1;
}

// Calls body(begin, end) on slices covering [0, count), on a team of at most `team` threads
// (team_for's answer, usually). With a team of one (or one thread configured) the body runs inline,
// without the cost of entering an OpenMP region. The team is at most threads(), and at most the
// calling thread's OpenMP setting, which a helper thread (the DataLoader's prefetcher) lowers to 1
// so that it does not start a second team.
template <class Body>
void parallel_for(int64_t count, int64_t team_wanted, Body&& body) {
    const int64_t team = std::min<int64_t>({team_wanted, threads(), omp_get_max_threads(), count});
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

// The parts of `count` tensors laid end to end (tensor i: n[i] elements) that fall in the slice
// [begin, end) of the whole: f(i, lo, hi) for tensor i's elements [lo, hi), in order. The
// multi-tensor kernels give each thread such a slice of all their tensors' elements.
template <class F>
void for_each_part(std::size_t count, const int64_t* n, int64_t begin, int64_t end, F&& f) {
    int64_t first = 0;  // of tensor i in the whole
    for (std::size_t i = 0; i < count && first < end; first += n[i], ++i) {
        const int64_t lo = std::max(begin, first) - first, hi = std::min(end, first + n[i]) - first;
        if (lo < hi) f(i, lo, hi);
    }
}

}  // namespace fluxion::backend::cpu
