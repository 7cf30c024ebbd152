// load_under_memory_limit.cpp — loads safetensors files with little address space to spare, so that
// a reader that allocated what a header declares, before checking it against the file, would fail.
//   load_under_memory_limit MIB FILE...      each FILE must be refused with an IOError
//   load_under_memory_limit MIB --allocate=N a control: allocating N bytes must fail under the limit
// The limit is the address space in use once fluxion is set up plus MIB mebibytes (RLIMIT_AS).
// Exit status: 0 every file refused with an IOError (or the control allocation failed), 2 an
// allocation failed while loading (or the control allocation succeeded), 3 a file was accepted.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "fluxion/fluxion.hpp"
#include "fluxion/io.hpp"

namespace fx = fluxion;

namespace {

std::size_t address_space_in_use() {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    statm >> pages;
    return pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: load_under_memory_limit MIB FILE... | MIB --allocate=BYTES\n");
        return 1;
    }
    // Set up what a first load sets up (the CPU backend, plugins, thread pools) before the limit.
    const std::string small = std::string("\x08\0\0\0\0\0\0\0", 8) + "{}      ";
    (void)fx::load_state_from_memory(std::as_bytes(std::span(small.data(), small.size())), "warm-up");
    (void)fx::sum(fx::zeros({64, 64})).item();

    const std::size_t limit = address_space_in_use() + std::strtoull(argv[1], nullptr, 10) * (1u << 20);
    const rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) {
        std::perror("setrlimit");
        return 1;
    }
    if (std::strncmp(argv[2], "--allocate=", 11) == 0) {
        try {
            char* p = new char[std::strtoull(argv[2] + 11, nullptr, 10)];
            asm volatile("" : : "r"(p) : "memory");  // keeps the allocation from being elided
            std::printf("the control allocation succeeded: the limit does not bite\n");
            delete[] p;
            return 2;
        } catch (const std::bad_alloc&) {
            std::printf("the control allocation failed, as it should\n");
            return 0;
        }
    }
    for (int i = 2; i < argc; ++i) {
        try {
            (void)fx::load_state(argv[i]);
            std::printf("%s: accepted\n", argv[i]);
            return 3;
        } catch (const fx::IOError& e) {
            std::printf("%s: IOError: %s\n", argv[i], e.what());
        } catch (const std::bad_alloc&) {
            std::printf("%s: std::bad_alloc while loading\n", argv[i]);
            return 2;
        } catch (const fx::OutOfMemory& e) {
            std::printf("%s: fx::OutOfMemory while loading: %s\n", argv[i], e.what());
            return 2;
        }
    }
    return 0;
}
