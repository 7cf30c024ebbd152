// collectives.cpp — allreduce and broadcast of lists of tensors. Tensors on a GPU with a device
// plugin (NCCL) stay there; the others are staged to host memory, packed by element type into one
// flat buffer, exchanged in buckets of at most bucket_bytes that are all in flight at once
// (MPI_Iallreduce / MPI_Ibcast), then unpacked to each tensor's dtype and device. An allreduce's
// results are views of its buffer, which comes from the host allocator's cache: one copy in and no
// fresh pages. Nonblocking calls, though Open MPI's blocking MPI_Allreduce was faster on shared
// memory (BENCHMARKS.md, "More than one process"): a blocking call cannot honour
// FLUXION_DISTRIBUTED_TIMEOUT.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/compile/recorder.hpp"
#include "distributed/device_collectives.hpp"
#include "distributed/exchange.hpp"
#include "distributed/runtime.hpp"
#include "fluxion/distributed.hpp"

namespace fluxion::distributed::detail {
namespace {

std::string describe(const std::vector<Tensor>& tensors) {
    std::string s = std::to_string(tensors.size()) + " tensors (";
    for (std::size_t i = 0; i < tensors.size() && i < 4; ++i)
        s += (i ? ", " : "") + (tensors[i].defined() ? summary(tensors[i]) : std::string("undefined"));
    return s + (tensors.size() > 4 ? ", ...)" : ")");
}

bool on_device(const Tensor& t) { return t.defined() && t.numel() > 0 && device_collectives(t.device()); }

// Sends the tensors a device plugin takes to it, one call per device in order of appearance, and
// the rest through host memory; puts the results back in the original order.
template <class OnDevice, class ThroughHost>
std::vector<Tensor> route(const std::vector<Tensor>& tensors, OnDevice&& on_device_call, ThroughHost&& through_host) {
    std::vector<Device> devices;
    std::vector<std::vector<std::size_t>> members;
    std::vector<std::size_t> host;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (!on_device(tensors[i])) {
            host.push_back(i);
            continue;
        }
        const auto g =
            static_cast<std::size_t>(std::find(devices.begin(), devices.end(), tensors[i].device()) - devices.begin());
        if (g == devices.size()) {
            devices.push_back(tensors[i].device());
            members.emplace_back();
        }
        members[g].push_back(i);
    }
    std::vector<Tensor> out(tensors.size());
    auto run = [&](const std::vector<std::size_t>& indices, auto&& call) {
        std::vector<Tensor> part;
        for (std::size_t i : indices) part.push_back(tensors[i]);
        std::vector<Tensor> done = call(part);
        for (std::size_t k = 0; k < indices.size(); ++k) out[indices[k]] = std::move(done[k]);
    };
    for (std::size_t g = 0; g < devices.size(); ++g)
        run(members[g],
            [&](const std::vector<Tensor>& part) { return on_device_call(*device_collectives(devices[g]), part); });
    run(host, through_host);
    return out;
}

// The tensors of one wire type, packed end to end in one host tensor. With arithmetic (allreduce),
// `flat` has the wire type and the results are views of it: one copy in, none out. A broadcast
// moves bytes: `flat` is u8 and the results are copied out of it.
struct Group {
    DType wire;
    std::vector<std::size_t> members;  // indices into the tensor list
    Tensor flat;
};

std::size_t bytes_of(const Tensor& t) { return static_cast<std::size_t>(t.numel()) * itemsize(t.dtype()); }

std::vector<Group> pack(const std::vector<Tensor>& tensors, bool as_wire_type) {
    std::vector<Group> groups;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (!tensors[i].defined()) continue;
        const DType wire = as_wire_type ? wire_dtype(tensors[i].dtype()) : DType::u8;
        auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.wire == wire; });
        if (g == groups.end()) g = groups.insert(groups.end(), Group{wire, {}, {}});
        g->members.push_back(i);
    }
    for (Group& g : groups) {
        std::int64_t total = 0;
        for (std::size_t i : g.members)
            total += as_wire_type ? tensors[i].numel() : static_cast<std::int64_t>(bytes_of(tensors[i]));
        g.flat = empty({total}, {.dtype = g.wire});
        std::int64_t at = 0;
        for (std::size_t i : g.members) {
            const Tensor& t = tensors[i];
            if (as_wire_type) {
                if (t.numel()) g.flat.slice(0, at, at + t.numel()).reshape(t.shape()).copy_(t.to(g.wire));
                at += t.numel();
            } else {
                const Tensor host = t.to(Device{}).contiguous();
                if (const std::size_t n = bytes_of(host))
                    std::memcpy(g.flat.data<std::byte>() + at, host.data_ptr(), n);
                at += static_cast<std::int64_t>(bytes_of(host));
            }
        }
    }
    return groups;
}

std::vector<Tensor> unpack(const std::vector<Tensor>& tensors, const std::vector<Group>& groups) {
    std::vector<Tensor> out(tensors.size());
    for (const Group& g : groups) {
        std::int64_t at = 0;
        for (std::size_t i : g.members) {
            const Tensor& original = tensors[i];
            Tensor host;
            if (g.wire != DType::u8 || original.dtype() == DType::u8) {
                host = g.flat.slice(0, at, at + original.numel()).reshape(original.shape());
                at += original.numel();
            } else {  // bytes of another type
                host = empty(original.shape(), {.dtype = original.dtype()});
                if (const std::size_t n = bytes_of(host))
                    std::memcpy(host.data_ptr(), g.flat.data<std::byte>() + at, n);
                at += static_cast<std::int64_t>(bytes_of(host));
            }
            out[i] = host.to(original.dtype()).to(original.device());
        }
    }
    return out;
}

