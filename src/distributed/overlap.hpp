// overlap.hpp — AverageGradients' allreduce started during the backward pass, as PyTorch's
// DistributedDataParallel does: the trainable tensors are laid out in buckets in reverse order (the
// order in which a backward pass finishes their gradients), and as soon as the last gradient of a
// bucket is final the sweep copies it in and starts the bucket's allreduce, while the sweep goes
// on. The optimiser's step then only waits. Host tensors under MPI only; the others take the
// ordinary allreduce. Plans belong to the thread that trains.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fluxion/tensor.hpp"

namespace fluxion::distributed::detail {

// Lays out buckets for `params` (or keeps the plan already made for them), so that the next
// backward passes on this thread over these tensors start their allreduce. A collective: every rank
// checks that the others plan the same tensors. Does nothing outside MPI or for device tensors.
void plan_overlap(const std::vector<Tensor>& params, std::size_t bucket_bytes);

// Finishes what the last backward pass started for `params`: starts the buckets it did not (their
// gradients copied from `grads`), waits for all, and replaces `grads` by the averages. False, with
// `grads` untouched, where there is nothing to finish: no plan for these tensors, or gradients that
// are not the ones the sweep copied (a modifier before AverageGradients changed them); the caller
// then averages `grads` itself.
bool finish_overlap(std::vector<Tensor>& grads, const std::vector<Tensor>& params, std::size_t bucket_bytes);

// Buckets whose allreduce a backward pass started on this thread so far, compiled replays included
// (for tests and benchmarks).
std::int64_t overlapped_buckets();

}  // namespace fluxion::distributed::detail
