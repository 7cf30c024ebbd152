// test_io.cpp — fx::save / fx::load / save_state / load_state on the CPU: exact round trips, the
// file layout, strict and partial loading, and atomic replacement when writing fails.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/io/atomic_file.hpp"
#include "fsync_counting.hpp"
#include "test_io_support.hpp"

namespace {

using io_test::file_bytes;
using io_test::Linear;
using io_test::MLP;
using io_test::message_of;
using io_test::mlp;
using io_test::ScratchDir;

std::string raw_bytes(const fx::Tensor& t) {
    const fx::Tensor c = t.to(fx::Device{}).contiguous();
    return {static_cast<const char*>(c.data_ptr()), static_cast<std::size_t>(c.numel()) * fx::itemsize(c.dtype())};
}

void expect_same_tensor(const fx::Tensor& a, const fx::Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    EXPECT_EQ(a.dtype(), b.dtype());
    EXPECT_EQ(raw_bytes(a), raw_bytes(b));
}

void expect_same_model(const MLP& a, const MLP& b) {
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
        expect_same_tensor(a.layers[i].weight, b.layers[i].weight);
        expect_same_tensor(a.layers[i].bias, b.layers[i].bias);
    }
}

nlohmann::json header_of(const std::string& bytes) {
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    return nlohmann::json::parse(bytes.substr(8, n));
}

TEST(IO, ModelRoundTripIsBitExact) {
    ScratchDir dir;
    fx::seed(1);
    MLP saved = mlp({4, 8, 3});
    fx::save(dir / "m.safetensors", saved);

    MLP loaded = mlp({4, 8, 3});
    const fx::LoadReport report = fx::load(dir / "m.safetensors", loaded);
    EXPECT_TRUE(report.complete());
    expect_same_model(saved, loaded);
    const fx::Tensor x = fx::randn({5, 4});
    EXPECT_EQ(raw_bytes(saved(x)), raw_bytes(loaded(x)));
}

TEST(IO, ChainOfDenseRoundTripsWithItsSummary) {
    ScratchDir dir;
    const auto saved = fx::Chain(fx::Dense(4, 8, fx::relu), fx::Dense(8, 3));
    fx::save(dir / "chain.safetensors", saved);
    auto loaded = fx::Chain(fx::Dense(4, 8, fx::relu), fx::Dense(8, 3));
    EXPECT_TRUE(fx::load(dir / "chain.safetensors", loaded).complete());
    const fx::Tensor x = fx::randn({5, 4});
    EXPECT_EQ(raw_bytes(saved(x)), raw_bytes(loaded(x)));

    std::ostringstream printed;
    printed << saved;
    EXPECT_EQ(fx::load_metadata(dir / "chain.safetensors").at("summary"), printed.str());
    const auto state = fx::load_state(dir / "chain.safetensors");
    EXPECT_EQ(state.size(), 4u);
    expect_same_tensor(state.at("layers.1.weight"), std::get<1>(saved.layers).weight);
}

TEST(IO, LayersWithoutABiasSaveOnlyTheirWeight) {
    ScratchDir dir;
    const fx::Dense saved(3, 2, {}, /*bias=*/false);
    fx::save(dir / "d.safetensors", saved);
    EXPECT_EQ(fx::load_state(dir / "d.safetensors").count("bias"), 0u);
    fx::Dense loaded(3, 2, {}, false);
    EXPECT_TRUE(fx::load(dir / "d.safetensors", loaded).complete());
    expect_same_tensor(loaded.weight, saved.weight);
    fx::Dense with_bias(3, 2);
    EXPECT_THROW(fx::load(dir / "d.safetensors", with_bias), fx::IOError);
}

TEST(IO, LoadWritesIntoTheModelsOwnStorage) {
    ScratchDir dir;
    MLP saved = mlp({3, 2});
    fx::save(dir / "m.safetensors", saved);
    MLP target = mlp({3, 2});
    const void* before = target.layers[0].weight.data_ptr();
    fx::Tensor alias = target.layers[0].weight;  // another handle on the same storage
    fx::load(dir / "m.safetensors", target);
    EXPECT_EQ(target.layers[0].weight.data_ptr(), before);
    expect_same_tensor(alias, saved.layers[0].weight);
}