void check_bucket_bytes(std::size_t bucket_bytes, const char* operation) {
    if (bucket_bytes < 8 || bucket_bytes > (std::size_t{1} << 30))
        throw ValueError(std::string("fx::distributed::") + operation + ": bucket_bytes is " +
                         std::to_string(bucket_bytes) + "; it must be between 8 bytes and 1 GiB (default 4 MiB)");
}

}  // namespace

void check_same_everywhere(const std::vector<Tensor>& tensors, const char* operation) {
    std::uint64_t digest = 1469598103934665603ull;
    auto mix = [&](std::int64_t v) { digest = (digest ^ static_cast<std::uint64_t>(v)) * 1099511628211ull; };
    mix(static_cast<std::int64_t>(tensors.size()));
    for (const Tensor& t : tensors) {
        mix(t.defined() ? t.ndim() : -1);
        if (!t.defined()) continue;
        mix(static_cast<std::int64_t>(t.dtype()));
        mix(on_device(t) ? 1 : 0);  // NCCL on one rank and MPI on another would never meet
        for (std::int64_t n : t.shape()) mix(n);
    }
    const auto d = static_cast<std::int64_t>(digest >> 1);  // non-negative, so -d cannot overflow
    std::int64_t bounds[2] = {d, -d};
    std::vector<MPI_Request> request(1);
    check(MPI_Iallreduce(MPI_IN_PLACE, bounds, 2, MPI_INT64_T, MPI_MAX, communicator(), request.data()), operation);
    wait_all(request, operation);
    if (bounds[0] != -bounds[1])
        throw CommunicationError(std::string("fx::distributed::") + operation + ": the processes pass different " +
                                 "tensors (count, shapes or dtypes); rank " + std::to_string(rank()) + " passes " +
                                 describe(tensors) + ". Every rank must make the same calls with the same model");
}

std::vector<Tensor> allreduce(const std::vector<Tensor>& tensors, ReduceOp op, std::size_t bucket_bytes,
                              const char* operation) {
    require_init(operation);
    check_bucket_bytes(bucket_bytes, operation);
    for (const Tensor& t : tensors)
        if (t.defined()) mpi_op(op, t.dtype(), operation);
    if (!using_mpi()) return tensors;
    check_same_everywhere(tensors, operation);
    return route(
        tensors,
        [&](const DeviceCollectives& device, const std::vector<Tensor>& part) {
            fluxion::detail::refuse_replay(std::string("fx::distributed::") + operation +
                                           ": a collective between GPUs (NCCL) runs outside the recorded kernels");
            return device.allreduce(part, op, bucket_bytes);
        },
        [&](const std::vector<Tensor>& part) {
            std::vector<Group> groups = pack(part, true);
            // The exchange is a recorded host write: fx::compile's replays redo it between the
            // recorded copies that pack and unpack (AverageGradients in a compiled step).
            for (Group& g : groups)
                if (const auto count = static_cast<std::size_t>(g.flat.numel()))
                    fluxion::detail::host_write(g.flat.data_ptr(),
                                                [count, wire = g.wire, op, bucket_bytes, operation](void* data) {
                                                    exchange(data, count, wire, op, bucket_bytes, operation);
                                                });
            return unpack(part, groups);
        });
}

std::vector<Tensor> broadcast(const std::vector<Tensor>& tensors, int root, std::size_t bucket_bytes,
                              const char* operation) {
    require_init(operation);
    check_bucket_bytes(bucket_bytes, operation);
    if (root < 0 || root >= world_size())
        throw ValueError(std::string("fx::distributed::") + operation + ": root is " + std::to_string(root) +
                         "; the job has ranks 0 .. " + std::to_string(world_size() - 1));
    if (!using_mpi()) return tensors;
    // Packed by host copies that a trace does not record; a step that broadcasts is not replayed.
    fluxion::detail::refuse_replay(std::string("fx::distributed::") + operation + " inside a compiled step");
    check_same_everywhere(tensors, operation);
    return route(
        tensors,
        [&](const DeviceCollectives& device, const std::vector<Tensor>& part) {
            return device.broadcast(part, root, bucket_bytes);
        },
        [&](const std::vector<Tensor>& part) {
            std::vector<Group> groups = pack(part, false);  // bytes: a broadcast needs no arithmetic
            std::vector<MPI_Request> requests;
            for (Group& g : groups)
                start_buckets(
                    g.flat.data_ptr(), static_cast<std::size_t>(g.flat.numel()), g.wire, bucket_bytes,
                    [&](void* data, int count, MPI_Datatype type, MPI_Request* r) {
                        return MPI_Ibcast(data, count, type, root, communicator(), r);
                    },
                    requests, operation);
            wait_all(requests, operation);
            return unpack(part, groups);
        });
}

}  // namespace fluxion::distributed::detail
