// fuzz_idx.cpp — libFuzzer target for the IDX reader (plain and gzip-compressed): any bytes must
// either read as a header and data that agree with each other or raise IOError, never crash, read
// out of bounds or allocate beyond what the (decompressed) input holds.
// Built by fuzz/CMakeLists.txt with clang's -fsanitize=fuzzer,address; see that file for how to run it.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/datasets/idx_format.hpp"
#include "fluxion/error.hpp"

namespace {

// The reader takes a path (zlib opens it), so each input is written to an in-memory file.
int memory_file() {
    static const int fd = memfd_create("fuzz_idx", 0);
    if (fd < 0) std::abort();
    return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const int fd = memory_file();
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    try {
        const auto contents = fluxion::detail::read_idx_contents(path, "<fuzz>");
        // What an accepted file promises: 1 to 8 dimensions below 2^32 whose product, times the
        // element size, is exactly the data's length.
        if (contents.shape.empty() || contents.shape.size() > 8) std::abort();
        std::uint64_t numel = 1;
        for (auto d : contents.shape)
            if (d < 0 || d > 0xFFFFFFFF || __builtin_mul_overflow(numel, static_cast<std::uint64_t>(d), &numel))
                std::abort();
        if (numel * contents.type.bytes != contents.data.size()) std::abort();
        // Decode into a buffer of exactly numel elements: ASan reports any write past it.
        std::vector<std::byte> out(numel * fluxion::itemsize(contents.type.dtype));
        fluxion::detail::decode_idx(contents, out.data());
        return 0;
    } catch (const fluxion::IOError&) {
        return 0;  // a clear rejection is the expected outcome for most inputs
    }
}