TEST(IO, LoadFillsNonContiguousTensors) {
    ScratchDir dir;
    Linear saved(3, 2);
    fx::save(dir / "l.safetensors", saved);
    Linear target;
    fx::Tensor storage = fx::zeros({3, 2});
    target.weight = storage.transpose();  // {2, 3} view with strides {1, 2}
    target.bias = fx::zeros({2});
    fx::load(dir / "l.safetensors", target);
    EXPECT_EQ(target.weight.to_vector<float>(), saved.weight.to_vector<float>());
    EXPECT_EQ(storage.to_vector<float>(), saved.weight.transpose().contiguous().to_vector<float>());
}

TEST(IO, StateNamesAreDottedPathsInVisitOrder) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({4, 8, 3}));
    const auto state = fx::load_state(dir / "m.safetensors");
    std::vector<std::string> names;
    for (const auto& [name, t] : state) names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"layers.0.bias", "layers.0.weight", "layers.1.bias", "layers.1.weight"}));
    EXPECT_EQ(state.at("layers.0.weight").shape(), (fx::Shape{8, 4}));
    EXPECT_EQ(state.at("layers.1.bias").shape(), (fx::Shape{3}));
    EXPECT_TRUE(state.at("layers.0.weight").device().is_cpu());

    // Data and header follow the model's declaration order, as PyTorch's state_dict does.
    const auto header = header_of(file_bytes(dir / "m.safetensors"));
    std::uint64_t previous_end = 0;
    for (const char* name : {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"}) {
        EXPECT_EQ(header[name]["data_offsets"][0].get<std::uint64_t>(), previous_end) << name;
        previous_end = header[name]["data_offsets"][1].get<std::uint64_t>();
    }
}

TEST(IO, FileLayoutIsAlignedAndCarriesMetadata) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({4, 8, 3}));
    const std::string bytes = file_bytes(dir / "m.safetensors");
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ((8 + n) % 8, 0u) << "tensor data must start 8-byte aligned";
    EXPECT_EQ(bytes.size(), 8 + n + (8 * 4 + 8 + 3 * 8 + 3) * sizeof(float));
    const auto header = header_of(bytes);
    EXPECT_EQ(header["layers.0.weight"]["dtype"], "F32");
    EXPECT_EQ(header["layers.0.weight"]["shape"], nlohmann::json({8, 4}));
    EXPECT_EQ(header["__metadata__"]["format"], "pt");
    EXPECT_FALSE(header["__metadata__"]["fluxion_version"].get<std::string>().empty());
    EXPECT_EQ(header["__metadata__"]["summary"], "MLP(4 => 8, 8 => 3)");
    EXPECT_EQ(fx::load_metadata(dir / "m.safetensors").at("summary"), "MLP(4 => 8, 8 => 3)");
}

TEST(IO, SummaryIsLeftOutForTypesThatCannotBePrinted) {
    ScratchDir dir;
    const std::vector<fx::Tensor> model{fx::ones({2}), fx::zeros({3})};
    fx::save(dir / "v.safetensors", model);
    const auto metadata = fx::load_metadata(dir / "v.safetensors");
    EXPECT_EQ(metadata.count("summary"), 0u);
    EXPECT_EQ(metadata.at("format"), "pt");
    const auto state = fx::load_state(dir / "v.safetensors");
    EXPECT_EQ(state.at("1").to_vector<float>(), std::vector<float>(3, 0.0f));
}

TEST(IO, SavingTwiceWritesIdenticalBytes) {
    ScratchDir dir;
    const MLP m = mlp({4, 8, 3});
    fx::save(dir / "a.safetensors", m);
    fx::save(dir / "b.safetensors", m);
    EXPECT_EQ(file_bytes(dir / "a.safetensors"), file_bytes(dir / "b.safetensors"));
}

