// fluxion/data.hpp — iterating over a data set in mini-batches (Flux's DataLoader), on the data's
// own device or moved to another one in the background.
//
//   fx::DataLoader loader({X, Y}, {.batchsize = 64, .shuffle = true});
//   for (auto [x, y] : loader) ...          // rows of X and Y, taken together
//   for (auto [x, y] : loader | dev) ...    // the same batches, arriving on dev
//   fx::DataLoader resident(std::tuple{X, Y} | dev, {.batchsize = 32});   // all data moved once
//
// The data is one Tensor or a std::tuple of Tensors whose first dimension indexes observations (all
// must agree); each batch has the data's type. A braced list `{X, Y}` makes a tuple. Each call of
// begin() starts a new epoch: with .shuffle the order is a fresh permutation drawn from .seed and the
// epoch number, so a run is reproducible. Copies of a loader share its data and its epoch counter.
// A resumed run gets the order back by saving the counter with its checkpoint (PyTorch's set_epoch):
//   fx::save_checkpoint(file, model, opt, {{"epoch", std::to_string(loader.epoch())}});
//   loader.set_epoch(std::stoull(fx::load_checkpoint(file, model, opt).at("epoch")));
//
// `loader | dev` (also `| fx::gpu`, `| fx::cpu`) prepares batches on a background thread and copies
// them to dev at most two batches ahead of the consumer, so the next batch moves while the current
// one computes and memory stays flat. An error while preparing a batch is rethrown where that batch
// is read; leaving the loop early stops the thread.
//
// Data-parallel training (fluxion/distributed.hpp) gives each process its part of every epoch:
//   fx::DataLoader loader({X, Y}, {.batchsize = 32, .shuffle = true, .shard = fx::distributed::shard()});
#pragma once
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fluxion/device.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

// One process's part of the data in data-parallel training.
struct Shard {
    std::int64_t rank = 0;   // this process, 0 <= rank < count
    std::int64_t count = 1;  // the processes that share the data
};

struct DataLoaderOptions {
    std::int64_t batchsize = 1;  // observations per batch (Flux's default)
    bool shuffle = false;        // a new random order every epoch
    bool partial = true;         // keep the last, smaller batch; false drops it
    std::uint64_t seed = 0;      // the shuffled order of epoch e depends only on (seed, e)
    bool parallel = false;       // `loader | dev` prepares batches on up to 4 threads, as many batches
                                 // ahead; the order is the same
    // Each epoch's order (the same on every process: same seed) is cut into global batches of
    // batchsize × count observations, and process `rank` takes block `rank` of each, so the
    // processes together see what one process with batchsize × count would. With count > 1 a last
    // global batch of fewer observations is dropped everywhere (whatever .partial says): every
    // process takes the same number of equal batches and none waits for the others' gradients.
    Shard shard = {};
};

namespace detail {

template <class T> struct is_tensor_tuple : std::false_type {};
template <class... Ts>
struct is_tensor_tuple<std::tuple<Ts...>> : std::bool_constant<(std::same_as<Ts, Tensor> && ...)> {};

// The observation order of one epoch; null means 0, 1, 2, ... (no shuffling).
using EpochOrder = std::shared_ptr<const std::vector<std::int64_t>>;

// Everything of a loader that does not depend on the data's C++ type: the tensors as columns.
class LoaderCore {
public:
    // Throws ShapeError when the tensors disagree on the number of observations, ValueError for a
    // batch size below 1.
    LoaderCore(std::vector<Tensor> columns, const DataLoaderOptions& options);

    std::int64_t nobs() const { return nobs_; }
    std::int64_t size() const;  // batches per epoch
    const DataLoaderOptions& options() const { return options_; }
    const std::vector<Tensor>& columns() const { return columns_; }

    EpochOrder next_epoch();  // the order of the next epoch; advances the epoch counter
    std::uint64_t epoch() const { return epoch_; }
    void set_epoch(std::uint64_t epoch) { epoch_ = epoch; }
    // Batch i of an epoch, one tensor per column, on the columns' devices.
    std::vector<Tensor> batch(const EpochOrder& order, std::int64_t i) const;

private:
    std::vector<Tensor> columns_;
    DataLoaderOptions options_;
    std::int64_t nobs_ = 0;
    std::atomic<std::uint64_t> epoch_ = 0;
};

// The background side of `loader | dev`: worker threads prepare batches of one epoch and move them
// to the device, never more than a fixed window ahead of the consumer, which reads them in order.
class Prefetcher {
public:
    Prefetcher(std::shared_ptr<const LoaderCore> core, EpochOrder order, Device device);  // starts the threads
    ~Prefetcher();  // stops and joins them, dropping whatever was prepared
    Prefetcher(const Prefetcher&) = delete;
    Prefetcher& operator=(const Prefetcher&) = delete;

