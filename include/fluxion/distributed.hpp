// fluxion/distributed.hpp — data-parallel training over several processes (Flux's DistributedUtils,
// PyTorch's DistributedDataParallel) on MPI: every process holds the whole model, trains on its
// shard of each batch, and the gradients are averaged before every step. Link fluxion::distributed
// (libfluxion-distributed, built where MPI is found); programs that do not use it need no MPI.
//
//   mpirun -np 4 ./train
//   fx::distributed::init();                                    // reads mpirun's or srun's environment
//   auto model = fx::distributed::broadcast(make_model());      // rank 0's parameters everywhere
//   auto opt = fx::setup(fx::OptimiserChain(fx::distributed::AverageGradients{}, fx::Adam{}), model);
//   fx::DataLoader loader({X, Y}, {.batchsize = 32, .shuffle = true, .shard = fx::distributed::shard()});
//   fx::train(lossfn, model, loader, opt, {.progress = fx::distributed::rank() == 0});
//   fx::distributed::save_checkpoint("run.safetensors", model, opt);   // rank 0 writes, all wait
//
// Every process must make the same collective calls in the same order with tensors of the same
// shapes and dtypes (checked: a mismatch is a CommunicationError on every rank). Host tensors go
// through MPI; CUDA tensors through NCCL where libfluxion-nccl.so was built (not yet run on a GPU);
// tensors on other devices are staged through host memory.
//
// Failure: a collective that does not complete within FLUXION_DISTRIBUTED_TIMEOUT seconds (default
// 600) throws CommunicationError instead of hanging, as does any MPI error; after that the processes
// are out of step, so later collectives throw too and the exit aborts the whole job. A process that
// dies (an uncaught exception, a signal, exit without finishing) makes mpirun stop the others.
//
// Outside an MPI launcher (no mpirun, srun or PMI environment), init() sets up a world of one
// process and every collective returns its input: the same program runs alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/data.hpp"
#include "fluxion/error.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/io.hpp"
#include "fluxion/optimisers.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion::distributed {

// A collective failed, timed out, or the processes disagree on what they exchange.
struct CommunicationError : Error {
    using Error::Error;
};

// Starts MPI from the launcher's environment (MPI_Init_thread, unless the program already did);
// idempotent. MPI is finalised at exit. The functions below throw ValueError before init().
void init();
bool initialized();
int rank();        // this process, 0 .. world_size() - 1
int world_size();  // the processes of the job
// This process's index among those on the same machine: the GPU it should take,
// e.g. fx::get_device("CUDA", fx::distributed::local_rank()).
int local_rank();
// This process's part of the data, for DataLoaderOptions::shard.
inline Shard shard() { return {rank(), world_size()}; }
void barrier();

enum class ReduceOp { sum, mean, max, min };

// Messages carry at most this many bytes: several are in flight at once, few in all.
inline constexpr std::size_t default_bucket_bytes = std::size_t{4} << 20;

namespace detail {
// The core of every collective: `tensors` (any devices, dtypes, shapes, including empty) packed by
// dtype into flat buckets of at most bucket_bytes (in host memory; on the GPU with NCCL). Returns new tensors of the same shapes,
// dtypes and devices; undefined handles stay undefined.
std::vector<Tensor> allreduce(const std::vector<Tensor>& tensors, ReduceOp op, std::size_t bucket_bytes,
                              const char* operation);
std::vector<Tensor> broadcast(const std::vector<Tensor>& tensors, int root, std::size_t bucket_bytes,
                              const char* operation);
// Runs `write` on rank 0 only; every rank returns when it is done, and throws IOError if it failed.
void on_rank0(const char* operation, const std::function<void()>& write);

template <class T, class F> T map_leaves(const T& x, F&& collective) {
    T y = x;
    std::vector<Tensor*> leaves;
    visit_tensors(y, [&](const std::string&, Tensor& t) { leaves.push_back(&t); });
    std::vector<Tensor> in;
    in.reserve(leaves.size());
    for (Tensor* t : leaves) in.push_back(*t);
    std::vector<Tensor> out = collective(in);
    for (std::size_t i = 0; i < leaves.size(); ++i) *leaves[i] = std::move(out[i]);
    return y;
}
}  // namespace detail