TEST(IO, EveryDTypeRoundTripsBitExact) {
    ScratchDir dir;
    const fx::Tensor f = fx::tensor({1.5f, -2.25f, 3.0e-5f, 65504.0f, -0.0f, 7.0f}, {2, 3});
    std::map<std::string, fx::Tensor> state{
        {"f32", f},
        {"f64", f.to(fx::DType::f64)},
        {"i32", fx::tensor(std::vector<std::int32_t>{-7, 0, 2147483647}, {3})},
        {"i64", fx::tensor(std::vector<std::int64_t>{-1, std::int64_t{1} << 40}, {2})},
        {"u8", fx::tensor(std::vector<std::uint8_t>{0, 128, 255}, {3})},
        {"bool", fx::gt(f, fx::zeros({2, 3}))},
        {"f16", f.to(fx::DType::f16)},
        {"bf16", f.to(fx::DType::bf16)},
    };
    fx::save_state(dir / "s.safetensors", state);
    const auto loaded = fx::load_state(dir / "s.safetensors");
    ASSERT_EQ(loaded.size(), state.size());
    for (const auto& [name, t] : state) {
        SCOPED_TRACE(name);
        expect_same_tensor(loaded.at(name), t);
    }
    const auto header = header_of(file_bytes(dir / "s.safetensors"));
    EXPECT_EQ(header["bool"]["dtype"], "BOOL");
    EXPECT_EQ(header["bf16"]["dtype"], "BF16");
    EXPECT_EQ(header["f16"]["dtype"], "F16");
    EXPECT_EQ(header["u8"]["dtype"], "U8");
}

TEST(IO, ViewsAreSavedAsTheirValues) {
    ScratchDir dir;
    const fx::Tensor base = fx::arange(0, 12, 1).reshape({3, 4});
    std::vector<std::pair<std::string, fx::Tensor>> state{
        {"transposed", base.transpose()}, {"sliced", base.slice(1, 1, 3)}, {"row", base.select(0, 2)}};
    fx::save_state(dir / "v.safetensors", state);
    const auto loaded = fx::load_state(dir / "v.safetensors");
    for (const auto& [name, t] : state) {
        SCOPED_TRACE(name);
        EXPECT_EQ(loaded.at(name).shape(), t.shape());
        EXPECT_EQ(loaded.at(name).to_vector<float>(), t.to_vector<float>());
    }
}

TEST(IO, VectorStateKeepsItsOrder) {
    ScratchDir dir;
    fx::save_state(dir / "o.safetensors",
                   std::vector<std::pair<std::string, fx::Tensor>>{{"z", fx::ones({2})}, {"a", fx::ones({3})}});
    const auto header = header_of(file_bytes(dir / "o.safetensors"));
    EXPECT_EQ(header["z"]["data_offsets"], nlohmann::json({0, 8}));
    EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json({8, 20}));
}

TEST(IO, ScalarsAndEmptyTensorsRoundTrip) {
    ScratchDir dir;
    fx::save_state(dir / "e.safetensors", std::map<std::string, fx::Tensor>{
                                              {"scalar", fx::scalar(4.5)}, {"empty", fx::zeros({0, 3})}});
    const auto loaded = fx::load_state(dir / "e.safetensors");
    EXPECT_EQ(loaded.at("scalar").shape(), fx::Shape{});
    EXPECT_EQ(loaded.at("scalar").item(), 4.5);
    EXPECT_EQ(loaded.at("empty").shape(), (fx::Shape{0, 3}));
}

TEST(IO, UserMetadataIsKept) {
    ScratchDir dir;
    fx::save_state(dir / "m.safetensors", std::map<std::string, fx::Tensor>{{"x", fx::ones({1})}},
                   {{"epoch", "3"}, {"note", "warm start"}});
    const auto metadata = fx::load_metadata(dir / "m.safetensors");
    EXPECT_EQ(metadata.at("epoch"), "3");
    EXPECT_EQ(metadata.at("note"), "warm start");
    EXPECT_EQ(metadata.at("format"), "pt");
}

