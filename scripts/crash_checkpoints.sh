#!/usr/bin/env bash
# crash_checkpoints.sh — the long run of the checkpoint crash test: SIGKILLs a training process at
# random moments KILLS times (default 5000), checking after each kill that the checkpoint loads
# whole, and that the resumed run ends where an unbroken run ends. See RELIABILITY.md.
#   scripts/crash_checkpoints.sh [KILLS]
# (after: cmake --build build/release --target test_io_crash)
set -euo pipefail
cd "$(dirname "$0")/.."
FLUXION_CRASH_KILLS="${1:-5000}" FLUXION_NUM_THREADS=2 \
  build/release/bin/test_io_crash --gtest_filter='IOCrash.*'
