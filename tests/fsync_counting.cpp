// fsync_counting.cpp — fsync, interposed: the test executable's definition is the one libfluxion's
// calls reach (the dynamic linker prefers the executable's symbols), so a test sees which files a
// save makes durable. Each call records the descriptor's path and goes on to the C library's fsync.
#include "fsync_counting.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <string>

namespace {
std::mutex g_mutex;
std::vector<std::string> g_synced;
}  // namespace

extern "C" int fsync(int fd) {
    using Fsync = int (*)(int);
    static const auto real = reinterpret_cast<Fsync>(dlsym(RTLD_NEXT, "fsync"));
    char path[PATH_MAX];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), path, sizeof path - 1);
    {
        std::lock_guard lock(g_mutex);
        g_synced.emplace_back(n > 0 ? std::string(path, std::size_t(n)) : "(fd " + std::to_string(fd) + ")");
    }
    return real(fd);
}

namespace fsync_counting {

std::vector<std::string> synced() {
    std::lock_guard lock(g_mutex);
    return g_synced;
}

void clear() {
    std::lock_guard lock(g_mutex);
    g_synced.clear();
}

}  // namespace fsync_counting