TEST(IO, LoadStateFromMemoryReadsTheSameBytes) {
    ScratchDir dir;
    const MLP m = mlp({2, 3});
    fx::save(dir / "m.safetensors", m);
    const std::string bytes = file_bytes(dir / "m.safetensors");
    const auto state = fx::load_state_from_memory(std::as_bytes(std::span(bytes.data(), bytes.size())));
    expect_same_tensor(state.at("layers.0.weight"), m.layers[0].weight);
    EXPECT_THROW(fx::load_state_from_memory(std::as_bytes(std::span(bytes.data(), bytes.size() - 1))), fx::IOError);
}

// ---- strict and partial loading ----

TEST(IO, StrictLoadNamesEveryDifferenceAndChangesNothing) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({4, 8, 3}));
    MLP other = mlp({4, 6, 3, 2});
    other.layers[0].bias = other.layers[0].bias.to(fx::DType::f64);
    const MLP before = fx::fmap([](const fx::Tensor& t) { return t.clone(); }, other);

    const std::string m = message_of([&] { fx::load(dir / "m.safetensors", other); });
    EXPECT_NE(m.find("m.safetensors"), std::string::npos) << m;
    EXPECT_NE(m.find("the file does not match the model, nothing was loaded"), std::string::npos) << m;
    EXPECT_NE(m.find("layers.0.weight: shape {8, 4} in the file, {6, 4} in the model"), std::string::npos) << m;
    EXPECT_NE(m.find("layers.0.bias: shape {8} in the file, {6} in the model; dtype f32 in the file, f64 in the model"),
              std::string::npos) << m;
    EXPECT_NE(m.find("layers.1.weight: shape {3, 8} in the file, {3, 6} in the model"), std::string::npos) << m;
    EXPECT_NE(m.find("missing from the file: layers.2.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("missing from the file: layers.2.bias"), std::string::npos) << m;
    EXPECT_NE(m.find(".strict = false"), std::string::npos) << m;
    // layers.1.bias matched, but a failed strict load copies nothing.
    expect_same_model(other, before);
}

TEST(IO, StrictLoadReportsTensorsTheModelLacks) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({4, 8, 3}));
    MLP smaller = mlp({4, 8});
    const std::string m = message_of([&] { fx::load(dir / "m.safetensors", smaller); });
    EXPECT_NE(m.find("not in the model: layers.1.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("not in the model: layers.1.bias"), std::string::npos) << m;
}

TEST(IO, PartialLoadFillsWhatFitsAndReportsTheRest) {
    ScratchDir dir;
    const MLP saved = mlp({4, 8, 3});
    fx::save(dir / "m.safetensors", saved);
    MLP other = mlp({4, 8, 5, 2});
    const fx::Tensor untouched = other.layers[1].weight.clone();

    const fx::LoadReport r = fx::load(dir / "m.safetensors", other, {.strict = false});
    EXPECT_FALSE(r.complete());
    EXPECT_EQ(r.missing, (std::vector<std::string>{"layers.2.weight", "layers.2.bias"}));
    EXPECT_EQ(r.mismatched, (std::vector<std::string>{"layers.1.weight", "layers.1.bias"}));
    EXPECT_TRUE(r.unexpected.empty());
    expect_same_tensor(other.layers[0].weight, saved.layers[0].weight);
    expect_same_tensor(other.layers[0].bias, saved.layers[0].bias);
    expect_same_tensor(other.layers[1].weight, untouched);

    MLP first_only = mlp({4, 8});
    const fx::LoadReport r2 = fx::load(dir / "m.safetensors", first_only, {.strict = false});
    EXPECT_EQ(r2.unexpected, (std::vector<std::string>{"layers.1.weight", "layers.1.bias"}));
    expect_same_tensor(first_only.layers[0].weight, saved.layers[0].weight);
}

TEST(IO, ReadingMissingOrWrongFilesNamesTheFile) {
    ScratchDir dir;
    MLP m = mlp({2, 2});
    const std::string missing = message_of([&] { fx::load(dir / "absent.safetensors", m); });
    EXPECT_NE(missing.find("absent.safetensors"), std::string::npos) << missing;
    EXPECT_NE(missing.find("No such file"), std::string::npos) << missing;
    const std::string folder = message_of([&] { fx::load_state(dir.path()); });
    EXPECT_NE(folder.find("not a regular file"), std::string::npos) << folder;
    io_test::write_bytes(dir / "empty.safetensors", "");
    const std::string empty = message_of([&] { fx::load_state(dir / "empty.safetensors"); });
    EXPECT_NE(empty.find("empty.safetensors"), std::string::npos) << empty;
    EXPECT_NE(empty.find("has 0 bytes"), std::string::npos) << empty;
}

TEST(IO, BadNamesAreRefusedBeforeAnyFileIsCreated) {
    ScratchDir dir;
    using Pairs = std::vector<std::pair<std::string, fx::Tensor>>;
    EXPECT_THROW(fx::save_state(dir / "d.safetensors", Pairs{{"a", fx::ones({1})}, {"a", fx::ones({1})}}), fx::ValueError);
    EXPECT_THROW(fx::save_state(dir / "d.safetensors", Pairs{{"__metadata__", fx::ones({1})}}), fx::ValueError);
    EXPECT_THROW(fx::save_state(dir / "d.safetensors", Pairs{{"undefined", fx::Tensor()}}), fx::ValueError);
    EXPECT_TRUE(dir.entries().empty());
}

// ---- atomic replacement ----

TEST(IOAtomic, SuccessfulSaveReplacesTheFileAndLeavesNoTemporary) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({2, 2}));
    const MLP second = mlp({2, 2});
    fx::save(dir / "m.safetensors", second);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
    MLP back = mlp({2, 2});
    fx::load(dir / "m.safetensors", back);
    expect_same_model(back, second);
}

