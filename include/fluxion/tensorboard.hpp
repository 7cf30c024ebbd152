// fluxion/tensorboard.hpp — training curves, histograms, images and text that TensorBoard shows
// (TensorBoardLogger.jl's role for Flux; torch.utils.tensorboard's SummaryWriter for PyTorch):
//
//   fx::TensorBoardLogger tb("runs/lenet");        // runs/lenet/events.out.tfevents.<time>.<host>.<pid>.<n>
//   tb.scalar("loss/train", loss, step);
//   tb.histograms("weights", model, step);          // one histogram per trainable tensor ("weights/layers.0.weight")
//   tb.histograms("gradients", grads, step);        // grads as withgradient returns them
//   tb.image("input", x, step);                     // {H, W} or {C, H, W}; u8, or floats in [0, 1]
//   tb.text("config", "Adam(0.001), batch 128", step);
//   // then: tensorboard --logdir runs
//
// Each call appends one record and hands it to the OS before it returns, so a TensorBoard watching
// the folder sees it at once and a crash loses nothing logged before it. Tensors may live on any
// device (they are copied to the host). Histograms count finite values only, in `bins` equal
// buckets from the smallest to the largest. Bad arguments throw before anything is written:
// ValueError (an empty tag, bins < 1), ShapeError and DTypeError (images), IOError (the folder).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "fluxion/callbacks.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

class TensorBoardLogger {
public:
    // Creates the folder (and its parents) and a new event file in it.
    explicit TensorBoardLogger(const std::filesystem::path& logdir);
    ~TensorBoardLogger();
    TensorBoardLogger(TensorBoardLogger&&) noexcept;
    TensorBoardLogger& operator=(TensorBoardLogger&&) noexcept;

    void scalar(std::string_view tag, double value, std::int64_t step);
    void histogram(std::string_view tag, const Tensor& values, std::int64_t step, int bins = 30);
    void image(std::string_view tag, const Tensor& image, std::int64_t step);
    void text(std::string_view tag, std::string_view text, std::int64_t step);

    // A histogram of every trainable tensor of a model (or of its gradients), tagged prefix/path.
    template <class M> void histograms(std::string_view prefix, const M& model, std::int64_t step) {
        visit_trainable(model, [&](const std::string& path, const Tensor& x) {
            if (x.defined()) histogram(std::string(prefix) + "/" + path, x, step);
        });
    }

    // For fx::train's callbacks: each step's loss as "<prefix>/loss" at the step count, each epoch's
    // mean as "<prefix>/epoch_loss" at the epoch. It shares the event file: it may outlive the logger.
    Callback callback(std::string prefix = "train") const;

    void flush();                                // to the disk, not only the OS (fsync)
    const std::filesystem::path& file() const;   // the event file being written

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

}  // namespace fluxion
