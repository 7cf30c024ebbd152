// atomic_file.cpp — temporary file, fsync, rename, fsync of the folder (the POSIX recipe for
// durable replacement: rename is atomic, and the folder's fsync makes the rename itself durable).
#include "core/io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <system_error>

#include "fluxion/error.hpp"

namespace fluxion::detail {
namespace {

std::string reason(int error) { return std::error_code(error, std::generic_category()).message(); }

std::filesystem::path folder_of(const std::filesystem::path& target) {
    return target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
}

// Temporary files are named .NAME.tmp-HOST-PID-N: hidden, never matched by a glob for the target's
// name, and telling which process on which machine writes them.
std::string temporary_prefix(const std::filesystem::path& target) {
    char host[256] = "";
    if (::gethostname(host, sizeof host - 1) != 0 || !host[0]) std::snprintf(host, sizeof host, "unknown");
    for (char* c = host; *c; ++c)
        if (*c == '-' || *c == '/') *c = '_';  // keeps the fields apart
    std::string prefix(1, '.');  // appended, not added: GCC 12 warns wrongly (-Wrestrict) on "." + s
    prefix.append(target.filename().string()).append(".tmp-").append(host).append("-");
    return prefix;
}

// O_EXCL with a name unique to this process and call; retried if a stale file has that name.
std::FILE* create_temporary(const std::filesystem::path& target, std::filesystem::path& name) {
    static std::atomic<unsigned> counter{0};
    const std::string prefix = temporary_prefix(target);
    for (int attempt = 0; attempt < 100; ++attempt) {
        std::string leaf = prefix;
        leaf.append(std::to_string(::getpid())).append("-").append(std::to_string(counter++));
        name = folder_of(target) / leaf;
        const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            if (std::FILE* f = ::fdopen(fd, "wb")) return f;
            const int error = errno;
            ::close(fd);
            ::unlink(name.c_str());
            errno = error;
            return nullptr;
        }
        if (errno != EEXIST) return nullptr;
    }
    return nullptr;
}

// Removes the temporary files of `target` that writers on this machine left when they were killed
// (their process is gone), so that a run that was killed again and again does not fill the folder.
// Files of live processes, and of other machines sharing the folder, are left alone.
void remove_stale_temporaries(const std::filesystem::path& target) {
    const std::string prefix = temporary_prefix(target);
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(folder_of(target), ec)) {
        const std::string leaf = entry.path().filename().string();
        if (leaf.size() <= prefix.size() || leaf.compare(0, prefix.size(), prefix) != 0) continue;
        const pid_t pid = temporary_writer(std::string_view(leaf).substr(prefix.size()));
        if (pid <= 0 || pid == ::getpid()) continue;
        if (::kill(pid, 0) != 0 && errno == ESRCH) ::unlink(entry.path().c_str());
    }
}

// FLUXION_DEBUG_KILL_SAVE=PHASE:N, for the crash test (tests/test_io_crash.cpp): the process
// SIGKILLs itself at PHASE of its Nth commit, so that a kill lands at each step of the recipe
// deterministically, not only where a random one happens to fall.
void debug_kill_point(const char* phase, int commit) {
    static const std::string wanted = [] {
        const char* v = std::getenv("FLUXION_DEBUG_KILL_SAVE");
        return std::string(v ? v : "");
    }();
    if (!wanted.empty() && wanted == std::string(phase) + ":" + std::to_string(commit)) ::raise(SIGKILL);
}

int sync_folder(const std::filesystem::path& folder) {
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    // Some file systems cannot fsync a folder (EINVAL); the rename is as durable as they allow.
    const int error = ::fsync(fd) == 0 || errno == EINVAL ? 0 : errno;
    ::close(fd);
    return error;
}

}  // namespace

// Parsed as pid_t itself: a wider number cut down to pid_t could name another process, or (negative)
// a process group for kill().
pid_t temporary_writer(std::string_view rest) {
    const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    pid_t pid = 0;
    const char* last = rest.data() + rest.size();
    const auto [end, error] = std::from_chars(rest.data(), last, pid);
    if (rest.empty() || !is_digit(rest.front()) || error != std::errc() || end == last || *end != '-' ||
        end + 1 == last)
        return 0;
    for (const char* c = end + 1; c != last; ++c)
        if (!is_digit(*c)) return 0;
    return pid > 0 ? pid : 0;
}

AtomicFile::AtomicFile(std::filesystem::path target, std::string operation)
    : target_(std::move(target)), operation_(std::move(operation)) {
    if (!target_.has_filename()) fail("the path names a folder, not a file", 0);
    file_ = create_temporary(target_, temporary_);
    if (!file_) fail("cannot create a file in the folder \"" + folder_of(target_).string() + "\"", errno);
}

AtomicFile::~AtomicFile() {
    if (file_) std::fclose(file_);
    if (!committed_) ::unlink(temporary_.c_str());
}

void AtomicFile::fail(const std::string& problem, int error) const {
    std::string message = operation_ + "(\"" + target_.string() + "\"): " + problem;
    if (error) message += " (" + reason(error) + ")";
    throw IOError(message + "; the previous file, if any, is unchanged");
}

void AtomicFile::write(const void* data, std::size_t bytes) {
    if (bytes == 0) return;
    if (std::fwrite(data, 1, bytes, file_) != bytes)
        fail("writing failed after " + std::to_string(written_) + " bytes", errno);
    written_ += bytes;
}

void AtomicFile::commit() {
    static std::atomic<int> commits{0};
    const int commit = ++commits;
    if (std::fflush(file_) != 0) fail("writing failed after " + std::to_string(written_) + " bytes", errno);
    debug_kill_point("written", commit);
    if (::fsync(::fileno(file_)) != 0) fail("cannot flush the file to disk", errno);
    debug_kill_point("synced", commit);
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (closed != 0) fail("cannot close the file", errno);
    debug_kill_point("closed", commit);
    if (::rename(temporary_.c_str(), target_.c_str()) != 0) fail("cannot replace the file", errno);
    debug_kill_point("renamed", commit);
    committed_ = true;
    remove_stale_temporaries(target_);
    if (const int error = sync_folder(folder_of(target_)))
        throw IOError(operation_ + "(\"" + target_.string() + "\"): the file was written but its folder could not be "
                      "flushed to disk (" + reason(error) + "); it may not survive a crash");
}

}  // namespace fluxion::detail