// A kill cannot show that a save reaches the disk (the page cache survives it), so the calls are
// watched: the data goes to disk in its temporary file before the rename, then the folder, which
// makes the rename durable. (Dropping the file's fsync survived every other test: scripts/mutate.sh.)
TEST(IOAtomic, ASaveFsyncsItsTemporaryFileThenTheFolder) {
    ScratchDir dir;
    fsync_counting::clear();
    fx::save(dir / "m.safetensors", mlp({2, 2}));
    const auto synced = fsync_counting::synced();
    const std::string folder = std::filesystem::canonical(dir.path()).string();
    ASSERT_EQ(synced.size(), 2u) << ::testing::PrintToString(synced);
    EXPECT_EQ(synced[0].rfind(folder + "/.m.safetensors.tmp-", 0), 0u) << synced[0];
    EXPECT_EQ(synced[1], folder);
}

// A writer killed mid-save leaves its temporary file; the next successful save of the same file on
// this machine removes it once its process is gone, and leaves the files of live processes and of
// other machines alone.
TEST(IOAtomic, ASaveRemovesTheTemporariesOfKilledWriters) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({2, 2}));
    std::string temporary;
    {
        fx::detail::AtomicFile file(dir / "m.safetensors", "save");
        temporary = file.temporary_path().filename().string();  // .m.safetensors.tmp-HOST-PID-N
    }
    const std::string host_prefix = temporary.substr(0, temporary.rfind('-', temporary.rfind('-') - 1) + 1);
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    ASSERT_GT(child, 0);
    ::waitpid(child, nullptr, 0);  // a process that is gone
    const std::string dead = host_prefix + std::to_string(child) + "-0";
    const std::string alive = host_prefix + std::to_string(::getppid()) + "-0";
    const std::string elsewhere = ".m.safetensors.tmp-another_machine-" + std::to_string(child) + "-0";
    const std::string other_file = ".n.safetensors.tmp" + host_prefix.substr(host_prefix.find(".tmp") + 4) +
                                   std::to_string(child) + "-0";
    for (const auto& name : {dead, alive, elsewhere, other_file}) std::ofstream(dir / name) << "partial";
    fx::save(dir / "m.safetensors", mlp({2, 2}));
    std::vector<std::string> expected{alive, elsewhere, other_file, "m.safetensors"};
    std::sort(expected.begin(), expected.end());
    std::vector<std::string> found = dir.entries();
    std::sort(found.begin(), found.end());
    EXPECT_EQ(found, expected);
}

