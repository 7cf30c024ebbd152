// mapped_file.cpp — mmap of whole files, with errors that say which file and why.
#include "core/io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "fluxion/error.hpp"

namespace fluxion::detail {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
    throw IOError("reading \"" + path.string() + "\": " + problem);
}

std::string reason(int error) { return std::error_code(error, std::generic_category()).message(); }

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, "cannot open the file (" + reason(errno) + ")");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int error = errno;
        ::close(fd);
        fail(path, "cannot inspect the file (" + reason(error) + ")");
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(path, "not a regular file (a directory or a device?)");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        const int error = errno;
        ::close(fd);  // the mapping keeps the file open
        if (p == MAP_FAILED) fail(path, "cannot map the file into memory (" + reason(error) + ")");
        data_ = p;
    } else {
        ::close(fd);
    }
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(data_, size_);
}

}  // namespace fluxion::detail
