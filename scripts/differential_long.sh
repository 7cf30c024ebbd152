#!/usr/bin/env bash
# differential_long.sh — the long run of issue 15's random differential test against PyTorch:
# COUNT configurations (default 2000) for each of SEEDS seeds (default 10, seeds 1..SEEDS), each
# compared with Debian's PyTorch (/usr/bin/python3) by tests/test_differential.cpp. Prints every
# mismatch with its one-line reproduction, then the configurations tried, the mismatches and the time.
#   scripts/differential_long.sh [SEEDS] [COUNT]
# (after: cmake --build build/release --target test_differential)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-10} count=${2:-2000}
binary=build/release/bin/test_differential
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s) mismatches=0
for seed in $(seq 1 "$seeds"); do
    FLUXION_DIFF_SEED=$seed FLUXION_DIFF_COUNT=$count FLUXION_NUM_THREADS=2 \
        "$binary" --gtest_filter=Differential.RandomConfigurationsMatchPyTorch >"$log" 2>&1 || true
    grep -E -A2 '^seed [0-9]+, configuration' "$log" || true
    # the summary line: "[differential] seed S: N configurations from 0, M mismatches, ..."
    summary=$(grep '^\[differential\]' "$log") || { cat "$log"; exit 1; }  # skipped or a broken script
    echo "$summary"
    mismatches=$(( mismatches + $(sed -E 's/.* ([0-9]+) mismatches.*/\1/' <<<"$summary") ))
done
echo "differential_long: seeds 1..$seeds x $count = $((seeds * count)) configurations," \
     "$mismatches mismatches, $(( $(date +%s) - start )) s"
[ "$mismatches" -eq 0 ]