TEST(IOAtomic, RelativePathsWriteIntoTheWorkingFolder) {
    ScratchDir dir;
    const auto previous = std::filesystem::current_path();
    std::filesystem::current_path(dir.path());
    const MLP saved = mlp({2, 3});
    fx::save("relative.safetensors", saved);
    MLP loaded = mlp({2, 3});
    fx::load("relative.safetensors", loaded);
    std::filesystem::current_path(previous);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"relative.safetensors"});
    expect_same_model(loaded, saved);
}

TEST(IOAtomic, MissingFolderOrFileAsFolderIsAClearError) {
    ScratchDir dir;
    const std::string missing = message_of([&] { fx::save(dir / "no" / "such" / "m.safetensors", mlp({2, 2})); });
    EXPECT_NE(missing.find("no/such"), std::string::npos) << missing;
    EXPECT_NE(missing.find("No such file or directory"), std::string::npos) << missing;

    io_test::write_bytes(dir / "plain", "x");
    const std::string not_folder = message_of([&] { fx::save(dir / "plain" / "m.safetensors", mlp({2, 2})); });
    EXPECT_NE(not_folder.find("Not a directory"), std::string::npos) << not_folder;
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"plain"});
}

TEST(IOAtomic, SavingOverAFolderFailsAndLeavesNoTemporary) {
    ScratchDir dir;
    std::filesystem::create_directory(dir / "taken");
    const std::string m = message_of([&] { fx::save(dir / "taken", mlp({2, 2})); });
    EXPECT_NE(m.find("cannot replace the file"), std::string::npos) << m;
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"taken"});
    EXPECT_TRUE(std::filesystem::is_directory(dir / "taken"));
}

TEST(IOAtomic, ExceptionMidwayKeepsThePreviousFile) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({2, 2}));
    const std::string previous = file_bytes(dir / "m.safetensors");
    try {
        fx::detail::AtomicFile file(dir / "m.safetensors", "save");
        file.write("partial", 7);
        EXPECT_TRUE(std::filesystem::exists(file.temporary_path()));
        EXPECT_EQ(file.temporary_path().parent_path(), dir.path());
        throw std::runtime_error("interrupted");
    } catch (const std::runtime_error&) {
    }
    EXPECT_EQ(file_bytes(dir / "m.safetensors"), previous);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
}

TEST(IOAtomic, FailingWriteKeepsThePreviousFileAndRemovesTheTemporary) {
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({2, 2}));
    const std::string previous = file_bytes(dir / "m.safetensors");
    const std::map<std::string, fx::Tensor> big{{"big", fx::zeros({1 << 18})}};  // 1 MiB
    std::string m;
    {
        io_test::FileSizeLimit limit(64 * 1024);
        m = message_of([&] { fx::save_state(dir / "m.safetensors", big); });
    }
    EXPECT_NE(m.find("m.safetensors"), std::string::npos) << m;
    EXPECT_NE(m.find("File too large"), std::string::npos) << m;
    EXPECT_NE(m.find("previous file"), std::string::npos) << m;
    EXPECT_EQ(file_bytes(dir / "m.safetensors"), previous);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
}

TEST(IOAtomic, ReadOnlyFolderIsAClearError) {
    if (::geteuid() == 0) GTEST_SKIP() << "running as root, which may write into read-only folders";
    ScratchDir dir;
    fx::save(dir / "m.safetensors", mlp({2, 2}));
    const std::string previous = file_bytes(dir / "m.safetensors");
    std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    const std::string m = message_of([&] { fx::save(dir / "m.safetensors", mlp({2, 2})); });
    EXPECT_NE(m.find("Permission denied"), std::string::npos) << m;
    EXPECT_EQ(file_bytes(dir / "m.safetensors"), previous);
}

}  // namespace
