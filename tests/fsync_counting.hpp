// fsync_counting.hpp — the files the test process has fsynced (test_io links fsync_counting.cpp,
// which interposes fsync for the whole program and passes each call on to the C library's).
#pragma once
#include <string>
#include <vector>

namespace fsync_counting {

// The paths of the files and folders fsynced since the last clear(), in order.
std::vector<std::string> synced();
void clear();

}  // namespace fsync_counting
