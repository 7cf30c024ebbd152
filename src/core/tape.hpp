// tape.hpp — the autodiff tape: every op whose inputs are tracked appends one entry holding the
// indices of its inputs and output and a backward rule. The reverse sweep walks the entries from last
// to first (docs/ARCHITECTURE.md, "Autodiff"), so everything a step does is visible here.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/tensor_impl.hpp"

namespace fluxion::detail {

// Gradients of the inputs, given the gradient of the output; needs[i] says whether input i wants one
// (an op may skip work for the others and return an undefined tensor there).
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out, const std::vector<bool>& needs)>;

// One input of an op: its tape id (-1 when not tracked) and its dtype, which its gradient takes
// (an op that promotes, bf16 × f32, hands back the wider type).
struct TapeInput {
    std::int64_t id;
    DType dtype;
};

struct TapeEntry {
    const char* op;
    std::vector<TapeInput> inputs;
    std::int64_t output;
    BackwardFn backward;
};

struct TapeData {
    std::vector<TapeEntry> entries;
    std::vector<std::pair<std::int64_t, Tensor>> leaves;  // tape id and handle of each tracked argument
    std::int64_t next_id = 0;
    std::vector<Tensor> grads;  // by tape id, filled by backward()
    bool done = false;
    TapeData* outer = nullptr;
};

TapeData* active_tape();

// Records `out` as the result of `op` on `inputs` when a gradient is being taken and an input is
// tracked; returns the (possibly re-handled) output. Call once per op, after computing `out`.
Tensor record(const char* op, const std::vector<Tensor>& inputs, Tensor out, BackwardFn backward);

// Whether any of the tensors is tracked on the active tape (lets ops skip building closures).
bool any_tracked(const std::vector<Tensor>& inputs);

// Told during a reverse sweep, on the sweeping thread, as soon as the gradient of a tracked argument
// (a leaf) is final: no entry left to run adds to it. Data parallelism starts the allreduce of a
// bucket of gradients there, while the sweep goes on (src/distributed/overlap.cpp).
class LeafObserver {
public:
    virtual ~LeafObserver() = default;
    virtual void sweep_begins() = 0;
    // `leaf` shares the argument's storage; `grad` is the tape's accumulated gradient, undefined
    // when the result does not depend on the leaf.
    virtual void leaf_ready(const Tensor& leaf, const Tensor& grad) = 0;
};
// Installs the observer of this thread's sweeps (null for none).
void set_leaf_observer(LeafObserver* observer);

}  // namespace fluxion::detail
