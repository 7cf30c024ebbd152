// The seed corpora of the fuzz targets but safetensors' (fuzz/corpus/NAME; fuzz/seed_corpus.py
// writes them) through the library's own readers: files named valid_* are accepted, every other one
// is refused (an IOError, a ValueError for the rank variables, 0 for a name that is no temporary
// file's), and none crashes. The fuzzers' regression check, as test_io_malformed.cpp is for the
// safetensors corpus.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "core/io/atomic_file.hpp"
#include "core/io/mapped_file.hpp"
#include "core/preferences.hpp"
#include "distributed/rank_variables.hpp"
#include "fluxion/datasets.hpp"
#include "fluxion/error.hpp"
#include "fluxion/fluxion.hpp"

namespace {
namespace fs = std::filesystem;

// Runs read on every file of fuzz/corpus/`name`, which refuses one with a `Refusal`; returns how
// many there were.
template <class Refusal = fluxion::IOError>
std::size_t check_corpus(const std::string& name, const std::function<void(const fs::path&)>& read) {
    const fs::path corpus = fs::path(FLUXION_SOURCE_DIR) / "fuzz" / "corpus" / name;
    EXPECT_TRUE(fs::is_directory(corpus)) << corpus;
    if (!fs::is_directory(corpus)) return 0;
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(corpus)) {
        const std::string file = entry.path().filename().string();
        SCOPED_TRACE(file);
        ++files;
        const bool valid = file.rfind("valid_", 0) == 0;
        try {
            read(entry.path());
            EXPECT_TRUE(valid) << "accepted a file the corpus marks invalid";
        } catch (const Refusal& e) {
            EXPECT_FALSE(valid) << e.what();
        }
    }
    return files;
}

TEST(FuzzCorpora, IdxSeedsReadOrAreRefusedClearly) {
    const std::size_t files = check_corpus("idx", [](const fs::path& p) { (void)fluxion::datasets::read_idx(p); });
    EXPECT_GE(files, 21u);
}

