// loader.cpp — a DataLoader's batches: checking the data, the order of each epoch, and cutting
// batches out of the columns (views when in order, gathers when shuffled), and a process's shard.
#include <algorithm>
#include <string>

#include "core/data/permutation.hpp"
#include "fluxion/data.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::detail {
namespace {

std::int64_t observations(const std::vector<Tensor>& columns) {
    if (columns.empty()) throw ValueError("DataLoader: the data holds no tensors; pass a tensor or a tuple of tensors");
    for (std::size_t i = 0; i < columns.size(); ++i) {
        const Tensor& t = columns[i];
        if (!t.defined())
            throw ValueError("DataLoader: tensor " + std::to_string(i) + " of the data is empty (default-constructed)");
        if (t.ndim() == 0)
            throw ShapeError("DataLoader: tensor " + std::to_string(i) +
                             " of the data is 0-dimensional; its first dimension must index observations "
                             "(reshape it, e.g. x.reshape({1}))");
    }
    const std::int64_t n = columns[0].shape(0);
    for (std::size_t i = 1; i < columns.size(); ++i)
        if (columns[i].shape(0) != n)
            throw ShapeError("DataLoader: the tensors disagree on the number of observations (first dimension): " +
                             std::to_string(n) + " in tensor 0 of shape " + to_string(columns[0].shape()) + ", " +
                             std::to_string(columns[i].shape(0)) + " in tensor " + std::to_string(i) + " of shape " +
                             to_string(columns[i].shape()) + "; every tensor needs one entry per observation");
    return n;
}

}  // namespace

LoaderCore::LoaderCore(std::vector<Tensor> columns, const DataLoaderOptions& options)
    : options_(options), nobs_(observations(columns)) {
    if (options.batchsize < 1)
        throw ValueError("DataLoader: batchsize is " + std::to_string(options.batchsize) + "; it must be at least 1");
    const Shard& shard = options.shard;
    if (shard.count < 1 || shard.rank < 0 || shard.rank >= shard.count)
        throw ValueError("DataLoader: shard {rank = " + std::to_string(shard.rank) + ", count = " +
                         std::to_string(shard.count) + "} is not a part of the data; rank must be in [0, count)" +
                         " (fx::distributed::shard() gives this process's)");
    columns_ = std::move(columns);
}

std::int64_t LoaderCore::size() const {
    if (options_.shard.count > 1) return nobs_ / (options_.batchsize * options_.shard.count);
    const std::int64_t full = nobs_ / options_.batchsize;
    return options_.partial && nobs_ % options_.batchsize != 0 ? full + 1 : full;
}

EpochOrder LoaderCore::next_epoch() {
    const std::uint64_t epoch = epoch_++;
    if (!options_.shuffle) return nullptr;
    return std::make_shared<const std::vector<std::int64_t>>(permutation(nobs_, options_.seed, epoch));
}

std::vector<Tensor> LoaderCore::batch(const EpochOrder& order, std::int64_t i) const {
    if (i < 0 || i >= size())
        throw ValueError("DataLoader: batch " + std::to_string(i) + " does not exist; an epoch has " +
                         std::to_string(size()) + " batches");
    const std::int64_t start = (i * options_.shard.count + options_.shard.rank) * options_.batchsize;
    const std::int64_t stop = std::min(start + options_.batchsize, nobs_);
    std::vector<Tensor> out;
    out.reserve(columns_.size());
    if (!order) {
        for (const Tensor& c : columns_) out.push_back(c.slice(0, start, stop));
        return out;
    }
    const std::vector<std::int64_t> rows(order->begin() + start, order->begin() + stop);
    Tensor index;  // on the device of the column being gathered; columns usually share one
    for (const Tensor& c : columns_) {
        if (!index.defined() || index.device() != c.device())
            index = tensor(rows, Shape{stop - start}, {.dtype = DType::i64, .device = c.device()});
        out.push_back(index_select(c, 0, index));
    }
    return out;
}

}  // namespace fluxion::detail
