// precision.cpp — the TF32 switch.
#include "cuda/precision.hpp"

#include <atomic>

namespace fluxion::cuda {

namespace {
std::atomic<bool> tf32{false};
}

bool tf32_allowed() { return tf32.load(std::memory_order_relaxed); }
void allow_tf32(bool allowed) { tf32.store(allowed, std::memory_order_relaxed); }

}  // namespace fluxion::cuda
