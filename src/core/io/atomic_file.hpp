// atomic_file.hpp — replacing a file so that readers, and the disk after a crash, see either the
// previous content or the complete new one, never a mix or a truncated file.
#pragma once
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace fluxion::detail {

// Writes go to a temporary file in the target's folder; commit() flushes and fsyncs it, renames it
// over the target and fsyncs the folder. Destroyed without a successful commit() (an error, an
// exception midway), it removes the temporary file and the target keeps its previous content.
class AtomicFile {
public:
    // `operation` names the caller in error messages, e.g. "save".
    AtomicFile(std::filesystem::path target, std::string operation);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, std::size_t bytes);  // throws IOError (disk full, file too large, ...)
    void commit();                                     // throws IOError; the target is unchanged then

    const std::filesystem::path& temporary_path() const { return temporary_; }

private:
    [[noreturn]] void fail(const std::string& problem, int error) const;

    std::filesystem::path target_, temporary_;
    std::string operation_;
    std::FILE* file_ = nullptr;
    std::size_t written_ = 0;
    bool committed_ = false;
};

// The writer's process id in the rest of a temporary file's name after its ".NAME.tmp-HOST-"
// prefix, which is "PID-N" (both decimal, nothing after N); 0 where the rest is not that form or
// the number is no valid process id, so that a file of another name is never taken for a
// temporary (and deleted as stale). Outside data: file names in a folder others write to.
pid_t temporary_writer(std::string_view rest);

}  // namespace fluxion::detail
