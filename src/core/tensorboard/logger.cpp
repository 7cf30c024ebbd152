// logger.cpp — each call builds one Event (src/core/tensorboard/event.proto) and appends it as a
// record. Values are checked and converted before anything is written, so a refused call leaves
// the file as it was.
#include "fluxion/tensorboard.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/io/png.hpp"
#include "core/tensorboard/event.pb.h"
#include "core/tensorboard/record_writer.hpp"
#include "fluxion/error.hpp"

namespace fluxion {

namespace pb = fluxion::tensorboard;

namespace {

constexpr int kStringType = 7;  // TensorFlow's DT_STRING

double now_seconds() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

// events.out.tfevents.<seconds>.<host>.<pid>.<n>: TensorBoard finds event files by "tfevents" in the
// name; the counter keeps two loggers of one process apart within a second.
std::filesystem::path event_file_name(const std::filesystem::path& logdir) {
    static std::atomic<int> counter{0};
    char host[256] = "localhost";
    ::gethostname(host, sizeof host - 1);
    const auto seconds = static_cast<long long>(now_seconds());
    return logdir / ("events.out.tfevents." + std::to_string(seconds) + "." + host + "." +
                     std::to_string(::getpid()) + "." + std::to_string(counter++));
}

void check_tag(std::string_view tag, const char* what) {
    if (tag.empty()) throw ValueError(std::string("TensorBoardLogger::") + what + ": the tag is empty");
}

}  // namespace

struct TensorBoardLogger::Impl {
    std::filesystem::path file;
    detail::RecordWriter writer;
    std::mutex mutex;  // one record at a time when callbacks log from several threads

    explicit Impl(std::filesystem::path f) : file(std::move(f)), writer(file) {}

    void write(pb::Event& event) {
        event.set_wall_time(now_seconds());
        const std::string bytes = event.SerializeAsString();
        std::lock_guard lock(mutex);
        writer.write(bytes);
    }
    void scalar(std::string_view tag, double value, std::int64_t step) {
        pb::Event event;
        Impl::value(event, tag, step)->set_simple_value(static_cast<float>(value));
        write(event);
    }
    // An Event holding one summary value with this tag and step.
    static pb::Summary::Value* value(pb::Event& event, std::string_view tag, std::int64_t step) {
        event.set_step(step);
        auto* v = event.mutable_summary()->add_value();
        v->set_tag(std::string(tag));
        return v;
    }
};

TensorBoardLogger::TensorBoardLogger(const std::filesystem::path& logdir) {
    std::error_code error;
    std::filesystem::create_directories(logdir, error);
    if (error || !std::filesystem::is_directory(logdir))
        throw IOError("TensorBoardLogger: cannot create the folder \"" + logdir.string() + "\"" +
                      (error ? ": " + error.message() : ": a file of that name is in the way"));
    impl_ = std::make_shared<Impl>(event_file_name(logdir));
    pb::Event first;
    first.set_file_version("brain.Event:2");
    impl_->write(first);
}

TensorBoardLogger::~TensorBoardLogger() = default;
TensorBoardLogger::TensorBoardLogger(TensorBoardLogger&&) noexcept = default;
TensorBoardLogger& TensorBoardLogger::operator=(TensorBoardLogger&&) noexcept = default;

void TensorBoardLogger::scalar(std::string_view tag, double value, std::int64_t step) {
    check_tag(tag, "scalar");
    impl_->scalar(tag, value, step);
}

Callback TensorBoardLogger::callback(std::string prefix) const {
    if (prefix.empty()) throw ValueError("TensorBoardLogger::callback: the prefix is empty");
    return [impl = impl_, loss = prefix + "/loss", epoch_loss = prefix + "/epoch_loss"](const TrainEvent& e) {
        if (e.epoch_end) impl->scalar(epoch_loss, e.loss, e.epoch);
        else impl->scalar(loss, e.loss, e.steps);
    };
}

void TensorBoardLogger::histogram(std::string_view tag, const Tensor& values, std::int64_t step, int bins) {
    check_tag(tag, "histogram");
    if (bins < 1) throw ValueError("TensorBoardLogger::histogram: bins must be at least 1, got " + std::to_string(bins));
    std::vector<double> all = values.to_vector<double>(), finite;
    finite.reserve(all.size());
    for (double v : all)
        if (std::isfinite(v)) finite.push_back(v);

    pb::Event event;
    auto* h = Impl::value(event, tag, step)->mutable_histo();
    if (finite.empty()) {
        h->add_bucket_limit(0);
        h->add_bucket(0);
        impl_->write(event);
        return;
    }
    const auto [lo, hi] = std::minmax_element(finite.begin(), finite.end());
    const double min = *lo, max = *hi, width = (max - min) / bins;
    std::vector<double> counts(static_cast<std::size_t>(bins), 0.0);
    double sum = 0, sum_squares = 0;
    for (double v : finite) {
        sum += v, sum_squares += v * v;
        const auto b = width > 0 ? static_cast<std::size_t>((v - min) / width) : 0;
        counts[std::min<std::size_t>(b, counts.size() - 1)] += 1;
    }
    h->set_min(min), h->set_max(max), h->set_num(static_cast<double>(finite.size()));
    h->set_sum(sum), h->set_sum_squares(sum_squares);
    for (int b = 0; b < bins; ++b) {
        h->add_bucket_limit(b + 1 == bins ? max : min + width * (b + 1));
        h->add_bucket(counts[static_cast<std::size_t>(b)]);
    }
    impl_->write(event);
}

void TensorBoardLogger::image(std::string_view tag, const Tensor& image, std::int64_t step) {
    check_tag(tag, "image");
    detail::Png png = detail::encode_png(image, "TensorBoardLogger::image");
    pb::Event event;
    auto* i = Impl::value(event, tag, step)->mutable_image();
    i->set_height(png.height), i->set_width(png.width), i->set_colorspace(png.channels);
    i->set_encoded_image_string(std::move(png.bytes));
    impl_->write(event);
}

void TensorBoardLogger::text(std::string_view tag, std::string_view text, std::int64_t step) {
    check_tag(tag, "text");
    pb::Event event;
    auto* v = Impl::value(event, tag, step);
    v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
    auto* t = v->mutable_tensor();
    t->set_dtype(kStringType);
    t->mutable_tensor_shape();  // a scalar: a shape with no dimensions
    t->add_string_val(std::string(text));
    impl_->write(event);
}

void TensorBoardLogger::flush() {
    std::lock_guard lock(impl_->mutex);
    impl_->writer.flush();
}

const std::filesystem::path& TensorBoardLogger::file() const { return impl_->file; }

}  // namespace fluxion