TEST(FuzzCorpora, PreferenceSeedsReadOrAreRefusedClearly) {
    const fs::path dir = fs::temp_directory_path() / ("fluxion_fuzz_corpora_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path old = fs::current_path();
    fs::current_path(dir);
    const std::size_t files = check_corpus("preferences", [&](const fs::path& p) {
        fs::copy_file(p, dir / fluxion::detail::kPreferencesFile, fs::copy_options::overwrite_existing);
        (void)fluxion::detail::gpu_backend_preference();
    });
    fs::current_path(old);
    fs::remove_all(dir);
    EXPECT_GE(files, 16u);
}

std::string text_of(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// Names that are no "PID-N" (a sign, text after the counter, a pid wider than pid_t that was cut down
// to another process's, or to a negative process group for kill()) give 0: no file is taken for a
// stale temporary and deleted.
TEST(FuzzCorpora, TemporaryNameSeedsGiveTheirWriterOrNone) {
    const std::size_t files = check_corpus("temporary_names", [](const fs::path& p) {
        const std::string rest = text_of(p);
        const pid_t pid = fluxion::detail::temporary_writer(rest);
        if (pid == 0) throw fluxion::IOError("not a temporary file's name: '" + rest + "'");
        const std::size_t digits = rest.find_first_not_of('0');  // the pid without leading zeros
        EXPECT_EQ(std::to_string(pid), rest.substr(digits, rest.find('-') - digits));
    });
    EXPECT_GE(files, 10u);
}

// std::atoi took "1x", " 1" and "-1" for ranks and overflowed on long text (undefined behaviour).
TEST(FuzzCorpora, RankVariableSeedsGiveARankOrAClearError) {
    const std::size_t files = check_corpus<fluxion::ValueError>("rank_variables", [](const fs::path& p) {
        const std::string value = text_of(p);
        const int rank = fluxion::distributed::detail::parse_local_rank("SLURM_LOCALID", value);
        EXPECT_EQ(rank, std::stoi(value));
    });
    EXPECT_GE(files, 9u);
    try {
        (void)fluxion::distributed::detail::parse_local_rank("SLURM_LOCALID", "1x");
        ADD_FAILURE() << "1x taken for a rank";
    } catch (const fluxion::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("SLURM_LOCALID is '1x'"), std::string::npos) << e.what();
    }
}

// The checkpoint corpus (fuzz_checkpoint) through fx::load_checkpoint, into the model and rule the
// seeds were written for: the valid ones load their values, the others change nothing.
TEST(FuzzCorpora, CheckpointSeedsLoadOrAreRefusedAndChangeNothing) {
    const std::size_t files = check_corpus("checkpoint", [](const fs::path& p) {
        fluxion::Dense model(2, 1);
        auto opt = fluxion::setup(fluxion::Descent{}, model);
        const auto before = model.weight.to_vector<float>();
        try {
            (void)fluxion::load_checkpoint(p, model, opt);
        } catch (const fluxion::IOError& e) {
            EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
            EXPECT_EQ(model.weight.to_vector<float>(), before);
            for (const auto& param : opt.params) {
                EXPECT_EQ(param.t, 0);
                EXPECT_FALSE(param.frozen);
            }
            throw;
        }
        EXPECT_EQ(model.weight.to_vector<float>(), (std::vector<float>{0.5f, -0.25f}));
        ASSERT_EQ(opt.params.size(), 2u);
        for (const auto& param : opt.params)
            if (param.path == "bias") {
                EXPECT_EQ(param.t, 3);
                EXPECT_TRUE(param.frozen);  // the seeds' byte 1
            }
    });
    EXPECT_GE(files, 20u);
}

// The examples' command lines (arguments separated by NUL bytes), parsed with fuzz_command_line's options.
TEST(FuzzCorpora, CommandLineSeedsParseOrAreRefusedClearly) {
    const std::size_t files = check_corpus<std::invalid_argument>("command_line", [](const fs::path& p) {
        std::vector<std::string> args{"example"};
        std::string text = text_of(p);
        for (std::size_t start = 0;;) {
            const std::size_t end = text.find('\0', start);
            args.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
            if (end == std::string::npos) break;
            start = end + 1;
        }
        if (text.empty()) args.pop_back();
        std::vector<const char*> argv;
        for (const auto& a : args) argv.push_back(a.c_str());
        int epochs = 8;
        std::int64_t batchsize = 64;
        std::optional<std::int64_t> limit;
        double eta = 2e-3;
        std::optional<std::string> device;
        bool eager = false;
        std::string runs;
        (void)examples::parse(static_cast<int>(argv.size()), argv.data(),
                              {examples::count("--epochs", epochs), examples::count("--batchsize", batchsize),
                               examples::count("--limit", limit), examples::number("--eta", eta),
                               examples::text("--device", device), examples::toggle("--eager", eager),
                               examples::positional("runs", [&](const std::string& v) { runs = v; })});
    });
    EXPECT_GE(files, 17u);
    // What reading the parsers for their target found: --epochs (an int) was cut from 64 bits in
    // audio_like_1d, and " 3" and "+3" were taken for 3.
    auto refusal = [](std::vector<const char*> argv) {
        int epochs = 8;
        try {
            (void)examples::parse(static_cast<int>(argv.size()), argv.data(), {examples::count("--epochs", epochs)});
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return "accepted, epochs " + std::to_string(epochs);
    };
    EXPECT_EQ(refusal({"x", "--epochs", "4294967297"}), "--epochs is at most 2147483647, got '4294967297'");
    EXPECT_EQ(refusal({"x", "--epochs", " 3"}), "--epochs expects a positive whole number, got ' 3'");
    EXPECT_EQ(refusal({"x", "--epochs", "+3"}), "--epochs expects a positive whole number, got '+3'");
    EXPECT_EQ(refusal({"x", "--epochs", "03"}), "accepted, epochs 3");
}

TEST(FuzzCorpora, MappedFileSeedsMapToTheirBytes) {
    const std::size_t files = check_corpus("mapped_file", [](const fs::path& p) {
        const fluxion::detail::MappedFile mapped(p);
        const std::string want = text_of(p);
        ASSERT_EQ(mapped.bytes().size(), want.size());
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped.bytes().data()), want.size()), want);
    });
    EXPECT_GE(files, 3u);
}

}  // namespace