// ---- collectives: every rank calls them with the same shapes; each returns new tensors ----
// mean is for floating types (DTypeError otherwise); on bool, sum and max are or, min is and;
// through MPI, f16 and bf16 are reduced in f32.
inline Tensor allreduce(const Tensor& t, ReduceOp op = ReduceOp::sum) {
    return detail::allreduce({t}, op, default_bucket_bytes, "allreduce")[0];
}
inline Tensor broadcast(const Tensor& t, int root = 0) {
    return detail::broadcast({t}, root, default_bucket_bytes, "broadcast")[0];
}
// The same over every tensor of a structure fmap walks (a model, its gradients), in few messages.
template <class T> T allreduce(const T& x, ReduceOp op = ReduceOp::sum) {
    return detail::map_leaves(
        x, [&](const std::vector<Tensor>& ts) { return detail::allreduce(ts, op, default_bucket_bytes, "allreduce"); });
}
template <class T> T broadcast(const T& x, int root = 0) {
    return detail::map_leaves(
        x, [&](const std::vector<Tensor>& ts) { return detail::broadcast(ts, root, default_bucket_bytes, "broadcast"); });
}
// An optimiser state from `root`: moments, step counts and frozen flags (the rule is the code's).
template <class Rule> OptimiserState<Rule> broadcast(const OptimiserState<Rule>& opt, int root = 0) {
    OptimiserState<Rule> out = opt;
    std::vector<Tensor> ts;
    std::vector<std::int64_t> steps;
    for (const ParamState& p : opt.params) {
        ts.push_back(p.state1), ts.push_back(p.state2), ts.push_back(p.state3);
        steps.push_back(p.t), steps.push_back(p.frozen ? 1 : 0);
    }
    ts.push_back(tensor(steps, Shape{std::int64_t(steps.size())}));
    ts = detail::broadcast(ts, root, default_bucket_bytes, "broadcast");
    steps = ts.back().to_vector<std::int64_t>();
    for (std::size_t i = 0; i < out.params.size(); ++i) {
        out.params[i].state1 = ts[3 * i], out.params[i].state2 = ts[3 * i + 1], out.params[i].state3 = ts[3 * i + 2];
        out.params[i].t = steps[2 * i], out.params[i].frozen = steps[2 * i + 1] != 0;
    }
    return out;
}

// ---- data parallelism ----
// An optimiser modifier that replaces each step's gradients by their mean over all processes (a
// bucketed allreduce), so every process takes the same step and the replicas stay identical. Put
// it first in the chain, before modifiers such as ClipNorm that must see the global gradient.
// With `overlap` (host tensors), the allreduce of each bucket starts during the backward pass as
// soon as its gradients are final, as PyTorch's DistributedDataParallel does, and the step only
// waits: buckets are laid out when the optimiser is set up (every rank checks that the others
// plan the same tensors), in reverse order of the model's tensors. Where gradients reach the step
// changed (a modifier before this one), the step averages them itself and the early work is dropped.
// fx::compile replays both: the allreduce's start and wait are recorded host calls among the
// copies that pack the gradients and the optimiser's kernels (steps whose gradients go through
// NCCL run eagerly under CompileOptions::fall_back, as fx::train does).
struct AverageGradients {
    std::size_t bucket_bytes = default_bucket_bytes;
    bool overlap = true;
    void prepare(const std::vector<Tensor>& params) const;
    void modify(std::vector<Tensor>& grads, const std::vector<Tensor>& params) const;
};

// ---- saving: rank 0 writes; every rank returns once the file is complete ----
// A failure on rank 0 is an IOError on every rank. Every rank may load the file afterwards (with
// fx::load / fx::load_checkpoint, on any number of processes), or rank 0 alone, then broadcast.
template <class Model> void save(const std::filesystem::path& path, const Model& model) {
    detail::on_rank0("fx::distributed::save", [&] { fluxion::save(path, model); });
}
template <class Model, class Rule>
void save_checkpoint(const std::filesystem::path& path, const Model& model, const OptimiserState<Rule>& optimiser,
                     const std::map<std::string, std::string>& extra = {}) {
    detail::on_rank0("fx::distributed::save_checkpoint",
                     [&] { fluxion::save_checkpoint(path, model, optimiser, extra); });
}

}  // namespace fluxion::distributed
