// prefetcher.cpp — `loader | dev`: worker threads claim batch indices in order, prepare each batch
// (slice or gather, then copy to the device) and file it under its index; the consumer takes them
// in order. A worker claims index i only while i < taken + window, so at most `window` prepared
// batches wait at any time: the copy of the next batch overlaps the current step, memory stays flat.
#include <omp.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "fluxion/data.hpp"

namespace fluxion::detail {
namespace {

constexpr std::int64_t kWindow = 2;      // prepared batches that may wait for the consumer (at least)
constexpr unsigned kMaxParallel = 4;     // more threads only contend for the same copy engine

unsigned worker_count(bool parallel) {
    if (!parallel) return 1;
    return std::clamp(std::thread::hardware_concurrency(), 2u, kMaxParallel);
}

struct Prepared {
    std::vector<Tensor> batch;
    std::exception_ptr error;
};

}  // namespace

struct Prefetcher::Impl {
    std::shared_ptr<const LoaderCore> core;
    EpochOrder order;
    Device device;
    std::int64_t size = 0;
    std::int64_t window = kWindow;

    std::mutex mutex;
    std::condition_variable space;  // a slot in the window opened, or stopping
    std::condition_variable ready;  // a batch was filed
    std::map<std::int64_t, Prepared> done;
    std::int64_t claimed = 0;       // next index a worker will take
    std::int64_t taken = 0;         // batches the consumer has taken out of `done`
    bool stopping = false;
    bool failed = false;            // no new claims after an error: the consumer stops at it anyway

    // Consumer side (one thread).
    std::int64_t position = 0;      // the batch the consumer is on
    bool has_current = false;
    std::vector<Tensor> current;
    std::exception_ptr error;       // once raised, every later read rethrows it

    std::vector<std::thread> workers;

    std::vector<Tensor> prepare(std::int64_t i) const {
        std::vector<Tensor> batch = core->batch(order, i);
        for (Tensor& t : batch) t = t.to(device);
        return batch;
    }

    void work() {
        // Kernels called from here (gathering a batch) run on this thread alone: an OpenMP team
        // of its own would fight the training step's team for the cores. On 2 cores that cost the
        // main job almost all of its second thread. (OpenMP's thread count is a per-thread
        // setting; the CPU backend's parallel_for honours it.)
        omp_set_num_threads(1);
        for (;;) {
            std::int64_t i;
            {
                std::unique_lock lock(mutex);
                space.wait(lock, [&] { return stopping || failed || claimed >= size || claimed < taken + window; });
                if (stopping || failed || claimed >= size) return;
                i = claimed++;
            }
            Prepared p;
            try {
                p.batch = prepare(i);
            } catch (...) {
                p.error = std::current_exception();
            }
            std::lock_guard lock(mutex);
            failed = failed || p.error != nullptr;
            done.emplace(i, std::move(p));
            ready.notify_all();
        }
    }

    void take() {
        if (error) std::rethrow_exception(error);
        if (position >= size)  // no worker will ever file this batch: refuse rather than wait forever
            throw ValueError("DataLoader | device: the iterator is past the last batch (" + std::to_string(size) +
                             " per epoch)");
        Prepared p;
        {
            std::unique_lock lock(mutex);
            ready.wait(lock, [&] { return done.contains(position); });
            p = std::move(done.extract(position).mapped());
            ++taken;
        }
        space.notify_all();
        if (p.error) {
            error = p.error;
            std::rethrow_exception(error);
        }
        current = std::move(p.batch);
        has_current = true;
    }

    void stop() {
        {
            std::lock_guard lock(mutex);
            stopping = true;
        }
        space.notify_all();
        for (auto& w : workers)
            if (w.joinable()) w.join();
    }
};

Prefetcher::Prefetcher(std::shared_ptr<const LoaderCore> core, EpochOrder order, Device device)
    : impl_(std::make_unique<Impl>()) {
    impl_->core = std::move(core);
    impl_->order = std::move(order);
    impl_->device = std::move(device);
    impl_->size = impl_->core->size();
    const unsigned n = worker_count(impl_->core->options().parallel);
    impl_->window = std::max<std::int64_t>(kWindow, n);
    impl_->workers.reserve(n);
    try {
        for (unsigned k = 0; k < n; ++k) impl_->workers.emplace_back([impl = impl_.get()] { impl->work(); });
    } catch (...) {  // a thread could not start: the ones running must not outlive impl_
        impl_->stop();
        throw;
    }
}

Prefetcher::~Prefetcher() { impl_->stop(); }

std::int64_t Prefetcher::position() const { return impl_->position; }

const std::vector<Tensor>& Prefetcher::current() {
    if (!impl_->has_current) impl_->take();
    return impl_->current;
}

void Prefetcher::advance() {
    if (!impl_->has_current) impl_->take();
    ++impl_->position;
    impl_->current.clear();
    impl_->has_current = false;
}

}  // namespace fluxion::detail