    std::int64_t position() const;          // the index of the current batch
    const std::vector<Tensor>& current();   // waits for it; rethrows the error that preparing it raised
    void advance();                         // moves to the next batch (consuming the current one)

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

template <class Data> std::vector<Tensor> columns_of(const Data& data) {
    if constexpr (std::same_as<Data, Tensor>) return {data};
    else return std::apply([](const auto&... t) { return std::vector<Tensor>{t...}; }, data);
}

template <class Data> Data from_columns(const std::vector<Tensor>& columns) {
    if constexpr (std::same_as<Data, Tensor>) {
        return columns[0];
    } else {
        return [&]<std::size_t... I>(std::index_sequence<I...>) {
            return Data{columns[I]...};
        }(std::make_index_sequence<std::tuple_size_v<Data>>{});
    }
}

template <std::size_t> using tensor_at = Tensor;
template <std::size_t N, class = std::make_index_sequence<N>> struct tensor_tuple;
template <std::size_t N, std::size_t... I> struct tensor_tuple<N, std::index_sequence<I...>> {
    using type = std::tuple<tensor_at<I>...>;
};

}  // namespace detail

// What a DataLoader iterates over: a Tensor, or a std::tuple of Tensors.
template <class Data>
concept LoaderData = std::same_as<Data, Tensor> || detail::is_tensor_tuple<Data>::value;

template <LoaderData Data> class DeviceLoader;

template <LoaderData Data> class DataLoader {
public:
    class iterator {
    public:
        using value_type = Data;
        using difference_type = std::ptrdiff_t;
        using iterator_concept = std::input_iterator_tag;

        iterator() = default;
        Data operator*() const { return detail::from_columns<Data>(core_->batch(order_, index_)); }
        iterator& operator++() {
            ++index_;
            return *this;
        }
        void operator++(int) { ++index_; }
        friend bool operator==(const iterator& it, std::default_sentinel_t) { return it.index_ >= it.size_; }

    private:
        friend class DataLoader;
        iterator(std::shared_ptr<const detail::LoaderCore> core, detail::EpochOrder order)
            : core_(std::move(core)), order_(std::move(order)), size_(core_->size()) {}
        std::shared_ptr<const detail::LoaderCore> core_;
        detail::EpochOrder order_;
        std::int64_t index_ = 0;
        std::int64_t size_ = 0;
    };

    DataLoader(Data data, DataLoaderOptions options = {})
        : core_(std::make_shared<detail::LoaderCore>(detail::columns_of(data), options)) {}

    std::int64_t size() const { return core_->size(); }  // batches per epoch
    std::int64_t nobs() const { return core_->nobs(); }  // observations
    const DataLoaderOptions& options() const { return core_->options(); }
    Data data() const { return detail::from_columns<Data>(core_->columns()); }

    iterator begin() const { return iterator(core_, core_->next_epoch()); }  // starts a new epoch
    std::default_sentinel_t end() const { return {}; }

    // The epochs begun so far, which is the number of the next one (from 0). set_epoch(e) makes the
    // next begin() start epoch e, in the order epoch e has in every run with this seed.
    std::uint64_t epoch() const { return core_->epoch(); }
    void set_epoch(std::uint64_t epoch) { core_->set_epoch(epoch); }

private:
    friend class DeviceLoader<Data>;
    // Shared by copies (and by `loader | dev`), so every begin() advances the one epoch counter.
    std::shared_ptr<detail::LoaderCore> core_;
};

// `fx::DataLoader l({X, Y}, ...)`: a braced list of tensors is a tuple of that many tensors.
template <std::size_t N>
DataLoader(const Tensor (&)[N], DataLoaderOptions = {}) -> DataLoader<typename detail::tensor_tuple<N>::type>;

// The batches of a DataLoader, arriving on `device`, prepared in the background (see the top).
template <LoaderData Data> class DeviceLoader {
public:
    class iterator {
    public:
        using value_type = Data;
        using difference_type = std::ptrdiff_t;
        using iterator_concept = std::input_iterator_tag;

        iterator() = default;
        // Waits for the batch; rethrows an error raised while preparing it.
        Data operator*() const { return detail::from_columns<Data>(prefetcher_->current()); }
        iterator& operator++() {
            prefetcher_->advance();
            return *this;
        }
        void operator++(int) { prefetcher_->advance(); }
        friend bool operator==(const iterator& it, std::default_sentinel_t) {
            return it.prefetcher_->position() >= it.size_;
        }

    private:
        friend class DeviceLoader;
        iterator(std::shared_ptr<detail::Prefetcher> prefetcher, std::int64_t size)
            : prefetcher_(std::move(prefetcher)), size_(size) {}
        // Shared by copies of the iterator (input iterators are single-pass); the last one stops the threads.
        std::shared_ptr<detail::Prefetcher> prefetcher_;
        std::int64_t size_ = 0;
    };

    DeviceLoader(DataLoader<Data> loader, Device device) : loader_(std::move(loader)), device_(std::move(device)) {}

    std::int64_t size() const { return loader_.size(); }
    const Device& device() const { return device_; }

    // Starts a new epoch of the underlying loader and the background preparation of its batches.
    iterator begin() const {
        auto core = loader_.core_;
        return iterator(std::make_shared<detail::Prefetcher>(core, core->next_epoch(), device_), core->size());
    }
    std::default_sentinel_t end() const { return {}; }

private:
    DataLoader<Data> loader_;
    Device device_;
};

// More specialised than functor.hpp's `x | device`: a loader moves its batches, not its data.
template <LoaderData Data> DeviceLoader<Data> operator|(const DataLoader<Data>& loader, const Device& device) {
    return {loader, device};
}
template <LoaderData Data> DeviceLoader<Data> operator|(const DataLoader<Data>& loader, GpuMover) {
    return {loader, get_device()};
}
template <LoaderData Data> DeviceLoader<Data> operator|(const DataLoader<Data>& loader, CpuMover) {
    return {loader, Device{}};
}

}  // namespace fluxion
