#!/usr/bin/env bash
# soak.sh — the long soak of issue 15: LeNet-5 trains for MINUTES (default 30) with a checkpoint
# every 20 steps and a restart from the checkpoint every 3 epochs, printing resident memory, open
# file descriptors and threads after every epoch; then an unbroken run of as many epochs must end
# with the same parameters, bit for bit. See tests/reliability/soak.cpp and RELIABILITY.md.
#   scripts/soak.sh [MINUTES]
# (after: cmake --build build/release --target soak)
set -euo pipefail
cd "$(dirname "$0")/.."
folder=$(mktemp -d)
trap 'rm -rf "$folder"' EXIT
FLUXION_NUM_THREADS=1 build/release/bin/soak "$(( ${1:-30} * 60 ))" "$folder"
